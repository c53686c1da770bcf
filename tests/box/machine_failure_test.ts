/**
 * A machine whose user-data fails (issue 31 item 2, failure behaviour): a node's user-data whose
 * kubelet in the bucket does not match its pinned sha256 stops before installing anything; the
 * harness's wait fails naming the machine and the unit, with the machine's cloud-init output (the
 * user-data's own error lines) and the journal of the failed unit; the machine has nothing
 * installed.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { dependencyBlobKey } from "../../core/bucket/bucket_layout.ts";
import { buildVmconfigArchive } from "../../vmconfig/archive.ts";
import { type Dependency, dependency, renderUserData } from "../../vmconfig/render_user_data.ts";
import { openBoxRun } from "../support/box_run.ts";
import { createVpc } from "../support/box_vpc.ts";
import { mustRun } from "../support/command.ts";
import { Machine, MachineError } from "../support/machine.ts";
import { moto } from "../support/moto.ts";
import { testWith } from "../support/requirements.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const enc = new TextEncoder();

testWith(
  "machine: a node whose user-data fails (a tampered kubelet) is reported with its cloud-init output and the failed unit's journal; nothing is installed",
  { root: true, tools: ["systemd-nspawn", "mmdebstrap", "nsenter", "unshare", "ip", "nft"] },
  async () => {
    const rootfs = (await mustRun("bash", [path.join(ROOT, "tests/peers/build_machine_rootfs.sh")]))
      .trim();
    const m = await moto();
    const bucket = await m.createBucket();
    const s3 = new S3Client({ region: "us-east-1", forcePathStyle: true });
    const vmconfig = buildVmconfigArchive();
    const files: Array<[string, string, Uint8Array]> = [
      ["vmconfig", vmconfig.version, vmconfig.bytes],
      ...["containerd", "runc", "cni-plugins", "crictl", "kubelet", "coredns", "podmin-agent"].map(
        (n) =>
          [n, "1.0.0", enc.encode(`${n} stand-in: never installed`)] as [
            string,
            string,
            Uint8Array,
          ],
      ),
    ];
    const deps: Dependency[] = [];
    for (const [name, version, bytes] of files) {
      const d = dependency(name, version, bytes);
      // The kubelet in the bucket: same size, one byte changed; only its digest can tell.
      const body = name === "kubelet" ? bytes.map((b, i) => i === 0 ? b ^ 1 : b) : bytes;
      await s3.send(
        new PutObjectCommand({ Bucket: bucket, Key: dependencyBlobKey(d.sha256), Body: body }),
      );
      deps.push(d);
    }
    s3.destroy();

    const run = await openBoxRun();
    const vpc = await createVpc(run);
    try {
      const exposed = vpc.expose(m.port);
      const userData = renderUserData({
        cluster: "box",
        bucket,
        region: "us-east-1",
        nodeGroup: "workers",
        architecture: "amd64",
        dependencies: deps,
        s3BaseUrl: `${exposed.url}/${bucket}`,
      });
      const machine = await Machine.create({
        run,
        vpc,
        name: "f0",
        index: 0,
        rootfs,
        userData: userData.text,
      });
      await machine.boot();
      const err = await machine.waitUserData(5 * 60_000).then(() => undefined, (e) => e);
      assert.ok(err instanceof MachineError, `the wait fails with a MachineError: ${err}`);
      assert.match(err.message, /^f0: the user-data failed \(failed\/failed \(exit-code\)\)/);
      // The cloud-init output: the user-data's own lines.
      assert.match(err.report, /--- f0: \/var\/log\/cloud-init-output\.log\n/);
      assert.match(err.report, /podmin-user-data: error: sha256 mismatch for kubelet 1\.0\.0/);
      assert.match(err.report, /dependency verification failed; nothing installed/);
      // The failed unit named, with its journal.
      assert.match(err.report, /--- f0: failed units: podmin-box-user-data\.service/);
      assert.match(err.report, /--- f0: journal of podmin-box-user-data\.service\n/);
      assert.match(err.report, /podmin-box-user-data\.service: Failed with result 'exit-code'/);
      // Nothing installed: no /opt/deps, no /opt/podmin, no units.
      for (const p of ["opt/deps", "opt/podmin", "etc/systemd/system/kubelet.service"]) {
        await assert.rejects(Deno.stat(path.join(machine.root, p)), `${p} absent`);
      }
      await machine.destroy();
    } finally {
      await vpc.close();
      await run.close();
    }
  },
);
