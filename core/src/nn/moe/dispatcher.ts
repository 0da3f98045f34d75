/**
 * The token dispatcher of an MoE layer (Megatron-Core's `MoETokenDispatcher`; torchtitan's token
 * reorderer + expert-parallel dispatch): `dispatch` moves each kept (token, slot) pair's row to
 * the expert that computes it and says how many rows each expert got (tokens_per_expert);
 * `combine` brings the expert outputs back and adds them, weighted, to their tokens.
 *
 * Every dispatcher here shares one permutation skeleton ({@link PermutationDispatcher}):
 *
 *   permute    plan = stable counting sort of the T·k pairs by expert ({@link permutePlan}; dropped
 *              pairs, expert −1, are left out); xs = gatherRows(x, token_of_row)      [n, hidden]
 *   exchange   (subclass) xs → the rows this rank's experts compute, grouped by expert [R, hidden]
 *              — the identity for {@link LocalDispatcher}; all_to_all_v across the ep group for
 *              the MoE plugin's expert-parallel dispatcher
 *   … experts(rows, tokens_per_expert) run between dispatch and combine (experts.ts) …
 *   exchange back (subclass) expert outputs → [n, hidden] in plan order
 *   unpermute  out = scatterAddRows(ys, token_of_row, weight_of_row, T)                [T, hidden]
 *
 * which is Hugging Face's `MixtralExperts` loop (`hidden_states[token_idx]`, expert,
 * `* top_k_weights`, `index_add_`) in the same summation order (experts ascending per token).
 * A dropped pair contributes nothing (the token keeps its residual path).
 */
import { fromArray, type Tensor } from "../../tensor/tensor.ts";
import { combineRows, dispatchRows, permuteByExpert, type DevicePermutation } from "./permutation.ts";

/** What the MoE layer hands to {@link TokenDispatcher.dispatch}. */
export interface DispatchRequest {
  /** Decoder layer index. */
  layer: number;
  /** Token hidden states [T, hidden] (f32). */
  x: Tensor;
  /** Chosen expert of each (token, slot) pair, row-major [T·k], host; −1 = dropped pair. Null when
   * the router kept the choice on the device (then `expertIndices` is required). */
  topkIndices: Int32Array | null;
  /** The same choices on the device (i32 [T·k]), used when `topkIndices` is null (host choices win
   * when both are given: a wrapping router may rewrite them). */
  expertIndices?: Tensor | null;
  /** Differentiable combine weight of each pair, [T·k] f32. */
  topkWeights: Tensor;
  /** Experts in the layer (global count E). */
  numExperts: number;
  /** Slots per token (k). */
  topK: number;
}

/** The sizes of the permutation on the host: what an exchange needs (the all_to_all_v counts). */
export interface PermuteCounts {
  /** counts[e] = number of kept pairs routed to expert e. */
  counts: Int32Array;
  /** starts[e] = first row of expert e in the permuted order. */
  starts: Int32Array;
  /** Kept pairs in all (Σ counts): the rows of the permuted order. */
  kept: number;
}

/** Host-side plan of the permutation of (token, slot) pairs by expert. */
export interface PermutePlan extends PermuteCounts {
  /** pairOf[r] = pair index (t·k + slot) at permuted row r (dropped pairs have no row). */
  pairOf: Int32Array;
  /** tokenOf[r] = token of permuted row r. */
  tokenOf: Int32Array;
}

/** What a dispatch hands to the experts, and back to {@link TokenDispatcher.combine}. */
export interface Dispatched {
  /** Rows this rank's experts compute, grouped by expert in {@link experts} order, [R, hidden]. */
  readonly rows: Tensor;
  /** The experts (global indices, ascending) this rank computes — every one of them, also those
   * that got no rows (their units are still entered, so ZeRO hooks fire alike on every rank). */
  readonly experts: readonly number[];
  /** tokensPerExpert[i] = rows of experts[i]; Σ = R — on the host when known (null when the
   * routing stayed on the device: then only {@link offsets} says where each expert's rows are). */
  readonly tokensPerExpert: Int32Array | null;
  /** Group offsets of `rows` on the device, i32 [experts.length + 1]. */
  readonly offsets: Tensor;
  /** This rank's permutation on the host: the full plan when the host has the choices, its sizes
   * only when a dispatcher that needs them ({@link PermutationDispatcher.needsHostCounts}) read
   * the device counts, else null. */
  readonly plan: PermuteCounts | null;
  /** This rank's permutation on the device (permutation.ts). */
  readonly perm: DevicePermutation;
  /** Layer index, tokens T, and the request's weights, for combine. */
  readonly layer: number;
  readonly tokens: number;
  readonly topkWeights: Tensor;
  /** The subclass's exchange state (e.g. the all_to_all_v layout). */
  readonly exchange: unknown;
}

/** A token dispatcher (the route hook supplies one; see the module comment). */
export interface TokenDispatcher {
  readonly name: string;
  /** Permute this rank's pairs by expert and move them to the ranks computing their experts. */
  dispatch(req: DispatchRequest): Promise<Dispatched>;
  /** Bring the expert outputs `expertOutput` [R, hidden] (rows as in `d.rows`) back and add them,
   * weighted, per token: returns the layer's output [T, hidden]. */
  combine(d: Dispatched, expertOutput: Tensor): Promise<Tensor>;
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
    if (e < 0 || e >= numExperts) throw new Error(`dispatcher: expert index ${e} at pair ${p} is outside [0, ${numExperts}) (−1 marks a dropped pair)`);
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
  return { counts, starts, kept, pairOf, tokenOf };
}

/** The host sizes of a permutation from its per-expert counts (no pair order). */
export function permuteCounts(counts: Int32Array): PermuteCounts {
  const starts = new Int32Array(counts.length);
  for (let e = 1; e < counts.length; e++) starts[e] = starts[e - 1]! + counts[e - 1]!;
  return { counts, starts, kept: counts.length === 0 ? 0 : starts[counts.length - 1]! + counts[counts.length - 1]! };
}

/** What a subclass's exchange returns. */
export interface ExchangeResult<S> {
  rows: Tensor;
  experts: readonly number[];
  /** Rows per expert on the host (null when unknown: then `offsets` is required). */
  tokensPerExpert: Int32Array | null;
  /** Group offsets of `rows` on the device (i32 [experts + 1]); absent = uploaded from tokensPerExpert. */
  offsets?: Tensor;
  state: S;
}

/**
 * The permutation skeleton every dispatcher shares (module comment). A subclass supplies the
 * exchange: `exchange` (plan-order rows → its experts' rows) and `exchangeBack` (its experts'
 * outputs → plan-order rows of this rank's pairs).
 */
export abstract class PermutationDispatcher<S = unknown> implements TokenDispatcher {
  abstract readonly name: string;

  /** xs [n, hidden]: this rank's kept pairs' rows in plan order → the rows its experts compute. */
  protected abstract exchange(xs: Tensor, plan: PermuteCounts | null, req: DispatchRequest, perm: DevicePermutation): Promise<ExchangeResult<S>>;

  /** Whether the exchange needs the per-expert counts on the host (an all_to_all_v's sizes): with
   * the choice on the device they are read then — one read of E integers per layer. */
  protected readonly needsHostCounts: boolean = false;

  /** expertOutput [R, hidden] (as the exchange's rows) → [n, hidden] in plan order. */
  protected abstract exchangeBack(expertOutput: Tensor, state: S, d: Dispatched): Promise<Tensor>;

  async dispatch(req: DispatchRequest): Promise<Dispatched> {
    const { x, topkIndices, topkWeights, numExperts, topK } = req;
    const T = x.shape[0]!;
    const P = T * topK;
    if (topkIndices && topkIndices.length !== P) throw new Error(`dispatcher ${this.name}: ${topkIndices.length} pairs for ${T} tokens × k = ${topK}`);
    if (req.expertIndices && req.expertIndices.numel !== P) throw new Error(`dispatcher ${this.name}: ${req.expertIndices.numel} device pairs for ${T} tokens × k = ${topK}`);
    if (!topkIndices && !req.expertIndices) throw new Error(`dispatcher ${this.name}: the routing decision has neither host nor device expert indices`);
    if (topkWeights.numel !== P) throw new Error(`dispatcher ${this.name}: ${topkWeights.numel} weights for ${T} tokens × k = ${topK}`);
    const be = x.be;
    let plan: PermuteCounts | null = topkIndices ? permutePlan(topkIndices, numExperts, topK) : null;
    // host choices win when both are given (a wrapping router may have rewritten them)
    const idx = topkIndices ? fromArray(be, topkIndices, [P], "i32") : req.expertIndices!;
    const perm = permuteByExpert(idx, numExperts, topK);
    if (!plan && this.needsHostCounts) plan = permuteCounts(Int32Array.from(await perm.counts.toArray()));
    const xs = dispatchRows(x, perm, plan ? plan.kept : P);
    const ex = await this.exchange(xs, plan, req, perm);
    const R = ex.rows.shape[0]!;
    if (ex.tokensPerExpert) {
      const sum = ex.tokensPerExpert.reduce((a, b) => a + b, 0);
      if (ex.experts.length !== ex.tokensPerExpert.length || sum !== R) {
        throw new Error(`dispatcher ${this.name}: ${ex.experts.length} experts with ${sum} rows in all, ${R} rows dispatched`);
      }
    } else if (!ex.offsets) throw new Error(`dispatcher ${this.name}: the exchange gave neither row counts nor device offsets`);
    const offsets = ex.offsets ?? fromArray(be, offsetsOf(ex.tokensPerExpert!), [ex.experts.length + 1], "i32");
    return { rows: ex.rows, experts: ex.experts, tokensPerExpert: ex.tokensPerExpert, offsets, plan, perm, layer: req.layer, tokens: T, topkWeights, exchange: ex.state };
  }

  async combine(d: Dispatched, expertOutput: Tensor): Promise<Tensor> {
    const R = d.rows.shape[0]!;
    if (expertOutput.shape[0] !== R) throw new Error(`dispatcher ${this.name}: expert output has ${expertOutput.shape[0]} rows, ${R} were dispatched`);
    const ys = await this.exchangeBack(expertOutput, d.exchange as S, d);
    return combineRows(ys, d.perm, d.topkWeights);
  }
}

/** Exclusive prefix sum with the total appended: [0, c0, c0 + c1, …]. */
function offsetsOf(counts: ArrayLike<number>): Int32Array {
  const o = new Int32Array(counts.length + 1);
  for (let i = 0; i < counts.length; i++) o[i + 1] = o[i]! + counts[i]!;
  return o;
}

/** The default dispatcher: every expert on this rank; the exchange is the identity. */
export class LocalDispatcher extends PermutationDispatcher<null> {
  readonly name = "local";

  protected async exchange(xs: Tensor, plan: PermuteCounts | null, req: DispatchRequest, perm: DevicePermutation): Promise<ExchangeResult<null>> {
    const experts = Array.from({ length: req.numExperts }, (_, e) => e);
    return { rows: xs, experts, tokensPerExpert: plan ? plan.counts : null, offsets: perm.offsets, state: null };
  }

  protected async exchangeBack(expertOutput: Tensor): Promise<Tensor> {
    return expertOutput;
  }
}
