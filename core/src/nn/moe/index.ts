/** The MoE layer's pieces (layer.ts): router (gating, routing), token dispatcher, grouped experts. */
export { MoELayer } from "./layer.ts";
export type { MoEParts, MoELayerOutput, MoELayerRouting } from "./layer.ts";
export { TopKRouter, routerLogits, topkExperts, topkExpertsDevice, expertHistogram, expertHistogramDevice, readCounts, chosenProbs, renormalize, routerScores, groupLimitedTopk, chooseExperts, chooseExpertsOnDevice, combineWeights } from "./router.ts";
export { permuteByExpert, dispatchRows, combineRows } from "./permutation.ts";
export type { DevicePermutation } from "./permutation.ts";
export { groupedLinear } from "./grouped-linear.ts";
export { takeAlongRows } from "./pick.ts";
export { readTensorsBatched, deferRead, flushDeferredReads, deferredReadCount, startDeferredReads } from "./readback.ts";
export type { MoERouter, GatingRequest, RoutingRequest, RoutingDecision, ScoreFunc, GroupLimit } from "./router.ts";
export { PermutationDispatcher, LocalDispatcher, permutePlan, permuteCounts } from "./dispatcher.ts";
export type { TokenDispatcher, DispatchRequest, Dispatched, PermutePlan, PermuteCounts, ExchangeResult } from "./dispatcher.ts";
export { GroupedExperts, expertRouting } from "./experts.ts";
export type { ExpertParams, ExpertRouting } from "./experts.ts";
export { expertUnitName, expertSwiGLUSpecs, expertParamName, expertSliceOf, allSlices } from "./expert-slice.ts";
export type { ExpertSlice } from "./expert-slice.ts";
