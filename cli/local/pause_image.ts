/**
 * A Pod sandbox ("pause") image built locally, for a single-node cluster on a
 * host that cannot reach the upstream registry. Its one file, `/pause`, is a
 * static ELF program of about a hundred bytes written here: it blocks in a syscall
 * (pause(2) on x86-64, ppoll(2) on arm64, which has no pause) until SIGTERM or
 * SIGINT, which end it with status 0, as registry.k8s.io's pause does. No
 * compiler is needed. containerd stops a sandbox with SIGKILL; the handler is for
 * whoever else stops it with SIGTERM: as PID 1 of the Pod's PID namespace a
 * signal without a handler is ignored, so systemd stopping a Pod's scope at a
 * node's power-off would otherwise wait out its stop timeout (90 s by default).
 *
 * The image is written as an OCI image layout (an index over linux/amd64 and
 * linux/arm64, program_image.ts) that `podmin push` / `writeImage` read like any other.
 */

import { type ProgramArch, writeProgramImageLayout } from "./program_image.ts";

/** Architectures the pause program is written for. */
export type PauseArch = ProgramArch;

const BASE = 0x400000;
const HEADERS = 64 + 56;

/**
 * Machine code per architecture (assembled with clang, source in the comments): install
 * `handler` for SIGTERM (15) and SIGINT (2) with rt_sigaction from the kernel sigaction at
 * `act` (written by `pauseProgram`, right after the code), then block forever; the handler
 * exits the process with status 0. `restorer`: x86-64 requires SA_RESTORER with a return
 * trampoline; the handler never returns, so it is its own.
 */
const CODE: Record<
  PauseArch,
  { machine: number; code: number[]; handler: number; act: number; restorer: boolean }
> = {
  amd64: {
    machine: 0x3e,
    code: [
      ...[0xb8, 0x0d, 0, 0, 0], // mov eax, 13 (rt_sigaction)
      ...[0xbf, 0x0f, 0, 0, 0], // mov edi, 15 (SIGTERM)
      ...[0x48, 0x8d, 0x35, 0x2f, 0, 0, 0], // lea rsi, [rip + act]
      ...[0x31, 0xd2], // xor edx, edx (no old action)
      ...[0x41, 0xba, 0x08, 0, 0, 0], // mov r10d, 8 (sigset size)
      ...[0x0f, 0x05], // syscall
      ...[0xb8, 0x0d, 0, 0, 0], // mov eax, 13
      ...[0xbf, 0x02, 0, 0, 0], // mov edi, 2 (SIGINT)
      ...[0x0f, 0x05], // syscall
      ...[0xb8, 0x22, 0, 0, 0], // loop: mov eax, 34 (pause)
      ...[0x0f, 0x05], // syscall
      ...[0xeb, 0xf7], // jmp loop
      ...[0x31, 0xff], // handler: xor edi, edi
      ...[0xb8, 0xe7, 0, 0, 0], // mov eax, 231 (exit_group)
      ...[0x0f, 0x05], // syscall
      ...[0x0f, 0x1f, 0x80, 0, 0, 0, 0], // nop (act is 8-byte aligned)
    ],
    handler: 0x30,
    act: 0x40,
    restorer: true,
  },
  arm64: {
    machine: 0xb7,
    code: [
      0xd28001e0, // mov x0, #15 (SIGTERM)
      0x10000221, // adr x1, act
      0xd2800002, // mov x2, #0 (no old action)
      0xd2800103, // mov x3, #8 (sigset size)
      0xd28010c8, // mov x8, #134 (rt_sigaction)
      0xd4000001, // svc #0
      0xd2800040, // mov x0, #2 (SIGINT)
      0xd4000001, // svc #0
      0xd2800000, // loop: mov x0..x3, #0
      0xd2800001,
      0xd2800002,
      0xd2800003,
      0xd2800928, // mov x8, #73 (ppoll)
      0xd4000001, // svc #0
      0x17fffffa, // b loop
      0xd2800000, // handler: mov x0, #0
      0xd2800bc8, // mov x8, #94 (exit_group)
      0xd4000001, // svc #0
    ].flatMap((w) => [w & 0xff, (w >>> 8) & 0xff, (w >>> 16) & 0xff, w >>> 24]),
    handler: 0x3c,
    act: 0x48,
    restorer: false,
  },
};

/** SA_RESTORER: sa_restorer holds the handler's return trampoline. */
const SA_RESTORER = 0x04000000n;
/** The kernel's struct sigaction: handler, flags, restorer, mask (8 bytes each). */
const ACT_BYTES = 32;

/** The static ELF executable of the pause program for `arch`. */
export function pauseProgram(arch: PauseArch): Uint8Array {
  const { machine, code, handler, act, restorer } = CODE[arch];
  const size = HEADERS + act + ACT_BYTES;
  const out = new Uint8Array(size);
  const v = new DataView(out.buffer);
  out.set([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0]); // ELF, 64-bit, little-endian, version 1
  v.setUint16(16, 2, true); // ET_EXEC
  v.setUint16(18, machine, true);
  v.setUint32(20, 1, true);
  v.setBigUint64(24, BigInt(BASE + HEADERS), true); // entry
  v.setBigUint64(32, 64n, true); // program headers right after the ELF header
  v.setUint16(52, 64, true); // ELF header size
  v.setUint16(54, 56, true); // program header size
  v.setUint16(56, 1, true); // one program header
  v.setUint32(64, 1, true); // PT_LOAD
  v.setUint32(68, 5, true); // R+X
  v.setBigUint64(80, BigInt(BASE), true); // vaddr
  v.setBigUint64(88, BigInt(BASE), true); // paddr
  v.setBigUint64(96, BigInt(size), true); // file size
  v.setBigUint64(104, BigInt(size), true); // memory size
  v.setBigUint64(112, 0x1000n, true); // alignment
  out.set(code, HEADERS);
  const handlerAddress = BigInt(BASE + HEADERS + handler);
  v.setBigUint64(HEADERS + act, handlerAddress, true); // sa_handler
  v.setBigUint64(HEADERS + act + 8, restorer ? SA_RESTORER : 0n, true); // sa_flags
  v.setBigUint64(HEADERS + act + 16, restorer ? handlerAddress : 0n, true); // sa_restorer
  return out; // sa_mask: empty
}

/** Writes an OCI image layout holding the pause image for `arches`, tagged `tag`; returns `dir`. */
export async function writePauseImageLayout(
  options: { dir: string; tag: string; arches: readonly PauseArch[] },
): Promise<string> {
  return await writeProgramImageLayout({
    ...options,
    files: (arch) => [["pause", 0o755, pauseProgram(arch)]],
    config: { Entrypoint: ["/pause"] },
  });
}
