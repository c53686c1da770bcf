/** The Podmin release version, shared by the CLI, the agent and user-data. */
export const VERSION = "0.1.0";

/**
 * The commit a built program was made from. `cli/build.sh` stamps it into every bundle (and so
 * every compiled binary, which is compiled from the bundle) by setting
 * `globalThis.PODMIN_BUILD_COMMIT` before any module runs; a program run from a checkout says
 * "source".
 */
export function buildCommit(): string {
  const stamped = (globalThis as { PODMIN_BUILD_COMMIT?: unknown }).PODMIN_BUILD_COMMIT;
  return typeof stamped === "string" && /^[0-9a-f]{7,40}(-dirty)?$/.test(stamped)
    ? stamped
    : "source";
}

/** The line `podmin --version` and `podmin-agent --version` print. */
export function versionLine(program: string): string {
  return `${program} ${VERSION} (commit ${buildCommit()}, deno ${Deno.version.deno}, ${Deno.build.os}/${Deno.build.arch})`;
}
