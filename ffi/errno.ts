/**
 * Linux errno numbers (asm-generic, the same on x86_64 and aarch64) and the
 * kernel-internal and libbpf-specific codes libbpf may return.
 */

const NAMES: Record<number, string> = {
  1: "EPERM",
  2: "ENOENT",
  3: "ESRCH",
  4: "EINTR",
  5: "EIO",
  6: "ENXIO",
  7: "E2BIG",
  8: "ENOEXEC",
  9: "EBADF",
  10: "ECHILD",
  11: "EAGAIN",
  12: "ENOMEM",
  13: "EACCES",
  14: "EFAULT",
  16: "EBUSY",
  17: "EEXIST",
  18: "EXDEV",
  19: "ENODEV",
  20: "ENOTDIR",
  21: "EISDIR",
  22: "EINVAL",
  23: "ENFILE",
  24: "EMFILE",
  25: "ENOTTY",
  27: "EFBIG",
  28: "ENOSPC",
  30: "EROFS",
  32: "EPIPE",
  34: "ERANGE",
  35: "EDEADLK",
  36: "ENAMETOOLONG",
  38: "ENOSYS",
  39: "ENOTEMPTY",
  40: "ELOOP",
  61: "ENODATA",
  62: "ETIME",
  71: "EPROTO",
  74: "EBADMSG",
  75: "EOVERFLOW",
  84: "EILSEQ",
  90: "EMSGSIZE",
  93: "EPROTONOSUPPORT",
  95: "EOPNOTSUPP",
  97: "EAFNOSUPPORT",
  98: "EADDRINUSE",
  99: "EADDRNOTAVAIL",
  100: "ENETDOWN",
  101: "ENETUNREACH",
  105: "ENOBUFS",
  110: "ETIMEDOUT",
  111: "ECONNREFUSED",
  113: "EHOSTUNREACH",
  114: "EALREADY",
  115: "EINPROGRESS",
  125: "ECANCELED",
  // Kernel-internal codes that reach user space through the bpf() syscall.
  512: "ERESTARTSYS",
  524: "ENOTSUPP",
  // libbpf's own codes (enum libbpf_errno).
  4000: "LIBBPF_ERRNO__LIBELF",
  4001: "LIBBPF_ERRNO__FORMAT",
  4002: "LIBBPF_ERRNO__KVERSION",
  4003: "LIBBPF_ERRNO__ENDIAN",
  4004: "LIBBPF_ERRNO__INTERNAL",
  4005: "LIBBPF_ERRNO__RELOC",
  4006: "LIBBPF_ERRNO__LOAD",
  4007: "LIBBPF_ERRNO__VERIFY",
  4008: "LIBBPF_ERRNO__PROG2BIG",
  4009: "LIBBPF_ERRNO__KVER",
  4010: "LIBBPF_ERRNO__PROGTYPE",
  4011: "LIBBPF_ERRNO__WRNGPID",
  4012: "LIBBPF_ERRNO__INVSEQ",
  4013: "LIBBPF_ERRNO__NLPARSE",
};

/** The symbolic name of an errno (sign ignored), e.g. `ENOENT`; `E<n>` when unknown. */
export function errnoName(errno: number): string {
  const n = Math.abs(errno);
  return NAMES[n] ?? `E${n}`;
}

/** The number of a symbolic errno name, or undefined. */
export function errnoNumber(name: string): number | undefined {
  for (const [n, v] of Object.entries(NAMES)) if (v === name) return Number(n);
  return undefined;
}
