/**
 * How the tensor-core attention kernels (attention-coop.ts) spell their cooperative-matrix
 * operations: naga's builtins (`coop_mat16x16<f16, A|B>`, `coop_mat16x16<f32, C>`, coopLoad /
 * coopLoadT (column- / row-major), coopMultiplyAdd, coopStoreT, `*` by a scalar, `+`), or a
 * plain-WGSL emulation of them for devices without the feature (lavapipe), so the kernels' tiling,
 * masks, scaling and stores can be tested there.
 *
 * The emulation follows the layout of the matmul's (matmul-coop-wgsl.ts): an accumulator fragment
 * is spread over the 32 lanes of a subgroup, lane l holding elements e = l + 32q (row e / 16,
 * column e % 16), q < 8; an A or B fragment is a reference (start, row stride, layout) into the
 * array it was "loaded" from, read when multiplied, products of f16 values summed in f32. The
 * kernels multiply a fragment before the array it refers to is next written, so the reference sees
 * what a load would have. Unlike the matmul's, the functions here are generated per array pair,
 * since the attention kernels multiply fragments of several arrays (global copies and workgroup
 * tiles).
 */

/** Spelling of the fragment operations in one kernel. */
export interface AttnCoopOps {
  readonly emulate: boolean;
  /** A zero accumulator (an expression). */
  zeroC(): string;
  /** An A or B fragment of `arr` (f16) starting at element `idx` with row stride `ld`, row-major
   * when `rowMajor`, else column-major (an expression). */
  load(role: "A" | "B", arr: string, idx: string, ld: string, rowMajor: boolean): string;
  /** c + a·b, a from array `arrA`, b from `arrB` (an expression). */
  mma(a: string, arrA: string, b: string, arrB: string, c: string): string;
  /** Row-major store of accumulator `c` into f32 array `arr` at `idx`, row stride `ld` (a statement). */
  store(c: string, arr: string, idx: string, ld: string): string;
  /** c · s for a scalar s (an expression). */
  scale(c: string, s: string): string;
  /** c + d (an expression). */
  add(c: string, d: string): string;
  /** The module-scope declarations the operations used so far need (emulation: its types and
   * functions; real: none). Call after generating the kernel body. */
  declarations(): string;
}

/** The real builtins (`enable wgpu_cooperative_matrix;`). */
function realOps(): AttnCoopOps {
  return {
    emulate: false,
    zeroC: () => "coop_mat16x16<f32, C>()",
    load: (role, arr, idx, ld, rowMajor) => `coopLoad${rowMajor ? "T" : ""}<coop_mat16x16<f16, ${role}>>(&${arr}[${idx}], ${ld})`,
    mma: (a, _arrA, b, _arrB, c) => `coopMultiplyAdd(${a}, ${b}, ${c})`,
    store: (c, arr, idx, ld) => `coopStoreT(${c}, &${arr}[${idx}], ${ld});`,
    scale: (c, s) => `(${c} * ${s})`,
    add: (c, d) => `(${c} + ${d})`,
    declarations: () => "",
  };
}

/** The plain-WGSL stand-ins (see the file comment). */
function emulatedOps(): AttnCoopOps {
  const pairs = new Set<string>();
  const stores = new Set<string>();
  return {
    emulate: true,
    zeroC: () => "EmuC()",
    load: (_role, _arr, idx, ld, rowMajor) => `EmuRef(${idx}, ${ld}, ${rowMajor})`,
    mma: (a, arrA, b, arrB, c) => {
      pairs.add(`${arrA}|${arrB}`);
      return `emu_mma_${arrA}_${arrB}(${a}, ${b}, ${c}, lane)`;
    },
    store: (c, arr, idx, ld) => {
      stores.add(arr);
      return `emu_st_${arr}(${c}, ${idx}, ${ld}, lane);`;
    },
    scale: (c, s) => `emu_scale(${c}, ${s})`,
    add: (c, d) => `emu_add(${c}, ${d})`,
    declarations: () => {
      const lines = [
        "struct EmuRef { idx: u32, ld: u32, row_major: bool }",
        "struct EmuC { v: array<f32, 8> }",
        "fn emu_at(r: EmuRef, i: u32, j: u32) -> u32 { return select(r.idx + j * r.ld + i, r.idx + i * r.ld + j, r.row_major); }",
        "fn emu_scale(c: EmuC, s: f32) -> EmuC { var r = c; for (var q = 0u; q < 8u; q++) { r.v[q] = r.v[q] * s; } return r; }",
        "fn emu_add(c: EmuC, d: EmuC) -> EmuC { var r = c; for (var q = 0u; q < 8u; q++) { r.v[q] = r.v[q] + d.v[q]; } return r; }",
      ];
      for (const p of pairs) {
        const [A, B] = p.split("|");
        lines.push(`fn emu_mma_${A}_${B}(a: EmuRef, b: EmuRef, c: EmuC, lane: u32) -> EmuC {
  var r = c;
  for (var q = 0u; q < 8u; q++) {
    let e = lane + q * 32u;
    var s = r.v[q];
    for (var k = 0u; k < 16u; k++) { s += f32(${A}[emu_at(a, e / 16u, k)]) * f32(${B}[emu_at(b, k, e % 16u)]); }
    r.v[q] = s;
  }
  return r;
}`);
      }
      for (const arr of stores) {
        lines.push(`fn emu_st_${arr}(c: EmuC, idx: u32, ld: u32, lane: u32) { for (var q = 0u; q < 8u; q++) { let e = lane + q * 32u; ${arr}[idx + (e / 16u) * ld + e % 16u] = c.v[q]; } }`);
      }
      return lines.join("\n") + "\n";
    },
  };
}

/** Fresh operation spellings for one kernel: real cooperative matrices, or their emulation. */
export function attnCoopOps(emulate: boolean): AttnCoopOps {
  return emulate ? emulatedOps() : realOps();
}
