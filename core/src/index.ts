/**
 * @zeromoe/core — the package's main entry, for plugins and applications: the engine and its
 * hook contracts, plugin composition and loading, and running a job. Narrower entries:
 * `@zeromoe/core/plugin` (plugin authors), `/tensor`, `/nn`, `/models`, `/comm`, `/config`,
 * `/data`, `/checkpoint`, `/launch`, `/testing` (package.json `exports`; docs/architecture.md "Packages and layers").
 */
export * from "./engine/index.ts";
export { checkPluginSet, definePlugin, composePlugins, PluginConflictError, HOOK_NAMES, type HookName, type Plugin, type PluginContext, type PluginDeclaration } from "./hooks/plugin.ts";
export type { Communicator, Group, CommArray } from "./comm/communicator.ts";
export type { JobConfig } from "./config/types.ts";
export type { Unit, Phase, UnitKind } from "./nn/unit.ts";
export { runTraining, type RunTrainingOptions, type TrainingRun } from "./train/run.ts";
export { DeviceBudgetError, deviceBytesInUse, withDeviceBudget } from "./train/device-budget.ts";
export type { TrainSummary } from "./train/summary.ts";
