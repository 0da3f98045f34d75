/**
 * Fused cross-entropy over rows of logits with i32 targets, one workgroup per row:
 *   loss_r = logsumexp(x_r) − x_r[t_r];  dlogits_r = (softmax(x_r) − onehot(t_r)) · gradScale.
 * Rows whose target is `ignoreIndex` get loss 0 and zero gradient. A target outside [0, vocab)
 * (and not ignoreIndex) gives loss NaN so the error is visible, and the gradient of softmax alone.
 */
import type { Buf } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { entry, f32s, memoKernel, u32s } from "./launch.ts";
import { NEG_BIG, rowWorkgroup, treeReduceMaxSum } from "./workgroup-reduce.ts";

/** Launch of the fused cross-entropy. */
export function crossEntropyLaunch(logits: Buf, loff: number, targets: Buf, toff: number, losses: Buf, lsoff: number, dlogits: Buf, doff: number, rows: number, vocab: number, ignoreIndex: number, gradScale: number): Launch {
  const W = rowWorkgroup(vocab);
  const kernel: Kernel = memoKernel(`cross_entropy_w${W}`, () => ({
    label: `cross_entropy_w${W}`,
    buffers: [
      { name: "b_x", type: "f32", write: false },
      { name: "b_t", type: "i32", write: false },
      { name: "b_loss", type: "f32", write: true },
      { name: "b_dx", type: "f32", write: true },
    ],
    params: [...u32s("loff", "toff", "lsoff", "doff", "rows", "vocab"), { name: "ignore", type: "i32" }, ...f32s("scale")],
    code: `${treeReduceMaxSum(W)}${entry(W)} {
  let r = wg_lin(wg, nwg);
  if (r >= P.rows) { return; }
  let xb = P.loff + r * P.vocab;
  let db = P.doff + r * P.vocab;
  let t = b_t[P.toff + r];
  if (t == P.ignore) {
    for (var c = li; c < P.vocab; c = c + ${W}u) { b_dx[db + c] = 0.0; }
    if (li == 0u) { b_loss[P.lsoff + r] = 0.0; }
    return;
  }
  var ms = vec2<f32>(${NEG_BIG}, 0.0);
  for (var c = li; c < P.vocab; c = c + ${W}u) { ms = online_add(ms, b_x[xb + c]); }
  ms = wg_maxsum(li, ms.x, ms.y);
  let m = ms.x;
  let s = ms.y;
  let inv = 1.0 / s;
  let valid = t >= 0 && u32(t) < P.vocab;
  for (var c = li; c < P.vocab; c = c + ${W}u) {
    let p = exp(b_x[xb + c] - m) * inv;
    b_dx[db + c] = (p - select(0.0, 1.0, valid && u32(t) == c)) * P.scale;
  }
  if (li == 0u) {
    if (valid) { b_loss[P.lsoff + r] = m + log(s) - b_x[xb + u32(t)]; }
    else { b_loss[P.lsoff + r] = bitcast<f32>(0x7fc00000u); }
  }
}`,
  }));
  return { kernel, bufs: [logits, targets, losses, dlogits], params: [loff, toff, lsoff, doff, rows, vocab, ignoreIndex, gradScale], workgroups: rows };
}
