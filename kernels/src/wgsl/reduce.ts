/**
 * Reduction of the middle axis of an [outer, n, inner] f32 array (sum, mean, max, sum of squares).
 *
 * Three deterministic forms:
 * - n ≤ 64: one invocation per output loops over n in order;
 * - inner ≥ 32 (column-like: neighbouring outputs are neighbours in memory): two stages, invocation
 *   (o, chunk, i) folds rows [32·chunk, 32·chunk + 32) into a scratch of partials (coalesced across
 *   i), then one invocation per output folds its partials in chunk order;
 * - otherwise one workgroup per output, invocation t accumulating j = t, t+64, … in order, then a
 *   fixed tree (workgroup-reduce.ts).
 */
import type { Buf, ReduceOp } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { entry, EW_WG, groups, ROW_WG, u32s, memoKernel } from "./launch.ts";
import { NEG_BIG, treeReduce } from "./workgroup-reduce.ts";

/** Rows folded per partial in the two-stage (column) form. */
export const REDUCE_CHUNK = 32;

/** Scratch f32 elements the reduction of [outer, n, inner] needs (0 for the one-pass forms). */
export function reduceScratch(outer: number, n: number, inner: number): number {
  return usesChunks(n, inner) ? outer * Math.ceil(n / REDUCE_CHUNK) * inner : 0;
}

function usesChunks(n: number, inner: number): boolean {
  return n > 64 && inner >= 32;
}

/** WGSL pieces of `op`: start value, the term of element `v`, the statement folding term `t` into
 * `acc`, and the result expression of `acc`. */
function opWgsl(op: ReduceOp): { init: string; term: string; combine: string; finish: string } {
  const isMax = op === "max";
  return {
    init: isMax ? NEG_BIG : "0.0",
    term: op === "sumsq" ? "v * v" : "v",
    combine: isMax ? "acc = max(acc, t);" : "acc = acc + t;",
    finish: op === "mean" ? "acc / f32(P.n)" : "acc",
  };
}

/** Launches of reduce(op) over the middle axis ([] when there is no output); `scratch` must hold
 * {@link reduceScratch} f32 elements when that is non-zero (else it is unused and may be null). */
export function reduceLaunches(op: ReduceOp, x: Buf, xoff: number, out: Buf, ooff: number, outer: number, n: number, inner: number, scratch: Buf | null): Launch[] {
  if (outer * inner === 0) return [];
  if (!usesChunks(n, inner)) return [reduceLaunch(op, x, xoff, out, ooff, outer, n, inner)!];
  if (!scratch) throw new Error("webgpu reduce: the two-stage form needs a scratch buffer");
  const nch = Math.ceil(n / REDUCE_CHUNK);
  const { init, term, combine, finish } = opWgsl(op);
  const s1: Kernel = memoKernel(`reduce_${op}_chunks`, () => ({
    label: `reduce_${op}_chunks`,
    buffers: [
      { name: "b_x", type: "f32", write: false },
      { name: "b_part", type: "f32", write: true },
    ],
    params: u32s("xoff", "outer", "n", "inner", "nch"),
    code: `${entry(EW_WG)} {
  let t0 = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (t0 >= P.outer * P.nch * P.inner) { return; }
  let ii = t0 % P.inner;
  let ch = (t0 / P.inner) % P.nch;
  let oi = t0 / (P.inner * P.nch);
  var acc: f32 = ${init};
  let j1 = min(P.n, (ch + 1u) * ${REDUCE_CHUNK}u);
  for (var j = ch * ${REDUCE_CHUNK}u; j < j1; j = j + 1u) {
    let v = b_x[P.xoff + (oi * P.n + j) * P.inner + ii];
    let t = ${term};
    ${combine}
  }
  b_part[t0] = acc;
}`,
  }));
  const s2: Kernel = memoKernel(`reduce_${op}_combine`, () => ({
    label: `reduce_${op}_combine`,
    buffers: [
      { name: "b_part", type: "f32", write: false },
      { name: "b_out", type: "f32", write: true },
    ],
    params: u32s("ooff", "outer", "n", "inner", "nch"),
    code: `${entry(EW_WG)} {
  let o = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (o >= P.outer * P.inner) { return; }
  let oi = o / P.inner;
  let ii = o % P.inner;
  var acc: f32 = ${init};
  for (var ch = 0u; ch < P.nch; ch = ch + 1u) {
    let t = b_part[(oi * P.nch + ch) * P.inner + ii];
    ${combine}
  }
  b_out[P.ooff + o] = ${finish};
}`,
  }));
  return [
    { kernel: s1, bufs: [x, scratch], params: [xoff, outer, n, inner, nch], workgroups: groups(outer * nch * inner) },
    { kernel: s2, bufs: [scratch, out], params: [ooff, outer, n, inner, nch], workgroups: groups(outer * inner) },
  ];
}

/** Launch of reduce(op) in one pass (serial or tree form; null when there is no output). */
export function reduceLaunch(op: ReduceOp, x: Buf, xoff: number, out: Buf, ooff: number, outer: number, n: number, inner: number): Launch | null {
  const outputs = outer * inner;
  if (outputs === 0) return null;
  const { init, term, combine, finish } = opWgsl(op);
  const buffers = [
    { name: "b_x", type: "f32" as const, write: false },
    { name: "b_out", type: "f32" as const, write: true },
  ];
  const params = u32s("xoff", "ooff", "outer", "n", "inner");
  const values = [xoff, ooff, outer, n, inner];
  if (n <= 64) {
    const kernel: Kernel = memoKernel(`reduce_${op}_serial`, () => ({
      label: `reduce_${op}_serial`,
      buffers,
      params,
      code: `${entry(EW_WG)} {
  let o = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (o >= P.outer * P.inner) { return; }
  let oi = o / P.inner;
  let ii = o % P.inner;
  var acc: f32 = ${init};
  for (var j = 0u; j < P.n; j = j + 1u) {
    let v = b_x[P.xoff + (oi * P.n + j) * P.inner + ii];
    let t = ${term};
    ${combine}
  }
  b_out[P.ooff + o] = ${finish};
}`,
    }));
    return { kernel, bufs: [x, out], params: values, workgroups: groups(outputs) };
  }
  const kernel: Kernel = memoKernel(`reduce_${op}_tree`, () => ({
    label: `reduce_${op}_tree`,
    buffers,
    params,
    code: `${treeReduce(ROW_WG)}${entry(ROW_WG)} {
  let o = wg_lin(wg, nwg);
  if (o >= P.outer * P.inner) { return; }
  let oi = o / P.inner;
  let ii = o % P.inner;
  var acc: f32 = ${init};
  for (var j = li; j < P.n; j = j + ${ROW_WG}u) {
    let v = b_x[P.xoff + (oi * P.n + j) * P.inner + ii];
    let t = ${term};
    ${combine}
  }
  acc = ${op === "max" ? "wg_max(li, acc)" : "wg_sum(li, acc)"};
  if (li == 0u) { b_out[P.ooff + o] = ${finish}; }
}`,
  }));
  return { kernel, bufs: [x, out], params: values, workgroups: outputs };
}
