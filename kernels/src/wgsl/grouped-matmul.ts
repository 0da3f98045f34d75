/**
 * Grouped matmul over variable-length row segments in one dispatch (`GroupedMatmulDevSpec` and
 * `GroupedWeightGradSpec` in ../backend.ts; `Backend.groupedMatmul`, whose offsets are on the host,
 * uploads them and runs the same kernel). The scheduling follows CUTLASS's grouped GEMM and
 * MegaBlocks: row tiles never straddle two groups.
 */
import type { Buf } from "../backend.ts";
import type { GroupedDevGeometry, GroupedWGradGeometry } from "../grouped-matmul-spec.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { entry, memoKernel, u32s } from "./launch.ts";

// The products with the G + 1 row offsets in a DEVICE buffer (i32), so routing never has to
// come to the host (`Backend.groupedMatmulDev` / `groupedWeightGrad`). Register-blocked 128×128
// output tiles, 256 invocations each computing an 8×8 block (rows 8·ly + a, columns 8·lx + b),
// K staged through workgroup memory 16 at a time; every product accumulates in f32, k ascending.
// The 64 accumulators and the 8 + 8 staged operands are separate named variables (the generator
// unrolls every loop over them): private arrays indexed by loop variables are placed in local
// memory by the NVIDIA driver, which made the first version of these kernels ~50× slower (0.4
// TFLOP/s on the H200).
//
// Forward / dX (groupedMatmulDev): the grid has ceil(R/128) + G row-tile slots × ceil(N/128) column
// tiles. Slot s belongs to the group g with Σ_{j<g} ceil(n_j/128) ≤ s < Σ_{j≤g} ceil(n_j/128)
// (n_j = offsets[j+1] − offsets[j]); each workgroup finds it by one uniform scan of the G counts.
// Σ_g ceil(n_g/128) ≤ ceil(R/128) + G, so every row of every group has a slot; slots past the last
// group compute nothing. Rows outside [offsets[0], offsets[G]) are not touched.
//
// Weight gradient (groupedWeightGrad): dw[g] (+)= dy[rows_g]ᵀ · x[rows_g], one workgroup per
// (group, 128×128 tile of dw[g]); the loop over the group's rows (16 at a time) has a bound read by
// `workgroupUniformLoad`, so the barriers inside stay in uniform control flow. An empty group
// writes zeros (or leaves dw[g] unchanged when accumulating).

/** Per-invocation register block edge (the tile is 16·MT square). */
const MT = 8;
/** Output tile edge of the device-offset kernels (128×128 tiles, 16-deep K steps). */
export const GROUPED_DEV_TILE = 16 * MT;
const DT = GROUPED_DEV_TILE;
const DK = 16;

function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}

// Shared body of the MT×MT register tile: `aLoad` / `bLoad` are WGSL expressions evaluated only
// when in range (the staging writes 0 otherwise), in terms of (ai, ak) and (bk, bj).
// Workgroup memory holds A as [k][i] and B as [k][j] in vec4s of 4 consecutive i (j), so each
// invocation reads its 8 rows (columns) of one k as two vec4s (its register block covers rows
// 8·ly … 8·ly + 7 and columns 8·lx … 8·lx + 7). Staging: each invocation fills whole vec4s.
// `aAlongK`: A is contiguous along k in memory (x row-major): 16 consecutive invocations take 16
// consecutive k of the same 4 rows; else (A = dyᵀ: contiguous along i) 32 consecutive invocations
// take 128 consecutive i of one k. `bAlongJ` likewise for B: contiguous along j (x, or W stored
// K×N) or along k (W stored N×K). Either way each global load is coalesced across invocations.
// Leaves accumulators acc_a_b (row 8·ly + a, column 8·lx + b of the tile).
function tileBody(aLoad: string, aOk: string, bLoad: string, bOk: string, kBegin: string, kEnd: string, aAlongK: boolean, bAlongJ: boolean): string {
  const R = range(MT);
  const V = DT / 4; // vec4s per k row of a staged tile
  const decl = R.map((a) => R.map((b) => `var acc_${a}_${b}: f32 = 0.0;`).join(" ")).join("\n  ");
  const rounds = (DT * DK) / 4 / 256; // vec4s of one operand per invocation per K step
  const stageA = range(rounds)
    .map((q) => {
      const ig = aAlongK ? `li / ${DK}u + ${q * (256 / DK)}u` : `li % ${V}u`;
      const kk = aAlongK ? `li % ${DK}u` : `li / ${V}u + ${q * (256 / V)}u`;
      const comps = range(4)
        .map((c) => `      var a_${c}: f32 = 0.0; { let ai = 4u * ig + ${c}u; if (${aOk}) { a_${c} = ${aLoad}; } }`)
        .join("\n");
      return `    {
      let ig = ${ig};
      let akk = ${kk};
      let ak = k0 + akk;
${comps}
      as_[akk * ${V}u + ig] = vec4<f32>(a_0, a_1, a_2, a_3);
    }`;
    })
    .join("\n");
  const stageB = range(rounds)
    .map((q) => {
      const jg = bAlongJ ? `li % ${V}u` : `li / ${DK}u + ${q * (256 / DK)}u`;
      const kk = bAlongJ ? `li / ${V}u + ${q * (256 / V)}u` : `li % ${DK}u`;
      const comps = range(4)
        .map((c) => `      var b_${c}: f32 = 0.0; { let bj = 4u * jg + ${c}u; if (${bOk}) { b_${c} = ${bLoad}; } }`)
        .join("\n");
      return `    {
      let jg = ${jg};
      let bkk = ${kk};
      let bk = k0 + bkk;
${comps}
      bs_[bkk * ${V}u + jg] = vec4<f32>(b_0, b_1, b_2, b_3);
    }`;
    })
    .join("\n");
  const fma = R.map((a) => R.map((b) => `acc_${a}_${b} = fma(${a < 4 ? "av0" : "av1"}[${a % 4}], ${b < 4 ? "bv0" : "bv1"}[${b % 4}], acc_${a}_${b});`).join(" ")).join("\n      ");
  return `  let ly = li / 16u;
  let lx = li % 16u;
  ${decl}
  for (var k0 = ${kBegin}; k0 < ${kEnd}; k0 = k0 + ${DK}u) {
${stageA}
${stageB}
    workgroupBarrier();
    for (var kk = 0u; kk < ${DK}u; kk = kk + 1u) {
      let av0 = as_[kk * ${V}u + 2u * ly];
      let av1 = as_[kk * ${V}u + 2u * ly + 1u];
      let bv0 = bs_[kk * ${V}u + 2u * lx];
      let bv1 = bs_[kk * ${V}u + 2u * lx + 1u];
      ${fma}
    }
    workgroupBarrier();
  }
`;
}

/** The unrolled stores of the register tile: `rowOk(a)`/`colOk(b)` guard, `index(a, b)` the element. */
function tileStores(rowExpr: (a: number) => string, rowBound: string, colExpr: (b: number) => string, colBound: string, index: string, accumulate: boolean, out: string): string {
  const R = range(MT);
  return R.map(
    (a) => `  {
    let row = ${rowExpr(a)};
    if (row < ${rowBound}) {
${R.map((b) => `      { let col = ${colExpr(b)}; if (col < ${colBound}) { let o = ${index}; ${accumulate ? `${out}[o] = ${out}[o] + acc_${a}_${b};` : `${out}[o] = acc_${a}_${b};`} } }`).join("\n")}
    }
  }`,
  ).join("\n");
}

function groupedDevKernel(transB: boolean, accumulate: boolean): Kernel {
  const label = `grouped_matmul_dev_${transB ? "tb" : "nb"}_${accumulate ? "acc" : "set"}`;
  // op(W_g)[k, j]: stored N×K with transB, else K×N
  const wLoad = transB ? "b_w[wbase + (j0 + bj) * P.K + bk]" : "b_w[wbase + bk * P.N + j0 + bj]";
  return memoKernel(label, () => ({
    label,
    buffers: [
      { name: "b_x", type: "f32", write: false },
      { name: "b_w", type: "f32", write: false },
      { name: "b_off", type: "i32", write: false },
      { name: "b_out", type: "f32", write: true },
    ],
    params: u32s("xoff", "woff", "ooff", "offoff", "G", "R", "N", "K", "strideW", "ncol"),
    code: `var<workgroup> as_: array<vec4<f32>, ${(DT * DK) / 4}>;
var<workgroup> bs_: array<vec4<f32>, ${(DT * DK) / 4}>;
fn off_at(g: u32) -> u32 { return min(u32(max(b_off[P.offoff + g], 0)), P.R); }
${entry(256)} {
  let lin = wg_lin(wg, nwg);
  let slot = lin / P.ncol;
  let j0 = (lin % P.ncol) * ${DT}u;
  // find the group of this row-tile slot (the same answer in every invocation)
  var g = P.G;
  var r0 = 0u;
  var r1 = 0u;
  var seen = 0u;
  for (var h = 0u; h < P.G; h = h + 1u) {
    let s0 = off_at(h);
    let s1 = max(off_at(h + 1u), s0);
    let t = (s1 - s0 + ${DT - 1}u) / ${DT}u;
    if (g == P.G && slot < seen + t) {
      g = h;
      r0 = s0 + (slot - seen) * ${DT}u;
      r1 = min(r0 + ${DT}u, s1);
    }
    seen = seen + t;
  }
  let wbase = P.woff + min(g, max(P.G, 1u) - 1u) * P.strideW;
${tileBody("b_x[P.xoff + (r0 + ai) * P.K + ak]", "r0 + ai < r1 && ak < P.K", wLoad, "j0 + bj < P.N && bk < P.K", "0u", "P.K", true, !transB)}
${tileStores((a) => `r0 + 8u * ly + ${a}u`, "r1", (b) => `j0 + 8u * lx + ${b}u`, "P.N", "P.ooff + row * P.N + col", accumulate, "b_out")}
}`,
  }));
}

/** Launch of {@link Backend.groupedMatmulDev} (null when nothing can be computed). */
export function groupedMatmulDevLaunch(x: Buf, xoff: number, w: Buf, woff: number, off: Buf, offoff: number, out: Buf, ooff: number, g: GroupedDevGeometry): Launch | null {
  if (g.G === 0 || g.R === 0 || g.N === 0) return null;
  const ncol = Math.ceil(g.N / DT);
  const slots = Math.ceil(g.R / DT) + g.G;
  return {
    kernel: groupedDevKernel(g.transB, g.accumulate),
    bufs: [x, w, off, out],
    params: [xoff, woff, ooff, offoff, g.G, g.R, g.N, g.K, g.strideW, ncol],
    workgroups: slots * ncol,
  };
}

function groupedWGradKernel(accumulate: boolean): Kernel {
  const label = `grouped_wgrad_dev_${accumulate ? "acc" : "set"}`;
  return memoKernel(label, () => ({
    label,
    buffers: [
      { name: "b_dy", type: "f32", write: false },
      { name: "b_x", type: "f32", write: false },
      { name: "b_off", type: "i32", write: false },
      { name: "b_dw", type: "f32", write: true },
    ],
    params: u32s("dyoff", "xoff", "dwoff", "offoff", "G", "R", "M", "N", "strideW", "nrt", "nct"),
    code: `var<workgroup> as_: array<vec4<f32>, ${(DT * DK) / 4}>;
var<workgroup> bs_: array<vec4<f32>, ${(DT * DK) / 4}>;
var<workgroup> rows_: vec2<u32>;
fn off_at(g: u32) -> u32 { return min(u32(max(b_off[P.offoff + g], 0)), P.R); }
${entry(256)} {
  let lin = wg_lin(wg, nwg);
  let per = P.nrt * P.nct;
  let g = lin / per;
  let t = lin % per;
  let i0 = (t / P.nct) * ${DT}u;
  let j0 = (t % P.nct) * ${DT}u;
  if (li == 0u) {
    var s0 = 0u;
    var s1 = 0u;
    if (g < P.G) { s0 = off_at(g); s1 = max(off_at(g + 1u), s0); }
    rows_ = vec2<u32>(s0, s1);
  }
  let rr = workgroupUniformLoad(&rows_);
  // A(i, r) = dy[r, i] (i < M), B(r, j) = x[r, j] (j < N), r over the group's rows
${tileBody("b_dy[P.dyoff + ak * P.M + i0 + ai]", "i0 + ai < P.M && ak < rr.y", "b_x[P.xoff + bk * P.N + j0 + bj]", "j0 + bj < P.N && bk < rr.y", "rr.x", "rr.y", false, true)}
  if (g >= P.G) { return; }
${tileStores((a) => `i0 + 8u * ly + ${a}u`, "P.M", (b) => `j0 + 8u * lx + ${b}u`, "P.N", "P.dwoff + g * P.strideW + row * P.N + col", accumulate, "b_dw")}
}`,
  }));
}

/** Launch of {@link Backend.groupedWeightGrad} (null when dw is empty). */
export function groupedWeightGradLaunch(dy: Buf, dyoff: number, x: Buf, xoff: number, off: Buf, offoff: number, dw: Buf, dwoff: number, g: GroupedWGradGeometry): Launch | null {
  if (g.G === 0 || g.M === 0 || g.N === 0) return null;
  const nrt = Math.ceil(g.M / DT);
  const nct = Math.ceil(g.N / DT);
  return {
    kernel: groupedWGradKernel(g.accumulate),
    bufs: [dy, x, off, dw],
    params: [dyoff, xoff, dwoff, offoff, g.G, g.R, g.M, g.N, g.strideW, nrt, nct],
    workgroups: g.G * nrt * nct,
  };
}
