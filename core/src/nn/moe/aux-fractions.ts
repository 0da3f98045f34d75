/**
 * The token fractions of Hugging Face's load-balancing loss (`load_balancing_loss_func`:
 * f_e = picks of expert e over all MoE layers / (layers · tokens)) kept on the device, so a forward
 * whose routers chose on the device needs no host read before its backward: each layer's picks are
 * counted in f32 on the device ({@link expertCountsF32}) and {@link deviceFractions} sums them.
 *
 * Without it the model read every layer's counts at the end of the forward (router.ts readCounts):
 * the host waited for the whole forward, and the GPU then idled while the host recorded the first
 * ops of the backward — ~4.5 ms of a 380 ms mixtral-med step on the H200 (docs/performance.md
 * "Third pass: where the step idled"). The cpu backend keeps the read path (a read costs it nothing and its
 * float64 fractions are what its pinned losses were computed with).
 */
import { add, empty, full, scale, sum, type Tensor } from "../../tensor/index.ts";

/** Picks per expert of device choices `idx` (i32 [tokens · k], entries outside [0, E) ignored) as
 * f32 [E] on the device: ones added into a [tokens, E] one-hot matrix
 * (Backend.scatterAddAlongRows, one dispatch) summed over the tokens — integer counts, exact below
 * 2^24. Not differentiable (nothing to differentiate). @throws when idx.numel is not a multiple of
 * `tokens`. */
export function expertCountsF32(idx: Tensor, numExperts: number, tokens: number): Tensor {
  const n = idx.numel;
  if (tokens < 1 || n % tokens !== 0) throw new Error(`expertCountsF32: ${n} choices are not k per token for ${tokens} tokens`);
  const k = n / tokens;
  const be = idx.be;
  const ones = full(be, [n], 1);
  const onehot = empty(be, [tokens, numExperts]);
  be.scatterAddAlongRows(ones.view, idx.view, onehot.view, tokens, numExperts, k);
  ones.dispose();
  const c = sum(onehot, 0);
  onehot.dispose();
  return c;
}

/** Whether a forward on `be` should count picks on the device for the load-balancing loss: a device
 * backend (not cpu) and a routing decision whose choice stayed on the device. */
export function countOnDevice(be: Tensor["be"], decision: { counts: Int32Array | null; expertIndices?: Tensor | null }): boolean {
  return be.info.name !== "cpu" && decision.counts === null && !!decision.expertIndices;
}

/**
 * f_e = Σ_l counts_l[e] / (L · tokens) as f32 [E] on the device when every block has its f32 device
 * counts (`countsF32`); otherwise null (the caller reads the counts). Statistics a router deferred
 * (readback.ts deferRead: the moe plugin's gate) are then not read with the counts: the caller
 * issues their read without waiting (readback.ts startDeferredReads).
 */
export function deviceFractions(blocks: readonly { countsF32?: Tensor | null }[], tokens: number): Tensor | null {
  const L = blocks.length;
  if (L === 0 || !blocks.every((b) => b.countsF32)) return null;
  let c = blocks[0]!.countsF32!;
  for (let l = 1; l < L; l++) c = add(c, blocks[l]!.countsF32!);
  return scale(c, 1 / (L * tokens));
}
