/**
 * The router of an MoE layer, split as Megatron-Core's `TopKRouter` is: **gating** computes the
 * router logits from the tokens, **routing** turns logits into the decision (which experts, with
 * which combine weights). The Hugging Face Mixtral router (`MixtralSparseMoeBlock`, docs/domain.md §4)
 * is written here once, as the building blocks below and the default {@link TopKRouter}:
 *
 *   gating:   logits = x · Wᵀ                                        [T, E]  (`block_sparse_moe.gate.weight`)
 *   routing:  p = softmax(logits) in f32 over all E experts
 *             chosen = top-k of p per token, ties to the lower expert  [T·k], on the device
 *             weights = p[t, chosen] / Σ_k p[t, chosen]               [T·k], differentiable
 *             counts = histogram of chosen                             [E], Σ = T·k
 *
 * DeepSeek's routing is the same line with other blocks ({@link RoutingRequest}): sigmoid scores
 * (V3), a selection bias added for the choice only (V3 `e_score_correction_bias`, aux-loss-free
 * balancing), group-limited top-k (V2/V3) and a routed scaling factor on the combine weights.
 *
 * No capacity, no dropping, no extra loss. A route hook's DeepSpeed-option router (the MoE
 * plugin's: noise, clamping, capacity drops, Switch/GShard aux loss, z-loss) is
 * built from the same blocks, so with its default options it is this router, bit for bit.
 */
import { div, gatherRows, linear, reshape, scale, sigmoid, softmax, sum, topk } from "../../tensor/index.ts";
import { empty, fromArray, type Tensor } from "../../tensor/tensor.ts";
import { takeAlongRows } from "./pick.ts";
import { flushDeferredReads } from "./readback.ts";

/** What the MoE layer hands to {@link MoERouter.gating}. */
export interface GatingRequest {
  /** Decoder layer index. */
  layer: number;
  /** Normed token hidden states [T, hidden] (f32). */
  x: Tensor;
  /** Router weight [E, hidden] (`block_sparse_moe.gate.weight`). */
  weight: Tensor;
}

/** What the MoE layer hands to {@link MoERouter.routing}. */
export interface RoutingRequest {
  /** Decoder layer index. */
  layer: number;
  /** Router logits [T, E] f32, as {@link MoERouter.gating} returned them. */
  logits: Tensor;
  /** Experts in the layer (E). */
  numExperts: number;
  /** Slots per token (k). */
  topK: number;
  /** Renormalise the k chosen probabilities to sum 1 (HF Mixtral; Qwen-MoE `norm_topk_prob`);
   * false: the chosen probabilities are the combine weights. Absent = true. */
  normTopkProb?: boolean;
  /** How logits become expert scores ({@link routerScores}); absent = "softmax". DeepSeek-V3: "sigmoid". */
  scoreFunc?: ScoreFunc;
  /** Per-expert bias [E] added to the scores for the CHOICE only, never to the combine weights
   * (DeepSeek-V3 `e_score_correction_bias`, aux-loss-free load balancing); host values. */
  selectionBias?: Float32Array | null;
  /** Group-limited choice (DeepSeek): experts in `numGroups` equal groups, each token may use the
   * `topkGroups` best groups ({@link groupLimitedTopk}). Absent/null = over all experts. */
  groupLimit?: GroupLimit | null;
  /** Factor on the combine weights after any renormalisation (DeepSeek `routed_scaling_factor`);
   * absent = 1. */
  routedScalingFactor?: number;
}

/** Score function of a router: softmax over the E experts (Mixtral, Qwen, DeepSeek-V2) or an
 * element-wise sigmoid (DeepSeek-V3). */
export type ScoreFunc = "softmax" | "sigmoid";

/** Group-limited routing (DeepSeek-V2 `group_limited_greedy`, DeepSeek-V3 `noaux_tc`). */
export interface GroupLimit {
  /** Groups of E / numGroups consecutive experts (`n_group`). */
  numGroups: number;
  /** Groups a token may route to (`topk_group`). */
  topkGroups: number;
  /** A group's score: its best expert's ("max", V2) or the sum of its two best ("top2_sum", V3). */
  groupScore: "max" | "top2_sum";
}

/** A router's decision for one layer (Megatron-Core's (probs, routing_map); DeepSpeed's gating
 * output). */
export interface RoutingDecision {
  /** Expert of each (token, slot) pair, row-major [T·k], host; −1 = dropped (past capacity). Null
   * when the choice stayed on the device (`expertIndices`): plain softmax/sigmoid top-k without
   * capacity drops never reads it back. */
  topkIndices: Int32Array | null;
  /** The same choices on the device, i32 [T·k] (absent/null: only on the host). */
  expertIndices?: Tensor | null;
  /** Differentiable combine weight of each pair, [T·k] f32 (any value for dropped pairs). */
  topkWeights: Tensor;
  /** Router scores over all E experts, [T, E] f32, differentiable: softmax(logits), or
   * sigmoid(logits) for `scoreFunc` "sigmoid". */
  probs: Tensor;
  /** Top-k picks per expert BEFORE capacity drops (histogram of the [T·k] choices), [E],
   * Σ = T·k (DeepSpeed `exp_counts`), on the host — or null when only `expertCounts` (device) has
   * them (read them batched with {@link readCounts}). */
  counts: Int32Array | null;
  /** The same counts on the device, u32 [E] (absent/null: only on the host). */
  expertCounts?: Tensor | null;
  /** This layer's extra loss, already weighted by its coefficients (Switch/GShard aux loss,
   * router z-loss), [1]; null when there is none. The model adds it to the training loss. */
  loss: Tensor | null;
}

/** A router: gating, then routing (module comment). Installed through the route hook. */
export interface MoERouter {
  readonly name: string;
  /** Router logits [T, E] of one layer's tokens. */
  gating(req: GatingRequest): Tensor | Promise<Tensor>;
  /** The routing decision from the logits. */
  routing(req: RoutingRequest): Promise<RoutingDecision>;
  /** Weight of Hugging Face's all-layer load-balancing loss (models/mixtral.ts `extraLoss`) in the
   * training loss; null = not added. */
  readonly mixtralAuxCoef: number | null;
}

/** Gating: logits = x · Wᵀ, x [T, hidden], weight [E, hidden] → [T, E]. */
export function routerLogits(x: Tensor, weight: Tensor): Tensor {
  return linear(x, weight);
}

/** The k experts of largest probability per token, probs [T, E] → [T·k] row-major on the host
 * (descending per token, ties to the lower expert; reads the device once). @throws for k outside
 * [1, min(8, E)]. */
export async function topkExperts(probs: Tensor, k: number): Promise<Int32Array> {
  const { values, indices } = topk(probs, k);
  const chosen = Int32Array.from(await indices.toArray());
  values.dispose();
  indices.dispose();
  return chosen;
}

/** The k experts of largest probability per token, probs [T, E] → i32 [T·k] on the device
 * (descending per token, ties to the lower expert; Backend.topk) — nothing is read back.
 * @throws for k outside [1, min(8, E)]. */
export function topkExpertsDevice(probs: Tensor, k: number): Tensor {
  const { values, indices } = topk(probs, k);
  values.dispose();
  return reshape(indices, [indices.numel]);
}

/** Picks per expert of device choices idx i32 [T·k] (entries outside [0, E) ignored), u32 [E] on
 * the device (Backend.histogram; integer atomics, deterministic). */
export function expertHistogramDevice(idx: Tensor, numExperts: number): Tensor {
  const counts = empty(idx.be, [numExperts], "u32");
  idx.be.histogram(idx.view, counts.view, idx.numel, numExperts);
  return counts;
}

/** Host expert counts of every decision, reading the device ones (`expertCounts`) of all of them —
 * and every deferred statistic (readback.ts `deferRead`) — in ONE batched read per dtype: the
 * once-per-forward read of the MoE statistics. */
export async function readCounts(decisions: readonly Pick<RoutingDecision, "counts" | "expertCounts">[]): Promise<Int32Array[]> {
  const need = decisions.map((d, i) => (d.counts ? -1 : i)).filter((i) => i >= 0);
  for (const i of need) if (!decisions[i]!.expertCounts) throw new Error(`router: decision ${i} has neither host nor device expert counts`);
  // the same read also takes the statistics routers deferred (readback.ts deferRead)
  const got = await flushDeferredReads(need.map((i) => decisions[i]!.expertCounts!));
  const out = decisions.map((d) => d.counts);
  need.forEach((i, j) => (out[i] = Int32Array.from(got[j]!)));
  return out as Int32Array[];
}

/** Picks per expert of `chosen` [T·k] (entries in [0, E)), [E]. @throws on an index outside. */
export function expertHistogram(chosen: Int32Array, numExperts: number): Int32Array {
  const counts = new Int32Array(numExperts);
  for (const e of chosen) {
    if (e < 0 || e >= numExperts) throw new Error(`router: expert index ${e} is outside [0, ${numExperts})`);
    counts[e]!++;
  }
  return counts;
}

/** The router probabilities of the chosen experts, differentiable: probs [T, E], chosen [T·k]
 * (entries in [0, E)) → [T, k] with out[t, s] = probs[t, chosen[t·k + s]] (a gather by the flat
 * index t·E + e; with the choice on the device, Backend.gatherAlongRows — the same values and
 * gradient additions). */
export function chosenProbs(probs: Tensor, chosen: Int32Array | Tensor, k: number): Tensor {
  if (!(chosen instanceof Int32Array)) return takeAlongRows(probs, chosen, k);
  const T = probs.shape[0]!;
  const E = probs.shape[1]!;
  if (chosen.length !== T * k) throw new Error(`router: ${chosen.length} choices for ${T} tokens × k = ${k}`);
  const flat = new Int32Array(T * k);
  for (let i = 0; i < T * k; i++) flat[i] = Math.floor(i / k) * E + chosen[i]!;
  return reshape(gatherRows(reshape(probs, [T * E, 1]), fromArray(probs.be, flat, [T * k], "i32")), [T, k]);
}

/** Expert scores from router logits [T, E] f32: softmax over the experts or element-wise sigmoid
 * (DeepSeek-V3's `router_logits.sigmoid()`), [T, E], differentiable. */
export function routerScores(logits: Tensor, scoreFunc: ScoreFunc = "softmax"): Tensor {
  return scoreFunc === "sigmoid" ? sigmoid(logits) : softmax(logits);
}

/**
 * Group-limited top-k on host scores (DeepSeek; Transformers' `DeepseekV3TopkRouter.get_topk_indices`
 * and `DeepseekV2Moe.route_tokens_to_experts`): per token, s = scores + bias; groups of E/G
 * consecutive experts score their best expert (max) or the sum of their best two (top2_sum); the
 * `topkGroups` best groups are kept (ties to the lower group) and every other expert's s becomes
 * 0 (masked_fill 0.0, as there); the k experts of largest s are chosen (ties to the lower expert).
 * scores [T·E] row-major; bias [E] or null. Returns [T·k], descending s per token.
 * @throws when E is not a multiple of numGroups, topkGroups is outside [1, numGroups], a
 *   top2_sum group has fewer than 2 experts, or k exceeds E.
 */
export function groupLimitedTopk(scores: ArrayLike<number>, T: number, E: number, k: number, limit: GroupLimit | null, bias: ArrayLike<number> | null): Int32Array {
  const G = limit?.numGroups ?? 1;
  if (E % G !== 0) throw new Error(`router: ${E} experts are not divisible into n_group ${G} groups`);
  const per = E / G;
  const keepG = limit?.topkGroups ?? G;
  if (!Number.isInteger(keepG) || keepG < 1 || keepG > G) throw new Error(`router: topk_group ${keepG} must be in [1, n_group ${G}]`);
  if (limit?.groupScore === "top2_sum" && per < 2) throw new Error(`router: group scores sum the top 2 experts of a group, but each of the n_group ${G} groups has ${per}`);
  if (k < 1 || k > E) throw new Error(`router: top-${k} of ${E} experts`);
  const out = new Int32Array(T * k);
  const s = new Float64Array(E);
  const gs = new Float64Array(G);
  const keptGroup = new Uint8Array(G);
  const taken = new Uint8Array(E);
  for (let t = 0; t < T; t++) {
    for (let e = 0; e < E; e++) s[e] = Math.fround(scores[t * E + e]! + (bias ? bias[e]! : 0));
    if (limit) {
      for (let g = 0; g < G; g++) {
        let a = -Infinity;
        let b = -Infinity;
        for (let e = g * per; e < (g + 1) * per; e++) {
          const v = s[e]!;
          if (v > a) { b = a; a = v; } else if (v > b) b = v;
        }
        gs[g] = limit.groupScore === "max" ? a : Math.fround(a + b);
      }
      keptGroup.fill(0);
      for (let n = 0; n < keepG; n++) {
        let best = -1;
        for (let g = 0; g < G; g++) if (!keptGroup[g] && (best < 0 || gs[g]! > gs[best]!)) best = g;
        keptGroup[best] = 1;
      }
      for (let e = 0; e < E; e++) if (!keptGroup[Math.floor(e / per)]) s[e] = 0;
    }
    taken.fill(0);
    for (let n = 0; n < k; n++) {
      let best = -1;
      for (let e = 0; e < E; e++) if (!taken[e] && (best < 0 || s[e]! > s[best]!)) best = e;
      taken[best] = 1;
      out[t * k + n] = best;
    }
  }
  return out;
}

/** The experts of each token per the request on the device when the choice is the plain top-k of
 * the scores ({@link topkExpertsDevice}: `host` null, nothing read), else on the host by
 * {@link chooseExperts} (bias or group limit; `device` uploaded). */
export async function chooseExpertsOnDevice(scores: Tensor, req: Pick<RoutingRequest, "topK" | "selectionBias" | "groupLimit">): Promise<{ host: Int32Array | null; device: Tensor }> {
  if (!req.selectionBias && !req.groupLimit) return { host: null, device: topkExpertsDevice(scores, req.topK) };
  const host = await chooseExperts(scores, req);
  return { host, device: fromArray(scores.be, host, [host.length], "i32") };
}

/** The experts of each token per the request (the plain top-k of the scores, or
 * {@link groupLimitedTopk} with the selection bias and group limit), [T·k] on the host. */
export async function chooseExperts(scores: Tensor, req: Pick<RoutingRequest, "topK" | "selectionBias" | "groupLimit">): Promise<Int32Array> {
  const bias = req.selectionBias ?? null;
  const limit = req.groupLimit ?? null;
  if (!bias && !limit) return topkExperts(scores, req.topK);
  const T = scores.shape[0]!;
  const E = scores.shape[1]!;
  if (bias && bias.length !== E) throw new Error(`router: selection bias has ${bias.length} entries for ${E} experts`);
  return groupLimitedTopk(await scores.toArray(), T, E, req.topK, limit, bias);
}

/** Combine weights [T, k] from the chosen experts' scores: renormalised to sum 1 unless
 * `normTopkProb` is false, then × `routedScalingFactor` (when ≠ 1). */
export function combineWeights(scores: Tensor, chosen: Int32Array | Tensor, req: Pick<RoutingRequest, "topK" | "normTopkProb" | "routedScalingFactor">): Tensor {
  const picked = chosenProbs(scores, chosen, req.topK);
  const w = req.normTopkProb === false ? picked : renormalize(picked);
  const f = req.routedScalingFactor ?? 1;
  return f === 1 ? w : scale(w, f);
}

/** Renormalise [T, k] picked probabilities to sum 1 per token (Hugging Face Mixtral's combine
 * weights): picked / Σ_k picked. */
export function renormalize(picked: Tensor): Tensor {
  return div(picked, sum(picked, -1, true));
}

/** Hugging Face Mixtral's router (module comment): the default of every Mixtral model. */
export class TopKRouter implements MoERouter {
  readonly name = "topk";
  readonly mixtralAuxCoef: number | null;

  /** @param mixtralAuxCoef weight of the all-layer load-balancing loss (HF: `router_aux_loss_coef`
   * when `output_router_logits`, else null). */
  constructor(mixtralAuxCoef: number | null) {
    this.mixtralAuxCoef = mixtralAuxCoef;
  }

  gating(req: GatingRequest): Tensor {
    return routerLogits(req.x, req.weight);
  }

  async routing(req: RoutingRequest): Promise<RoutingDecision> {
    const { logits, numExperts: E, topK: k } = req;
    const T = logits.shape[0]!;
    const probs = routerScores(logits, req.scoreFunc); // [T, E]
    const { host, device } = await chooseExpertsOnDevice(probs, req);
    const weights = combineWeights(probs, host ?? device, req);
    const counts = host ? expertHistogram(host, E) : null;
    return { topkIndices: host, expertIndices: host ? null : device, topkWeights: reshape(weights, [T * k]), probs, counts, expertCounts: counts ? null : expertHistogramDevice(device, E), loss: null };
  }
}
