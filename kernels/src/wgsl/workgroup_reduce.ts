/**
 * WGSL workgroup tree reductions over `ROW_WG` invocations, in a fixed pairing order (invocation i
 * combines with i + s for s = WG/2, WG/4, …, 1), so results are deterministic run to run.
 * Must be called from uniform control flow by every invocation of the workgroup.
 */
import { ROW_WG } from "./launch.ts";

/** WGSL defining `wg_sum(li, v)` and `wg_max(li, v)` over a workgroup of `wgSize` (power of two). */
export function treeReduce(wgSize: number = ROW_WG): string {
  if ((wgSize & (wgSize - 1)) !== 0) throw new Error(`treeReduce: workgroup size ${wgSize} is not a power of two`);
  return /* wgsl */ `
var<workgroup> red_buf: array<f32, ${wgSize}>;
fn wg_sum(li: u32, v: f32) -> f32 {
  red_buf[li] = v;
  workgroupBarrier();
  for (var s = ${wgSize / 2}u; s > 0u; s = s >> 1u) {
    if (li < s) { red_buf[li] = red_buf[li] + red_buf[li + s]; }
    workgroupBarrier();
  }
  let r = red_buf[0];
  workgroupBarrier();
  return r;
}
fn wg_max(li: u32, v: f32) -> f32 {
  red_buf[li] = v;
  workgroupBarrier();
  for (var s = ${wgSize / 2}u; s > 0u; s = s >> 1u) {
    if (li < s) { red_buf[li] = max(red_buf[li], red_buf[li + s]); }
    workgroupBarrier();
  }
  let r = red_buf[0];
  workgroupBarrier();
  return r;
}
`;
}

/** A large negative f32 used as "minus infinity" start value of max reductions (exp of it minus a
 * finite value is exactly 0, and it never produces inf − inf). */
export const NEG_BIG = "-3.0e38";
