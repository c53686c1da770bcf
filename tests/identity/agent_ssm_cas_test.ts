/**
 * The agent reads both CA parameters from Parameter Store, as on a node: the CAs setup creates
 * (`ensureClusterCas`: `/<cluster>/_system/workload-ca-key` and `/<cluster>/_system/cluster-ca`,
 * SecureStrings in moto's SSM), and the real podmin-agent started with exactly the command line of
 * vmconfig's podmin-agent.service (expanded as systemd does; only the test's stand-ins for the
 * dataplane, kubelet's Pods API socket and the state directories are appended). It must then
 * serve the endpoint mesh with a node certificate chained to that cluster CA (openssl verifies it
 * against the parameter's certificate, and not against another CA), and publish workload CA
 * certificates of exactly that key, here to a `--workload-ca-publish` bucket in another region
 * (eu-west-1, behind tests/support/region_redirect_proxy.ts: the agent follows S3's redirect).
 */

import assert from "node:assert/strict";
import { createPrivateKey, createPublicKey, X509Certificate } from "node:crypto";
import * as path from "node:path";
import { CreateBucketCommand, GetObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { GetParameterCommand, SSMClient } from "@aws-sdk/client-ssm";
import { ensureClusterCas, newCaPem } from "../../cli/setup/cluster_cas.ts";
import { nodeServerName } from "../../agent/mesh/node_tls.ts";
import { freePort, moto } from "../support/moto.ts";
import { nodeStateDirArgs, spawnAgent, waitFor } from "../support/programs.ts";
import { PodsApiServer } from "../support/pods_api_server.ts";
import { regionRedirectProxy } from "../support/region_redirect_proxy.ts";
import { run } from "../support/openssl_tls.ts";
import { agentUnitCommand } from "../support/systemd_args.ts";
import { testWith } from "../support/requirements.ts";

const pemBlocks = (text: string, label: string): string[] =>
  text.match(new RegExp(`-----BEGIN ${label}-----[\\s\\S]+?-----END ${label}-----`, "g")) ?? [];

/** The first PEM block of `label` in `text` (fails the test when there is none). */
function firstPem(text: string, label: string): string {
  const [first] = pemBlocks(text, label);
  assert.ok(first, `a ${label} in:\n${text}`);
  return first;
}

const spki = (key: ReturnType<typeof createPublicKey>) =>
  key.export({ type: "spki", format: "der" }).toString("base64");

testWith(
  "agent [moto]: with podmin-agent.service's flags it reads both CAs from Parameter Store: mesh certificate chained to the cluster CA, workload CA certificates of the stored key",
  { tools: ["openssl"] },
  async () => {
    const m = await moto();
    await m.reset();
    const cluster = "prod";
    const nodeId = "i-0123456789abcdef0";
    const bucket = await m.createBucket();
    const far = `far-trust-${Date.now().toString(36)}`;
    const farS3 = new S3Client({ region: "eu-west-1", forcePathStyle: true });
    await farS3.send(
      new CreateBucketCommand({
        Bucket: far,
        CreateBucketConfiguration: { LocationConstraint: "eu-west-1" },
      }),
    );
    const ssm = new SSMClient({ region: "us-east-1" });
    await ensureClusterCas({ ssm, cluster });
    const param = async (name: string) => {
      const p = await ssm.send(
        new GetParameterCommand({ Name: `/${cluster}/_system/${name}`, WithDecryption: true }),
      );
      assert.equal(p.Parameter?.Type, "SecureString", name);
      return p.Parameter!.Value!;
    };
    const clusterCaCert = firstPem(await param("cluster-ca"), "CERTIFICATE");
    const workloadKey = createPublicKey(createPrivateKey(await param("workload-ca-key")));

    const proxy = regionRedirectProxy(m.endpoint);
    const tmp = await Deno.makeTempDir({ prefix: "podmin-agent-cas-" });
    const pods = await PodsApiServer.start(path.join(tmp, "pods.sock"));
    const meshPort = await freePort();
    const { program, args } = agentUnitCommand({
      PODMIN_BUCKET: `s3://${bucket}`,
      PODMIN_REGION: "us-east-1",
      PODMIN_CLUSTER: cluster,
      PODMIN_NODEGROUP: "workers",
      PODMIN_IPV6_PREFIX: "2600:1f18:1:2:a::/80",
      PODMIN_MANIFEST_DIR: `${tmp}/manifests`,
      AGENT_INTERVAL: "2s",
      AGENT_SECRETS_INTERVAL: "60s",
      PODMIN_REGISTRY_LISTEN: "off",
      PODMIN_NODE_ID: nodeId,
      PODMIN_NODE_ADDRESS: "::1",
      PODMIN_MESH_LISTEN: `[::1]:${meshPort}`,
      PODMIN_DNS_DIR: `${tmp}/dns`,
      PODMIN_KUBELET_VERSION: "1.36.3",
      PODMIN_AGENT_CA_ARGS: `--workload-ca-publish=s3://${far}/podmin/${cluster}.pem`,
      PODMIN_AGENT_TELEMETRY_ARGS: "",
    });
    assert.equal(program, "/usr/local/bin/podmin-agent");
    // Parameter Store for both CAs: the cluster CA by flag, the workload CA key by default.
    assert.ok(args.includes("--cluster-ca=ssm"), "the unit names --cluster-ca=ssm");
    assert.ok(!args.some((a) => a.startsWith("--workload-ca-key")), "workload CA key: default ssm");
    const child = spawnAgent(
      [
        ...args,
        "--dataplane",
        "off",
        "--pods-api-socket",
        pods.socket,
        ...nodeStateDirArgs(tmp),
      ],
      { AWS_ENDPOINT_URL_S3: proxy.endpoint },
    );
    let log = "";
    const drained = (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of child.stderr) {
        log = (log + decoder.decode(chunk, { stream: true })).slice(-8000);
      }
    })();
    try {
      const caFile = path.join(tmp, "cluster-ca.crt");
      await Deno.writeTextFile(caFile, clusterCaCert);
      const sClient = (ca: string) =>
        run("openssl", [
          "s_client",
          "-connect",
          `[::1]:${meshPort}`,
          "-CAfile",
          ca,
          "-verify_return_error",
          "-verify_hostname",
          nodeServerName(cluster, nodeId),
          "-showcerts",
        ], "");
      let handshake = "";
      await waitFor("the mesh serving TLS", async () => {
        handshake = (await sClient(caFile)).text;
        return /Verify return code: 0 \(ok\)/.test(handshake);
      }, 60_000).catch((err) => {
        throw new Error(`${err.message}\nopenssl:\n${handshake}\nagent log:\n${log}`);
      });
      const served = new X509Certificate(firstPem(handshake, "CERTIFICATE"));
      assert.ok(served.checkIssued(new X509Certificate(clusterCaCert)), "issued by the cluster CA");
      assert.ok(served.verify(new X509Certificate(clusterCaCert).publicKey), "signed by its key");

      // Another CA does not verify it: the chain is the parameter's CA.
      const other = await newCaPem("another CA");
      const otherFile = path.join(tmp, "other-ca.crt");
      await Deno.writeTextFile(otherFile, other.certPem);
      const refused = await sClient(otherFile);
      assert.doesNotMatch(refused.text, /Verify return code: 0 \(ok\)/);

      // The workload CA: certificates of the stored key, published into the far region's bucket.
      let bundle = "";
      await waitFor("the workload CA bundle published", async () => {
        try {
          const got = await farS3.send(
            new GetObjectCommand({ Bucket: far, Key: `podmin/${cluster}.pem` }),
          );
          bundle = await got.Body!.transformToString();
          return pemBlocks(bundle, "CERTIFICATE").length > 0;
        } catch {
          return false;
        }
      }, 60_000).catch((err) => {
        throw new Error(`${err.message}\nagent log:\n${log}`);
      });
      const certs = pemBlocks(bundle, "CERTIFICATE").map((p) => new X509Certificate(p));
      for (const c of certs) {
        assert.ok(c.ca, "a CA certificate");
        assert.equal(spki(c.publicKey), spki(workloadKey), "of the workload CA key in SSM");
      }
      assert.ok(
        proxy.redirects.some((r) => r.includes(`/${far}/`) && r.endsWith("us-east-1 → eu-west-1")),
        `the publication followed S3's region redirect: ${proxy.redirects.join("; ")}`,
      );
    } finally {
      try {
        child.kill("SIGTERM");
      } catch { /* it has already exited (its log is in the failure) */ }
      await child.status;
      await drained;
      await pods.stop();
      await proxy.close();
      await Deno.remove(tmp, { recursive: true });
    }
  },
);
