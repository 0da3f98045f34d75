/**
 * Reduction of the middle axis of an [outer, n, inner] f32 array (sum, mean, max, sum of squares).
 *
 * Two deterministic forms: for n ≤ 64, one invocation per output loops over n in order; otherwise
 * one workgroup per output, invocation t accumulating j = t, t+64, … in order, then a fixed tree
 * (workgroup_reduce.ts).
 */
import type { Buf, ReduceOp } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { entry, EW_WG, groups, ROW_WG, u32s, memoKernel } from "./launch.ts";
import { NEG_BIG, treeReduce } from "./workgroup_reduce.ts";

/** Launch of reduce(op) over the middle axis (null when there is no output). */
export function reduceLaunch(op: ReduceOp, x: Buf, xoff: number, out: Buf, ooff: number, outer: number, n: number, inner: number): Launch | null {
  const outputs = outer * inner;
  if (outputs === 0) return null;
  const isMax = op === "max";
  const init = isMax ? NEG_BIG : "0.0";
  const term = op === "sumsq" ? "v * v" : "v";
  const combine = isMax ? "acc = max(acc, t);" : "acc = acc + t;";
  const finish = op === "mean" ? "acc / f32(P.n)" : "acc";
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
  acc = ${isMax ? "wg_max(li, acc)" : "wg_sum(li, acc)"};
  if (li == 0u) { b_out[P.ooff + o] = ${finish}; }
}`,
  }));
  return { kernel, bufs: [x, out], params: values, workgroups: outputs };
}
