/**
 * One MoE layer as a straight line (Megatron-Core's `MoELayer.forward`, torchtitan's `MoE.forward`):
 *
 *   logits   = router.gating(x)                                  [T, E]
 *   decision = router.routing(logits)                            top-k experts, weights, probs, counts
 *   d        = dispatcher.dispatch(x, decision)                  rows grouped by expert, tokens_per_expert
 *   y        = experts(d.rows, d.tokensPerExpert, d.experts)     every listed expert once, ascending
 *   out      = dispatcher.combine(d, y)                          [T, hidden]
 *
 * The router and the dispatcher are the swappable parts ({@link MoEParts}); a model shares one
 * `MoEParts` among its MoE layers and the route hook replaces them (the engine installs what the
 * hook supplies). Defaults: Hugging Face's router (router.ts `TopKRouter`) and
 * {@link LocalDispatcher} (every expert on this rank).
 */
import type { Tensor } from "../../tensor/tensor.ts";
import type { Parameter } from "../unit.ts";
import type { TokenDispatcher } from "./dispatcher.ts";
import type { GroupedExperts } from "./experts.ts";
import type { MoERouter, RoutingDecision, RoutingRequest } from "./router.ts";

/** The routing fields an MoE layer adds to every {@link RoutingRequest} (router.ts). */
export type MoELayerRouting = Pick<RoutingRequest, "scoreFunc" | "selectionBias" | "groupLimit" | "routedScalingFactor">;

/** The swappable parts of a model's MoE layers (route hook: dispatcher, and optionally router). */
export interface MoEParts {
  router: MoERouter;
  dispatcher: TokenDispatcher;
}

/** What one MoE layer returns. */
export interface MoELayerOutput {
  /** [T, hidden]. */
  output: Tensor;
  /** The router's decision (probs, pre-drop counts, extra loss). */
  decision: RoutingDecision;
}

/** One MoE layer (module comment). */
export class MoELayer {
  readonly layer: number;
  /** Router weight [E, hidden]. */
  readonly gate: Parameter;
  readonly experts: GroupedExperts;
  readonly topK: number;
  private readonly parts: MoEParts;
  /** Renormalise the chosen probabilities (RoutingRequest.normTopkProb). */
  readonly normTopkProb: boolean;
  /** The family's routing beyond softmax top-k (DeepSeek: sigmoid scores, selection bias — a live
   * array the aux-loss-free balancing updates in place —, group limit, routed scaling factor). */
  readonly routing: MoELayerRouting;

  constructor(layer: number, gate: Parameter, experts: GroupedExperts, topK: number, parts: MoEParts, opts: { normTopkProb?: boolean; routing?: MoELayerRouting } = {}) {
    this.layer = layer;
    this.gate = gate;
    this.experts = experts;
    this.topK = topK;
    this.parts = parts;
    this.normTopkProb = opts.normTopkProb ?? true;
    this.routing = opts.routing ?? {};
  }

  /** x: normed hidden states [T, hidden] f32. */
  async forward(x: Tensor): Promise<MoELayerOutput> {
    const { router, dispatcher } = this.parts;
    const layer = this.layer;
    const numExperts = this.experts.numExperts;
    const topK = this.topK;
    const logits = await router.gating({ layer, x, weight: this.gate.tensor });
    const decision = await router.routing({ ...this.routing, layer, logits, numExperts, topK, normTopkProb: this.normTopkProb });
    const d = await dispatcher.dispatch({ layer, x, topkIndices: decision.topkIndices, expertIndices: decision.expertIndices ?? null, topkWeights: decision.topkWeights, numExperts, topK });
    const y = await this.experts.forward(d.rows, d.tokensPerExpert, d.experts, d.offsets);
    const output = await dispatcher.combine(d, y);
    return { output, decision };
  }
}
