/** The engine's public surface: what plugins and the trainer use. */
export { Engine, type EngineOptions, type StepResult, type TrainMicroBatch } from "./engine.ts";
export type { CheckpointHook, EngineEnv, EngineHooks, EnginePlugin, GatherHook, OffloadHook, PartitionHook, ReduceHook, RouteHook } from "./hooks.ts";
export { defaultHooks, groupFor } from "./defaults.ts";
export { makePlan, isSharded, paddingElements, type Placement, type UnitPlan } from "./plan.ts";
export { UnitState, countsGradient } from "./unit-state.ts";
export { accumulateLocal, allReduceAccumulated, reduceScatterAccumulated, reduceScatterBucket, issueReduceScatterBucket, takeMicroGrad, type PendingGrad } from "./grad-reduce.ts";
export { accumulateDevice, accumulateHost, halfKind, hostArrayFor, readPadded, toCommArray } from "./host-transfer.ts";
export { createModel } from "./model-factory.ts";
export { initUnitRange } from "../nn/init.ts";
export { importPlugin, pluginsForJob, resolvePlugin } from "./plugin-loader.ts";
export { AUTOEP_PLUGIN_PACKAGE, BUILTIN_ALIASES, builtinPluginPackages, MOE_PLUGIN_PACKAGE, OFFLOAD_PLUGIN_PACKAGE, STAGE_PLUGIN_PACKAGES } from "./registry.ts";
export type { HookContext, HostOptimizerState, HostParamShard, OffloadStepInputs, OptimizerDevice, OptimizerStateName, JobView, ManifestContribution, MemoryEstimateInput, MemoryPart, MetricsRegistry, MicroPosition, PluginMemory, SetupContext, StepMetrics, StepPhase, UnitHandle, UnitInfo, UnitRelocation } from "./plugin-context.ts";
export type { CheckpointTarget, EngineStateDict, Stateful } from "./stateful.ts";
