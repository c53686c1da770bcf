/**
 * What a person sees at a terminal (issue 16, item 6): the CLI runs in a real pseudo-terminal
 * (python3's pty module, tests/cli/pty_driver.py), answers are typed, and the transcript is
 * rendered the way a terminal shows it (carriage returns and erase-line applied).
 */

import assert from "node:assert/strict";
import { writeOciLayout } from "../support/oci_image.ts";
import { moto, motoInventory } from "../support/moto.ts";
import { freshBucket } from "./harness.ts";

const root = new URL("../../", import.meta.url).pathname;
const driver = new URL("./pty_driver.py", import.meta.url).pathname;

interface Session {
  code: number;
  transcript: string;
  unplayed: string[];
  timedOut: boolean;
}

/** Runs `podmin ARGS…` in a pseudo-terminal, typing `send` once `expect` is on screen. */
async function atTerminal(
  args: string[],
  options: { steps?: { expect: string; send: string }[]; env?: Record<string, string> } = {},
): Promise<Session & { screen: string[] }> {
  const spec = {
    argv: [Deno.execPath(), "run", "-q", "--allow-all", `${root}cli/main.ts`, ...args],
    env: options.env ?? {},
    steps: options.steps ?? [],
  };
  const r = await new Deno.Command("python3", {
    args: [driver, JSON.stringify(spec)],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(r.code, 0, new TextDecoder().decode(r.stderr));
  const session = JSON.parse(new TextDecoder().decode(r.stdout)) as Session;
  assert.equal(session.timedOut, false, `the command hung:\n${session.transcript}`);
  assert.deepEqual(session.unplayed, [], `never saw the prompt:\n${session.transcript}`);
  return { ...session, screen: render(session.transcript) };
}

/** The lines a terminal shows for `text`: \r returns, ESC[K erases to the end of the line. */
function render(text: string): string[] {
  const lines: string[][] = [[]];
  let col = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    const line = lines[lines.length - 1];
    if (c === "\r") col = 0;
    else if (c === "\n") {
      lines.push([]);
      col = 0;
    } else if (c === "\x1b") {
      const m = /^.\[([0-9;?]*)([A-Za-z])/.exec(text.slice(i)); // ESC [ params final
      if (!m) continue;
      if (m[2] === "K") line.length = col;
      i += m[0].length - 1;
    } else {
      line[col++] = c;
    }
  }
  return lines.map((l) => Array.from(l, (c) => c ?? " ").join("")).filter((l, i, all) =>
    l !== "" || i < all.length - 1
  );
}

Deno.test("terminal: teardown asks for the cluster name; a wrong answer changes nothing", async () => {
  const bucket = await freshBucket();
  const prompt = "Type the cluster name (demo) to confirm: ";
  const no = await atTerminal(["--bucket", bucket, "teardown", "--cluster", "demo"], {
    steps: [{ expect: prompt, send: "prod\r" }],
  });
  assert.equal(no.code, 2);
  assert.ok(no.screen.includes(`${prompt}prod`), no.screen.join("\n"));
  assert.ok(no.screen.includes("error: not confirmed; nothing was changed"), no.screen.join("\n"));
  const yes = await atTerminal(["--bucket", bucket, "teardown", "--cluster", "demo"], {
    steps: [{ expect: prompt, send: "demo\r" }],
  });
  assert.equal(yes.code, 0, yes.transcript);
  assert.ok(yes.screen.includes(`${prompt}demo`), yes.screen.join("\n"));
  assert.ok(
    yes.screen.some((l) =>
      /^cluster demo: no infrastructure to tear down .*nothing was changed$/.test(l)
    ),
    yes.screen.join("\n"),
  );
});

Deno.test("terminal [moto]: setup shows its plan and asks before creating anything; 'n' creates nothing", async () => {
  const m = await moto();
  await m.reset();
  const before = await motoInventory();
  const tmp = await Deno.makeTempDir({ prefix: "podmin-tty-setup-" });
  const bucket = `podmin-tty-${Date.now().toString(36)}`;
  const s = await atTerminal([
    "--bucket",
    `s3://${bucket}`,
    "setup",
    "--cluster",
    "tty",
    "--region",
    "us-east-1",
    "--vpc-cidr",
    "10.0.0.0/16",
    "--nodegroup",
    "default,size=2",
    "--ami",
    "arm64=ami-12345678",
  ], {
    env: {
      AWS_ENDPOINT_URL: m.endpoint,
      AWS_ACCESS_KEY_ID: "test",
      AWS_SECRET_ACCESS_KEY: "test",
      PODMIN_CACHE_DIR: `${tmp}/cache`,
      PODMIN_HOME: `${tmp}/home`,
    },
    steps: [{ expect: "Create cluster tty as planned above? [y/N] ", send: "n\r" }],
  });
  assert.equal(s.code, 2, s.transcript);
  const screen = s.screen.join("\n");
  assert.match(screen, new RegExp(`^Bucket:\\s+s3://${bucket} \\(will be created\\)$`, "m"));
  assert.match(
    screen,
    /^NodeGroup default:\s+2 x t4g\.medium \(arm64\), 20 GiB, zone us-east-1a$/m,
  );
  assert.match(screen, /^Create cluster tty as planned above\? \[y\/N\] n$/m);
  assert.match(screen, /^error: not confirmed; nothing was created$/m);
  const s3 = await (await fetch(`${m.endpoint}/`)).text();
  assert.doesNotMatch(s3, new RegExp(`<Name>${bucket}</Name>`), "nothing was created");
  // Nor anything else setup makes: parameters, the VPC and its parts, instances, groups.
  assert.deepEqual(await motoInventory(), before, "nothing was created on moto");
});

Deno.test("terminal: push shows one live line per blob, then the summary", async () => {
  const bucket = await freshBucket();
  const dir = await Deno.makeTempDir();
  const big = new Uint8Array(24 * 1024 * 1024);
  for (let o = 0; o < big.length; o += 65536) crypto.getRandomValues(big.subarray(o, o + 65536));
  await writeOciLayout({ dir, ref: "1.0", platforms: [{ arch: "amd64", files: { big } }] });
  const s = await atTerminal(["--bucket", bucket, "push", `oci:${dir}:1.0`, "apps/big:1.0"]);
  assert.equal(s.code, 0, s.transcript);
  assert.ok(s.transcript.includes("\r\x1b[K"), "progress is redrawn in place");
  assert.match(s.screen[0], /^pushing oci:.*:1\.0 to apps\/big:1\.0: 2 blobs, 24\.0 MiB$/);
  const blobLines = s.screen.filter((l) => l.startsWith("blob "));
  assert.equal(blobLines.length, 2, s.screen.join("\n"));
  assert.ok(blobLines.every((l) => / done$/.test(l)), s.screen.join("\n"));
  assert.ok(
    !s.screen.some((l) => /%\)/.test(l)),
    `stale progress left on screen:\n${s.screen.join("\n")}`,
  );
  assert.match(s.screen.join("\n"), /^ {2}uploaded: 2 blob\(s\), 24\.0 MiB; 0 already stored$/m);
});
