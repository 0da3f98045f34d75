/** The MoE layer's pieces (layer.ts): router (gating, routing), token dispatcher, grouped experts. */
export { MoELayer } from "./layer.ts";
export type { MoEParts, MoELayerOutput, MoELayerRouting } from "./layer.ts";
export { TopKRouter, routerLogits, topkExperts, expertHistogram, chosenProbs, renormalize, routerScores, groupLimitedTopk, chooseExperts, combineWeights } from "./router.ts";
export type { MoERouter, GatingRequest, RoutingRequest, RoutingDecision, ScoreFunc, GroupLimit } from "./router.ts";
export { PermutationDispatcher, LocalDispatcher, permutePlan } from "./dispatcher.ts";
export type { TokenDispatcher, DispatchRequest, Dispatched, PermutePlan, ExchangeResult } from "./dispatcher.ts";
export { GroupedExperts, expertRouting } from "./experts.ts";
export type { ExpertParams, ExpertRouting } from "./experts.ts";
