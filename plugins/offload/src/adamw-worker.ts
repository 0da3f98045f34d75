/**
 * Worker thread of the host AdamW pool (adamw-pool.ts): receives views of shared memory
 * (SharedArrayBuffers: nothing is copied) and a slice [lo, hi), runs {@link adamwHost} on it, answers
 * with its job id.
 */
import { adamwHost } from "./host-adamw.ts";
import type { AdamWJob, AdamWReply } from "./adamw-pool.ts";
import { serveParent } from "@zeromoe/kernels/runtime";

const post = serveParent<AdamWJob, AdamWReply>((j) => {
  try {
    const f32 = (r: { sab: SharedArrayBuffer; off: number; len: number }) => new Float32Array(r.sab, r.off, r.len);
    const grad = j.gradDtype === "f32" ? f32(j.grad) : new Uint16Array(j.grad.sab, j.grad.off, j.grad.len);
    const p16 = j.p16 ? new Uint16Array(j.p16.sab, j.p16.off, j.p16.len) : null;
    adamwHost(f32(j.master), grad, j.gradDtype, f32(j.m), f32(j.v), p16, j.p16Dtype, j.lo, j.hi, j.hp);
    post({ id: j.id, ok: true });
  } catch (err) {
    post({ id: j.id, ok: false, error: String((err as Error)?.stack ?? err) });
  }
});
