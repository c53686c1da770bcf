/**
 * cgroup v2 attachment of socket programs (`cgroup/connect6`, `sendmsg6`, `recvmsg6`): finding
 * or mounting the cgroup2 hierarchy, opening its root, attaching programs through bpf links
 * (`bpf_program__attach_cgroup`: the kernel detaches them when the link's last fd closes, so a
 * killed process leaves nothing attached), querying what a cgroup has attached, and the
 * network-namespace cookie a program compares sockets against (`SO_NETNS_COOKIE`).
 *
 * libc calls go through `Deno.dlopen("libc.so.6")`; errno is read back with `__errno_location`
 * right after the failing call, on the same thread.
 */

import { BpfError, check, checkPointer, cString, libbpf } from "./libbpf.ts";

/** `enum bpf_attach_type` values of the socket hooks. */
export const BPF_CGROUP_INET6_CONNECT = 11;
/** cgroup/sendmsg6. */
export const BPF_CGROUP_UDP6_SENDMSG = 15;
/** cgroup/recvmsg6. */
export const BPF_CGROUP_UDP6_RECVMSG = 20;

const CGROUP2_SUPER_MAGIC = 0x63677270n;
const O_RDONLY = 0;
const O_DIRECTORY = 0o200000;
const O_CLOEXEC = 0o2000000;
const MNT_DETACH = 2;
const AF_INET6 = 10;
const SOCK_DGRAM = 2;
const SOL_SOCKET = 1;
const SO_NETNS_COOKIE = 71;

const LIBC = {
  open: { parameters: ["buffer", "i32"], result: "i32" },
  close: { parameters: ["i32"], result: "i32" },
  mount: { parameters: ["buffer", "buffer", "buffer", "u64", "pointer"], result: "i32" },
  umount2: { parameters: ["buffer", "i32"], result: "i32" },
  fstatfs: { parameters: ["i32", "buffer"], result: "i32" },
  socket: { parameters: ["i32", "i32", "i32"], result: "i32" },
  getsockopt: { parameters: ["i32", "i32", "i32", "buffer", "buffer"], result: "i32" },
  __errno_location: { parameters: [], result: "pointer" },
} as const satisfies Deno.ForeignLibraryInterface;

let libc: Deno.DynamicLibrary<typeof LIBC>["symbols"] | undefined;

function c(): Deno.DynamicLibrary<typeof LIBC>["symbols"] {
  libc ??= Deno.dlopen("libc.so.6", LIBC).symbols;
  return libc;
}

function errno(): number {
  const p = c().__errno_location();
  return p === null ? 5 : new Deno.UnsafePointerView(p).getInt32();
}

/** Throws a `BpfError` named after errno when a libc call returned -1. */
function sys(ret: number, op: string, detail?: string): number {
  if (ret < 0) throw new BpfError(op, errno(), { detail });
  return ret;
}

/** A mount of the cgroup2 hierarchy's root, from /proc/self/mountinfo text. */
export function findCgroup2Mount(mountinfo: string): string | undefined {
  for (const line of mountinfo.split("\n")) {
    const sep = line.indexOf(" - ");
    if (sep < 0) continue;
    const before = line.slice(0, sep).split(" ");
    const fstype = line.slice(sep + 3).split(" ")[0];
    // id parent major:minor root mountpoint …: only a mount of the hierarchy's root.
    if (fstype === "cgroup2" && before[3] === "/" && before[4]) {
      return before[4].replace(
        /\\([0-7]{3})/g,
        (_m, o: string) => String.fromCharCode(parseInt(o, 8)),
      );
    }
  }
  return undefined;
}

/** Options of `openCgroup2Root`. */
export interface OpenCgroup2Options {
  /** /proc/self/mountinfo text (default: read it). */
  mountinfo?: string;
  /** Where to mount cgroup2 when none is mounted (a per-process directory under it). */
  mountDir?: string;
}

/** An open fd of the cgroup2 root and how it was reached. */
export interface Cgroup2Root {
  fd: number;
  /** The mount used ("mounted" ones were mounted for this call and are gone again). */
  path: string;
  how: "found" | "mounted";
}

/**
 * Opens the root of the cgroup v2 hierarchy: through a mounted cgroup2 (Debian 12 mounts it on
 * /sys/fs/cgroup; a hybrid host on /sys/fs/cgroup/unified) or, when none is mounted (a pure
 * cgroup v1 host), through a cgroup2 mount of its own under `mountDir` that is detached again
 * right after the open (the fd keeps the hierarchy reachable; nothing stays mounted). The caller
 * closes the fd (`closeCgroup`).
 */
export function openCgroup2Root(options: OpenCgroup2Options = {}): Cgroup2Root {
  const found = findCgroup2Mount(
    options.mountinfo ?? Deno.readTextFileSync("/proc/self/mountinfo"),
  );
  if (found) return { fd: openCgroupDir(found), path: found, how: "found" };
  const dir = `${options.mountDir ?? "/run/podmin"}/cgroup2.${Deno.pid}`;
  Deno.mkdirSync(dir, { recursive: true });
  try {
    sys(
      c().mount(cString("cgroup2"), cString(dir), cString("cgroup2"), 0n, null),
      "mount",
      `cgroup2 on ${dir}`,
    );
    try {
      return { fd: openCgroupDir(dir), path: dir, how: "mounted" };
    } finally {
      c().umount2(cString(dir), MNT_DETACH);
    }
  } finally {
    try {
      Deno.removeSync(dir);
    } catch { /* busy or gone: harmless */ }
  }
}

/** Opens a cgroup2 directory; throws `ENOTDIR`-style errors or `EMEDIUMTYPE` when not cgroup2. */
export function openCgroupDir(path: string): number {
  const fd = sys(c().open(cString(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC), "open", path);
  const st = new BigInt64Array(15); // struct statfs: f_type is the first long
  if (
    c().fstatfs(fd, new Uint8Array(st.buffer)) < 0 ||
    BigInt.asUintN(64, st[0]) !== CGROUP2_SUPER_MAGIC
  ) {
    c().close(fd);
    throw new BpfError("open", 124, { detail: `${path} is not a cgroup2 mount` }); // EMEDIUMTYPE
  }
  return fd;
}

/** Closes a cgroup fd. */
export function closeCgroup(fd: number): void {
  if (fd >= 0) c().close(fd);
}

/**
 * Attaches a loaded program to a cgroup through a bpf link (the program's expected attach type,
 * from its section name, picks the hook). The link lives until `cgroupDetach` or until the
 * process exits.
 */
export function cgroupAttach(
  program: Deno.PointerObject,
  cgroupFd: number,
  name = "",
): Deno.PointerObject {
  return checkPointer(
    libbpf().sym.bpf_program__attach_cgroup(program, cgroupFd),
    "bpf_program__attach_cgroup",
    name,
  );
}

/** Destroys a cgroup link (detaches the program). */
export function cgroupDetach(link: Deno.PointerObject): void {
  check(libbpf().sym.bpf_link__destroy(link), "bpf_link__destroy");
}

/** Ids of the programs attached to a cgroup itself at one hook (`BPF_PROG_QUERY`). */
export function cgroupQuery(cgroupFd: number, attachType: number): number[] {
  const ids = new Uint32Array(64);
  const cnt = new Uint32Array([ids.length]);
  const flags = new Uint32Array(1);
  check(
    libbpf().sym.bpf_prog_query(
      cgroupFd,
      attachType,
      0,
      new Uint8Array(flags.buffer),
      new Uint8Array(ids.buffer),
      new Uint8Array(cnt.buffer),
    ),
    "bpf_prog_query",
    `attach type ${attachType}`,
  );
  return [...ids.subarray(0, cnt[0])];
}

/** The cookie of the calling thread's network namespace (`SO_NETNS_COOKIE`, kernel ≥ 5.14). */
export function netnsCookie(): bigint {
  const fd = sys(c().socket(AF_INET6, SOCK_DGRAM, 0), "socket");
  try {
    const v = new BigUint64Array(1);
    const len = new Uint32Array([8]);
    sys(
      c().getsockopt(
        fd,
        SOL_SOCKET,
        SO_NETNS_COOKIE,
        new Uint8Array(v.buffer),
        new Uint8Array(len.buffer),
      ),
      "getsockopt",
      "SO_NETNS_COOKIE",
    );
    return v[0];
  } finally {
    c().close(fd);
  }
}
