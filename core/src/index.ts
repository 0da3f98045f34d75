/** @zeromoe/core — public API for plugins and applications. */
export * from "./engine/index.ts";
export { definePlugin, composePlugins, PluginConflictError, HOOK_NAMES, type HookName, type Plugin, type PluginContext } from "./hooks/plugin.ts";
export type { Communicator, Group, CommArray } from "./comm/communicator.ts";
export type { JobConfig } from "./config/types.ts";
export type { Unit, Phase, UnitKind } from "./nn/unit.ts";
