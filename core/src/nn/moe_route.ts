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
 */
import { concatRows, gatherRows, reshape, scatterAddRows, sliceRows } from "../tensor/index.ts";
import { Tensor, fromArray } from "../tensor/tensor.ts";

/** What the MoE block hands to the route for one layer. */
export interface RouteRequest {
  /** Decoder layer index. */
  layer: number;
  /** Token hidden states [T, hidden] (f32). */
  x: Tensor;
  /** Chosen expert of each (token, slot) pair, row-major [T·k], on the host. */
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

/** Host-side plan of the permutation of (token, slot) pairs by expert. */
export interface PermutePlan {
  /** counts[e] = number of pairs routed to expert e. */
  counts: Int32Array;
  /** starts[e] = first row of expert e in the permuted order. */
  starts: Int32Array;
  /** pairOf[r] = pair index (t·k + slot) at permuted row r. */
  pairOf: Int32Array;
  /** tokenOf[r] = token of permuted row r. */
  tokenOf: Int32Array;
}

/** Stable counting sort of the pairs by expert. @throws on an expert index outside [0, E). */
export function permutePlan(topkIndices: Int32Array, numExperts: number, topK: number): PermutePlan {
  const n = topkIndices.length;
  const counts = new Int32Array(numExperts);
  for (let p = 0; p < n; p++) {
    const e = topkIndices[p]!;
    if (e < 0 || e >= numExperts) throw new Error(`route: expert index ${e} at pair ${p} is outside [0, ${numExperts})`);
    counts[e]!++;
  }
  const starts = new Int32Array(numExperts);
  for (let e = 1; e < numExperts; e++) starts[e] = starts[e - 1]! + counts[e - 1]!;
  const cursor = Int32Array.from(starts);
  const pairOf = new Int32Array(n);
  const tokenOf = new Int32Array(n);
  for (let p = 0; p < n; p++) {
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
    const ys = concatRows(outs);
    const w = gatherRows(reshape(topkWeights, [topkWeights.numel, 1]), pairIdx);
    return scatterAddRows(ys, tokenIdx, w, T);
  }
}
