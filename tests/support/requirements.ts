/**
 * Tests that need root, an external tool or a file outside the repository declare it here.
 * Locally a missing requirement skips the test with a printed reason; under CI=true it fails
 * the test instead, because CI installs everything and runs every test.
 */

/** What a test needs. */
export interface Requirements {
  /** Must run as root (network namespaces, eBPF, containerd). */
  root?: boolean;
  /** Executables that must be on PATH. */
  tools?: string[];
  /** Files that must exist (e.g. what CI puts beside the clone). */
  files?: URL[];
}

function exists(file: URL): boolean {
  try {
    return Deno.statSync(file).isFile;
  } catch {
    return false;
  }
}

function onPath(tool: string): boolean {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    try {
      const st = Deno.statSync(`${dir}/${tool}`);
      if (st.isFile && (st.mode ?? 0) & 0o111) return true;
    } catch { /* not here */ }
  }
  return false;
}

/** The unmet requirements, as human-readable reasons (empty when all are met). */
export function unmet(req: Requirements): string[] {
  const reasons: string[] = [];
  if (req.root && Deno.uid() !== 0) reasons.push("needs root");
  for (const t of req.tools ?? []) if (!onPath(t)) reasons.push(`needs ${t} on PATH`);
  for (const f of req.files ?? []) if (!exists(f)) reasons.push(`needs the file ${f.pathname}`);
  return reasons;
}

/**
 * Registers a test that needs root, tools or files. Skipped locally (with a reason on
 * stderr) when a requirement is missing; failed under CI.
 */
export function testWith(
  name: string,
  req: Requirements,
  fn: (t: Deno.TestContext) => Promise<void> | void,
): void {
  const reasons = unmet(req);
  const ci = Deno.env.get("CI") === "true";
  if (reasons.length && !ci) {
    console.error(
      `skipping "${name}": ${reasons.join(", ")} (tests/setup.sh installs the tools; CI runs it)`,
    );
    Deno.test({ name, ignore: true, fn });
    return;
  }
  Deno.test(name, async (t) => {
    if (reasons.length) throw new Error(`requirement missing in CI: ${reasons.join(", ")}`);
    await fn(t);
  });
}
