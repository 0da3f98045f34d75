/**
 * Grouped matmul over variable-length row segments in one dispatch (`GroupedMatmulSpec` in
 * ../backend.ts; the scheduling of CUTLASS's grouped GEMM and MegaBlocks: a host-built list of
 * tiles, none of which straddles two groups).
 *
 * Schedule: group g's rows [offsets[g], offsets[g+1]) are cut into tiles of at most TILE rows; the
 * tile list is uploaded as u32 triples (group, first row, rows). One workgroup computes one TILE×TILE
 * block of out: tile t of the list × column block c (workgroup index = t·ncol + c). Empty groups
 * have no tiles. Every K-step stages the tile's TILE×TILE slice of x and the TILE×TILE slice of
 * op(W_g) in workgroup memory; each invocation accumulates one output element in f32, k ascending.
 * Out-of-range rows/columns/k load 0 and store nothing; the barriers are reached by every
 * invocation (the K loop bound is uniform).
 */
import type { Buf } from "../backend.ts";
import type { GroupedMatmulGeometry } from "../grouped-matmul-spec.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { entry, memoKernel, u32s } from "./launch.ts";

/** Rows and columns of one output tile (the workgroup is TILE×TILE invocations). */
export const GROUPED_TILE = 16;

/** The tile list of `offsets`: u32 triples (group, first row, rows ≤ TILE). */
export function groupedMatmulTiles(offsets: readonly number[]): Uint32Array {
  const t: number[] = [];
  for (let g = 0; g + 1 < offsets.length; g++) {
    for (let r = offsets[g]!; r < offsets[g + 1]!; r += GROUPED_TILE) t.push(g, r, Math.min(GROUPED_TILE, offsets[g + 1]! - r));
  }
  return Uint32Array.from(t);
}

function groupedKernel(transB: boolean, accumulate: boolean): Kernel {
  const label = `grouped_matmul_${transB ? "tb" : "nb"}_${accumulate ? "acc" : "set"}`;
  const T = GROUPED_TILE;
  const wIndex = transB ? "col * P.K + kw" : "kw * P.N + col";
  const store = accumulate ? "b_out[o] = b_out[o] + acc;" : "b_out[o] = acc;";
  return memoKernel(label, () => ({
    label,
    buffers: [
      { name: "b_x", type: "f32", write: false },
      { name: "b_w", type: "f32", write: false },
      { name: "b_tiles", type: "u32", write: false },
      { name: "b_out", type: "f32", write: true },
    ],
    params: u32s("xoff", "woff", "ooff", "N", "K", "strideW", "ntiles", "ncol"),
    code: `var<workgroup> xs: array<f32, ${T * T}>;
var<workgroup> ws: array<f32, ${T * T}>;
${entry(T * T)} {
  let lin = wg_lin(wg, nwg);
  let tile = lin / P.ncol;
  let ct = lin % P.ncol;
  let valid = tile < P.ntiles;
  let ti = min(tile, P.ntiles - 1u);
  let g = b_tiles[3u * ti];
  let r0 = b_tiles[3u * ti + 1u];
  let nr = b_tiles[3u * ti + 2u];
  let ly = li / ${T}u;
  let lx = li % ${T}u;
  let row = r0 + ly;
  let col = ct * ${T}u + lx;
  let rowOk = valid && ly < nr;
  let colOk = valid && col < P.N;
  let wbase = P.woff + g * P.strideW;
  var acc: f32 = 0.0;
  for (var k0 = 0u; k0 < P.K; k0 = k0 + ${T}u) {
    let kx = k0 + lx;
    var xv: f32 = 0.0;
    if (rowOk && kx < P.K) { xv = b_x[P.xoff + row * P.K + kx]; }
    xs[ly * ${T}u + lx] = xv;
    let kw = k0 + ly;
    var wv: f32 = 0.0;
    if (colOk && kw < P.K) { wv = b_w[wbase + ${wIndex}]; }
    ws[ly * ${T}u + lx] = wv;
    workgroupBarrier();
    for (var kk = 0u; kk < ${T}u; kk = kk + 1u) { acc = acc + xs[ly * ${T}u + kk] * ws[kk * ${T}u + lx]; }
    workgroupBarrier();
  }
  if (rowOk && colOk) {
    let o = P.ooff + row * P.N + col;
    ${store}
  }
}`,
  }));
}

/** The launch of one grouped matmul (null when there is nothing to compute). `tiles` holds
 * {@link groupedMatmulTiles}(g.offsets) (ntiles = its length / 3). With K = 0 (and not
 * accumulating) the kernel writes zeros, like `matmul`. */
export function groupedMatmulLaunch(x: Buf, xoff: number, w: Buf, woff: number, tiles: Buf, ntiles: number, out: Buf, ooff: number, g: GroupedMatmulGeometry): Launch | null {
  if (ntiles === 0 || g.N === 0) return null;
  const ncol = Math.ceil(g.N / GROUPED_TILE);
  return {
    kernel: groupedKernel(g.transB, g.accumulate),
    bufs: [x, w, tiles, out],
    params: [xoff, woff, ooff, g.N, g.K, g.strideW, ntiles, ncol],
    workgroups: ntiles * ncol,
  };
}
