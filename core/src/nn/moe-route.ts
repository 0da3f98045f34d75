/**
 * The `route` hook of an MoE block (design.md "The six hooks"; Megatron-Core's token dispatcher):
 * given the router's decisions, move token rows to the experts, run them, and bring the results back
 * weighted. The default {@link LocalRoute} keeps every expert on this rank:
 *
 *   permute:   sort the T·k (token, slot) pairs by expert (stable, so ties keep token order),
 *              xs = gatherRows(x, token_of_pair)                      [T·k, hidden]
 *   experts:   expert e runs on its contiguous rows of xs (`runExpert`, which enters its unit)
 *   unpermute: out = scatterAddRows(concat(expert outputs), token_of_pair, weight_of_pair, T)
 *
 * which is exactly Hugging Face's `MixtralExperts` loop (`hidden_states[token_idx]`, expert,
 * `* top_k_weights`, `index_add_`) in the same summation order (experts ascending per token). The
 * MoE plugin replaces the route with an all_to_all_v expert-parallel one; it can reuse
 * {@link permutePlan} and the tensor ops, and must call `runExpert` for each of its local experts in
 * ascending order — also with `null` for an expert that received no rows — so unit hooks fire in
 * the same order on every rank of the expert's edp group.
 *
 * A pair whose expert index is −1 was dropped by the gate (past an expert's capacity, DeepSpeed
 * `drop_tokens`): it is not dispatched and contributes nothing (the token keeps its residual path).
 *
 * The gate ({@link MoEGate}) is the router that produces those decisions. Mixtral's built-in gate is
 * Hugging Face's (softmax, top-k, renormalise); the MoE plugin installs DeepSpeed's options
 * (capacity, drops, Switch/GShard aux loss, z-loss, noisy gating, logit clamping) through it.
 */
import { concatRows, gatherRows, reshape, scatterAddRows, sliceRows } from "../tensor/index.ts";
import { Tensor, fromArray } from "../tensor/tensor.ts";

/** What the MoE block hands to the route for one layer. */
export interface RouteRequest {
  /** Decoder layer index. */
  layer: number;
  /** Token hidden states [T, hidden] (f32). */
  x: Tensor;
  /** Chosen expert of each (token, slot) pair, row-major [T·k], on the host; −1 = dropped pair. */
  topkIndices: Int32Array;
  /** Differentiable combine weight of each pair, [T·k] (renormalised router probabilities). */
  topkWeights: Tensor;
  /** Experts in the layer (global count E). */
  numExperts: number;
  /** Slots per token (k). */
  topK: number;
  /** Run expert `e` (global index) on rows `xs` [n, hidden] → [n, hidden]. Enters and leaves the
   * expert's unit (gather/release hooks). Pass null when the expert got no rows (returns null). */
  runExpert(e: number, xs: Tensor | null): Promise<Tensor | null>;
}

/** A route implementation (the hook). */
export interface MoERoute {
  readonly name: string;
  /** Dispatch, run experts, combine; returns [T, hidden]. */
  run(req: RouteRequest): Promise<Tensor>;
}

/** What the MoE block hands to the gate (router) for one layer. */
export interface GateRequest {
  /** Decoder layer index. */
  layer: number;
  /** Normed token hidden states [T, hidden] (f32). */
  x: Tensor;
  /** Router weight [E, hidden] (`block_sparse_moe.gate.weight`). */
  weight: Tensor;
  /** Experts in the layer (E). */
  numExperts: number;
  /** Slots per token (k). */
  topK: number;
}

/** A gate's routing decision for one layer (DeepSpeed's gating output, Mixtral's router output). */
export interface GateDecision {
  /** Expert of each (token, slot) pair, row-major [T·k], host; −1 = dropped (past capacity). */
  topkIndices: Int32Array;
  /** Differentiable combine weight of each pair, [T·k] f32 (any value for dropped pairs). */
  topkWeights: Tensor;
  /** Router probabilities softmax(logits) over all E experts, [T, E] f32, differentiable. */
  probs: Tensor;
  /** Top-k picks per expert BEFORE capacity drops (histogram of the flattened [T·k] choices),
   * [E], Σ = T·k (DeepSpeed `exp_counts`). */
  counts: Int32Array;
  /** This layer's extra loss, already weighted by its coefficients (Switch/GShard aux loss, router
   * z-loss), [1]; null when there is none. Added to the training loss by the model. */
  loss: Tensor | null;
}

/** A router implementation. Mixtral uses its built-in Hugging Face router when none is set. */
export interface MoEGate {
  readonly name: string;
  /** Route one layer's tokens. */
  run(req: GateRequest): Promise<GateDecision>;
  /** Weight of Hugging Face's all-layer load-balancing loss (mixtral.ts `extraLoss`) in the
   * training loss; null = not added. */
  readonly mixtralAuxCoef: number | null;
}

/** Host-side plan of the permutation of (token, slot) pairs by expert. */
export interface PermutePlan {
  /** counts[e] = number of pairs routed to expert e. */
  counts: Int32Array;
  /** starts[e] = first row of expert e in the permuted order. */
  starts: Int32Array;
  /** pairOf[r] = pair index (t·k + slot) at permuted row r (dropped pairs have no row). */
  pairOf: Int32Array;
  /** tokenOf[r] = token of permuted row r. */
  tokenOf: Int32Array;
}

/** Stable counting sort of the pairs by expert; pairs with expert −1 (dropped) are left out.
 * @throws on an expert index outside [−1, E). */
export function permutePlan(topkIndices: Int32Array, numExperts: number, topK: number): PermutePlan {
  const n = topkIndices.length;
  const counts = new Int32Array(numExperts);
  let kept = 0;
  for (let p = 0; p < n; p++) {
    const e = topkIndices[p]!;
    if (e === -1) continue;
    if (e < 0 || e >= numExperts) throw new Error(`route: expert index ${e} at pair ${p} is outside [0, ${numExperts}) (−1 marks a dropped pair)`);
    counts[e]!++;
    kept++;
  }
  const starts = new Int32Array(numExperts);
  for (let e = 1; e < numExperts; e++) starts[e] = starts[e - 1]! + counts[e - 1]!;
  const cursor = Int32Array.from(starts);
  const pairOf = new Int32Array(kept);
  const tokenOf = new Int32Array(kept);
  for (let p = 0; p < n; p++) {
    if (topkIndices[p] === -1) continue;
    const r = cursor[topkIndices[p]!]!++;
    pairOf[r] = p;
    tokenOf[r] = Math.floor(p / topK);
  }
  return { counts, starts, pairOf, tokenOf };
}

/** Default route: all experts local (see the module comment). */
export class LocalRoute implements MoERoute {
  readonly name = "local";

  async run(req: RouteRequest): Promise<Tensor> {
    const { x, topkIndices, topkWeights, numExperts, topK } = req;
    const T = x.shape[0]!;
    const be = x.be;
    const plan = permutePlan(topkIndices, numExperts, topK);
    const tokenIdx = fromArray(be, plan.tokenOf, [plan.tokenOf.length], "i32");
    const pairIdx = fromArray(be, plan.pairOf, [plan.pairOf.length], "i32");
    const xs = gatherRows(x, tokenIdx);
    const outs: Tensor[] = [];
    for (let e = 0; e < numExperts; e++) {
      const n = plan.counts[e]!;
      const y = await req.runExpert(e, n > 0 ? sliceRows(xs, plan.starts[e]!, n) : null);
      if (y) outs.push(y);
    }
    const w = gatherRows(reshape(topkWeights, [topkWeights.numel, 1]), pairIdx);
    if (outs.length === 0) return scatterAddRows(xs, tokenIdx, w, T); // every pair dropped: zeros (0 rows)
    const ys = concatRows(outs);
    return scatterAddRows(ys, tokenIdx, w, T);
  }
}
