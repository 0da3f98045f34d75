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

/** WGSL defining `wg_maxsum(li, m, s) -> vec2<f32>`: combines per-invocation online-softmax states
 * (running max m, sum s of exp(x − m)) over a workgroup of `wgSize` in a fixed tree:
 * (m1, s1) ⊕ (m2, s2) = (M, s1·exp(m1 − M) + s2·exp(m2 − M)), M = max(m1, m2)
 * (Milakov & Gimelshein 2018, "Online normalizer calculation for softmax"). */
export function treeReduceMaxSum(wgSize: number): string {
  if ((wgSize & (wgSize - 1)) !== 0) throw new Error(`treeReduceMaxSum: workgroup size ${wgSize} is not a power of two`);
  return /* wgsl */ `
var<workgroup> ms_m: array<f32, ${wgSize}>;
var<workgroup> ms_s: array<f32, ${wgSize}>;
fn wg_maxsum(li: u32, m: f32, s: f32) -> vec2<f32> {
  ms_m[li] = m;
  ms_s[li] = s;
  workgroupBarrier();
  for (var st = ${wgSize / 2}u; st > 0u; st = st >> 1u) {
    if (li < st) {
      let m1 = ms_m[li];
      let m2 = ms_m[li + st];
      let M = max(m1, m2);
      ms_s[li] = ms_s[li] * exp(m1 - M) + ms_s[li + st] * exp(m2 - M);
      ms_m[li] = M;
    }
    workgroupBarrier();
  }
  let r = vec2<f32>(ms_m[0], ms_s[0]);
  workgroupBarrier();
  return r;
}
/** Online update of (m, s) with one value x. */
fn online_add(ms: vec2<f32>, x: f32) -> vec2<f32> {
  if (x > ms.x) { return vec2<f32>(x, ms.y * exp(ms.x - x) + 1.0); }
  return vec2<f32>(ms.x, ms.y + exp(x - ms.x));
}
`;
}

/** Workgroup size for a row kernel over `cols` columns: 256 for wide rows, else 64. */
export function rowWorkgroup(cols: number): number {
  return cols >= 2048 ? 256 : 64;
}
