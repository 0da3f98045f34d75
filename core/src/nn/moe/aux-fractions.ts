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
import { add, empty, fromArray, full, mul, scale, sum, type Tensor } from "../../tensor/index.ts";
import { startDeferredReads } from "./readback.ts";
import { readCounts } from "./router.ts";

/** One MoE layer's statistics of the last forward that {@link loadBalancingLoss} needs (the models'
 * per-layer block records). */
export interface BlockRoutingStats {
  /** Mean router probability per expert over the layer's tokens, f32 [E]. */
  routerProbMean: Tensor;
  /** Host picks per expert, or null while only the device has them (then filled in by the read). */
  expertCounts: Int32Array | null;
  /** The picks per expert on the device (u32 [E]) when the host lacks them, else null. */
  countsDevice: Tensor | null;
  /** The picks as f32 [E] on the device ({@link layerCountsF32}), or null/absent. */
  countsF32?: Tensor | null;
}

/** Picks per expert of device choices `idx` (i32 [tokens · k], entries outside [0, E) ignored) as
 * f32 [E] on the device: ones added into a [tokens, E] one-hot matrix
 * (Backend.scatterAddAlongRows, one dispatch) summed over the tokens — integer counts, exact below
 * 2^24. Not differentiable (nothing to differentiate). @throws when idx.numel is not a multiple of
 * `tokens`. */
function expertCountsF32(idx: Tensor, numExperts: number, tokens: number): Tensor {
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

/** A layer's picks per expert as f32 [E] on the device ({@link expertCountsF32}) when a forward on
 * `be` should count them there for the load-balancing loss — a device backend (not cpu) and a
 * routing decision whose choice stayed on the device (`expertIndices`, i32 [tokens · k]) — else null. */
export function layerCountsF32(be: Tensor["be"], decision: { counts: Int32Array | null; expertIndices?: Tensor | null }, numExperts: number, tokens: number): Tensor | null {
  if (be.info.name === "cpu" || decision.counts !== null || !decision.expertIndices) return null;
  return expertCountsF32(decision.expertIndices, numExperts, tokens);
}

/**
 * f_e = Σ_l counts_l[e] / (L · tokens) as f32 [E] on the device when every block has its f32 device
 * counts (`countsF32`); otherwise null (the caller reads the counts). Statistics a router deferred
 * (readback.ts deferRead: the moe plugin's gate) are then not read with the counts:
 * {@link loadBalancingLoss} issues their read without waiting (readback.ts startDeferredReads).
 */
function deviceFractions(blocks: readonly { countsF32?: Tensor | null }[], tokens: number): Tensor | null {
  const L = blocks.length;
  if (L === 0 || !blocks.every((b) => b.countsF32)) return null;
  let c = blocks[0]!.countsF32!;
  for (let l = 1; l < L; l++) c = add(c, blocks[l]!.countsF32!);
  return scale(c, 1 / (L * tokens));
}

/**
 * Hugging Face's load-balancing loss (`load_balancing_loss_func`) of one forward's MoE layers,
 * before its coefficient: E · Σ_e f_e · P_e, f32 scalar, where f_e are the token fractions
 * ({@link deviceFractions} when every layer counted on the device; else every layer's counts read in
 * one batched read, router.ts readCounts, which fills in the blocks' `expertCounts`, and summed in
 * float64 on the host) and P_e the router probability averaged over all layers' tokens (= the
 * average of the per-layer means: every layer has `tokens` rows). `blocks` is non-empty.
 */
export async function loadBalancingLoss(be: Tensor["be"], blocks: BlockRoutingStats[], numExperts: number, tokens: number): Promise<Tensor> {
  const L = blocks.length;
  const E = numExperts;
  let fracT = deviceFractions(blocks, tokens);
  if (fracT) startDeferredReads(); // the routers' deferred statistics: read, not waited for
  else {
    const host = await readCounts(blocks.map((b) => ({ counts: b.expertCounts, expertCounts: b.countsDevice })));
    blocks.forEach((b, l) => (b.expertCounts = host[l]!));
    const frac = new Float64Array(E);
    for (const b of blocks) for (let e = 0; e < E; e++) frac[e]! += b.expertCounts![e]! / (L * tokens);
    fracT = fromArray(be, frac, [E]);
  }
  let pSum = blocks[0]!.routerProbMean;
  for (let l = 1; l < L; l++) pSum = add(pSum, blocks[l]!.routerProbMean);
  const pMean = scale(pSum, 1 / L);
  return scale(sum(mul(pMean, fracT)), E);
}
