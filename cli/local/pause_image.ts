/**
 * A Pod sandbox ("pause") image built locally, for a single-node cluster on a
 * host that cannot reach the upstream registry. Its one file, `/pause`, is a
 * static ELF program of a few dozen bytes written here: it blocks in a syscall
 * forever (pause(2) on x86-64, ppoll(2) on arm64, which has no pause). No
 * compiler is needed. The sandbox process never handles signals: containerd
 * stops a sandbox with SIGKILL.
 *
 * The image is written as an OCI image layout (an index over linux/amd64 and
 * linux/arm64, program_image.ts) that `podmin push` / `writeImage` read like any other.
 */

import { type ProgramArch, writeProgramImageLayout } from "./program_image.ts";

/** Architectures the pause program is written for. */
export type PauseArch = ProgramArch;

const BASE = 0x400000;
const HEADERS = 64 + 56;

/** Machine code of the blocking loop, per architecture. */
const CODE: Record<PauseArch, { machine: number; code: number[] }> = {
  // loop: mov eax, 34 (pause); syscall; jmp loop
  amd64: { machine: 0x3e, code: [0xb8, 0x22, 0, 0, 0, 0x0f, 0x05, 0xeb, 0xf7] },
  // loop: mov x0..x3, #0; mov x8, #73 (ppoll); svc #0; b loop
  arm64: {
    machine: 0xb7,
    code: [0xd2800000, 0xd2800001, 0xd2800002, 0xd2800003, 0xd2800928, 0xd4000001, 0x17fffffa]
      .flatMap((w) => [w & 0xff, (w >>> 8) & 0xff, (w >>> 16) & 0xff, w >>> 24]),
  },
};

/** The static ELF executable of the pause program for `arch`. */
export function pauseProgram(arch: PauseArch): Uint8Array {
  const { machine, code } = CODE[arch];
  const size = HEADERS + code.length;
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
  return out;
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
