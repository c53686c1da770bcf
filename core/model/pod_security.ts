/**
 * The default Pod security level of Deployments: Kubernetes' Pod Security Standards "baseline"
 * (spec §8). A Pod template that needs more (host namespaces, privileged containers, host paths,
 * host ports, extra capabilities, …) must opt out per Deployment with
 * `spec.podSecurity: privileged`; `grantsOf` says what such a template is granted.
 */

/** The Pod security levels a Deployment may declare. */
export const POD_SECURITY_LEVELS = ["baseline", "privileged"] as const;

/** One way a Pod template exceeds the baseline. */
export interface BaselineViolation {
  /** Field path under `spec.template.spec`. */
  field: string;
  /** What it grants the Pod, in operator words. */
  grants: string;
}

/** Capabilities the baseline allows to add (PSS baseline "Capabilities"). */
const BASELINE_CAPABILITIES = new Set([
  "AUDIT_WRITE",
  "CHOWN",
  "DAC_OVERRIDE",
  "FOWNER",
  "FSETID",
  "KILL",
  "MKNOD",
  "NET_BIND_SERVICE",
  "SETFCAP",
  "SETGID",
  "SETPCAP",
  "SETUID",
  "SYS_CHROOT",
]);

/** Sysctls the baseline allows (PSS baseline "Sysctls"). */
const SAFE_SYSCTLS = new Set([
  "kernel.shm_rmid_forced",
  "net.ipv4.ip_local_port_range",
  "net.ipv4.ip_unprivileged_port_start",
  "net.ipv4.tcp_syncookies",
  "net.ipv4.ping_group_range",
  "net.ipv4.ip_local_reserved_ports",
  "net.ipv4.tcp_keepalive_time",
  "net.ipv4.tcp_fin_timeout",
  "net.ipv4.tcp_keepalive_intvl",
  "net.ipv4.tcp_keepalive_probes",
]);

const SELINUX_TYPES = new Set(["", "container_t", "container_init_t", "container_kvm_t"]);

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === "object" && !Array.isArray(v);
const objOf = (v: unknown): Obj => (isObj(v) ? v : {});
const listOf = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

/** Checks a security context (Pod or container level) shared by both: seccomp, SELinux, AppArmor. */
function checkCommonContext(ctx: Obj, path: string, out: BaselineViolation[]): void {
  if (objOf(ctx.seccompProfile).type === "Unconfined") {
    out.push({ field: `${path}.seccompProfile.type`, grants: "no seccomp filter" });
  }
  if (objOf(ctx.appArmorProfile).type === "Unconfined") {
    out.push({ field: `${path}.appArmorProfile.type`, grants: "no AppArmor confinement" });
  }
  const se = objOf(ctx.seLinuxOptions);
  if (
    (se.type !== undefined && !SELINUX_TYPES.has(String(se.type))) || se.user !== undefined ||
    se.role !== undefined
  ) {
    out.push({ field: `${path}.seLinuxOptions`, grants: "a custom SELinux type, user or role" });
  }
  if (objOf(ctx.windowsOptions).hostProcess === true) {
    out.push({ field: `${path}.windowsOptions.hostProcess`, grants: "a Windows host process" });
  }
}

/** The ways a Pod template spec exceeds the baseline level (empty when it does not). */
export function baselineViolations(podSpec: unknown): BaselineViolation[] {
  const spec = objOf(podSpec);
  const out: BaselineViolation[] = [];
  if (spec.hostNetwork === true) {
    out.push({
      field: "hostNetwork",
      grants: "the node's network namespace: every host port and the node's instance credentials",
    });
  }
  if (spec.hostPID === true) {
    out.push({ field: "hostPID", grants: "the node's process namespace: every process on it" });
  }
  if (spec.hostIPC === true) {
    out.push({ field: "hostIPC", grants: "the node's IPC namespace" });
  }
  listOf(spec.volumes).forEach((v, i) => {
    const hostPath = objOf(v).hostPath;
    if (hostPath !== undefined) {
      out.push({
        field: `volumes[${i}].hostPath`,
        grants: `the node's files under ${String(objOf(hostPath).path ?? "?")}`,
      });
    }
  });
  const podCtx = objOf(spec.securityContext);
  checkCommonContext(podCtx, "securityContext", out);
  listOf(podCtx.sysctls).forEach((s, i) => {
    const name = String(objOf(s).name ?? "");
    if (!SAFE_SYSCTLS.has(name)) {
      out.push({ field: `securityContext.sysctls[${i}]`, grants: `the node-wide sysctl ${name}` });
    }
  });
  for (const group of ["initContainers", "containers"] as const) {
    listOf(spec[group]).forEach((c, i) => {
      const path = `${group}[${i}]`;
      const ctx = objOf(objOf(c).securityContext);
      if (ctx.privileged === true) {
        out.push({
          field: `${path}.securityContext.privileged`,
          grants: "a privileged container: every device and capability of the node",
        });
      }
      for (const cap of listOf(objOf(ctx.capabilities).add)) {
        if (!BASELINE_CAPABILITIES.has(String(cap))) {
          out.push({
            field: `${path}.securityContext.capabilities.add`,
            grants: `the capability ${String(cap)}`,
          });
        }
      }
      if (ctx.procMount !== undefined && ctx.procMount !== "Default") {
        out.push({ field: `${path}.securityContext.procMount`, grants: "an unmasked /proc" });
      }
      checkCommonContext(ctx, `${path}.securityContext`, out);
      listOf(objOf(c).ports).forEach((p, j) => {
        const hostPort = objOf(p).hostPort;
        if (hostPort !== undefined && hostPort !== 0) {
          out.push({
            field: `${path}.ports[${j}].hostPort`,
            grants: `the node's port ${hostPort}`,
          });
        }
      });
    });
  }
  return out;
}
