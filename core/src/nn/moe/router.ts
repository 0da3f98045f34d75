/**
 * The router of an MoE layer, split as Megatron-Core's `TopKRouter` is: **gating** computes the
 * router logits from the tokens, **routing** turns logits into the decision (which experts, with
 * which combine weights). The Hugging Face Mixtral router (`MixtralSparseMoeBlock`, domain.md §4)
 * is written here once, as the building blocks below and the default {@link TopKRouter}:
 *
 *   gating:   logits = x · Wᵀ                                        [T, E]  (`block_sparse_moe.gate.weight`)
 *   routing:  p = softmax(logits) in f32 over all E experts
 *             chosen = top-k of p per token, ties to the lower expert  [T·k], host
 *             weights = p[t, chosen] / Σ_k p[t, chosen]               [T·k], differentiable
 *             counts = histogram of chosen                             [E], Σ = T·k
 *
 * No capacity, no dropping, no extra loss. A route hook's DeepSpeed-option router (the MoE
 * plugin's: noise, clamping, capacity drops, Switch/GShard aux loss, z-loss) is
 * built from the same blocks, so with its default options it is this router, bit for bit.
 */
import { div, gatherRows, linear, reshape, softmax, sum, topk } from "../../tensor/index.ts";
import { fromArray, type Tensor } from "../../tensor/tensor.ts";

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
}

/** A router's decision for one layer (Megatron-Core's (probs, routing_map); DeepSpeed's gating
 * output). */
export interface RoutingDecision {
  /** Expert of each (token, slot) pair, row-major [T·k], host; −1 = dropped (past capacity). */
  topkIndices: Int32Array;
  /** Differentiable combine weight of each pair, [T·k] f32 (any value for dropped pairs). */
  topkWeights: Tensor;
  /** Router probabilities softmax(logits) over all E experts, [T, E] f32, differentiable. */
  probs: Tensor;
  /** Top-k picks per expert BEFORE capacity drops (histogram of the [T·k] choices), [E],
   * Σ = T·k (DeepSpeed `exp_counts`). */
  counts: Int32Array;
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
 * index t·E + e). */
export function chosenProbs(probs: Tensor, chosen: Int32Array, k: number): Tensor {
  const T = probs.shape[0]!;
  const E = probs.shape[1]!;
  if (chosen.length !== T * k) throw new Error(`router: ${chosen.length} choices for ${T} tokens × k = ${k}`);
  const flat = new Int32Array(T * k);
  for (let i = 0; i < T * k; i++) flat[i] = Math.floor(i / k) * E + chosen[i]!;
  return reshape(gatherRows(reshape(probs, [T * E, 1]), fromArray(probs.be, flat, [T * k], "i32")), [T, k]);
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
    const probs = softmax(logits); // [T, E]
    const chosen = await topkExperts(probs, k);
    const picked = chosenProbs(probs, chosen, k);
    const weights = req.normTopkProb === false ? picked : renormalize(picked);
    return { topkIndices: chosen, topkWeights: reshape(weights, [T * k]), probs, counts: expertHistogram(chosen, E), loss: null };
  }
}
