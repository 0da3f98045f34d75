/**
 * `@zeromoe/core/plugin` — everything a plugin author needs: `definePlugin`, the six hook
 * contracts, the plugin context (setup verbs, per-call hook context, unit handles, metrics, manifest
 * contributions, memory-estimate contributions) and the helpers the built-in plugins use. See
 * docs/plugins.md and core/src/engine/plugin-context.ts.
 */
export { checkPluginSet, definePlugin, composePlugins, PluginConflictError, HOOK_NAMES, type HookName, type Plugin, type PluginContext, type PluginDeclaration } from "./hooks/plugin.ts";
export * from "./engine/index.ts";
export type { Unit, Phase, UnitKind } from "./nn/unit.ts";
export { partElementsInUnitsBelow, partitionedBytes, type MemoryContributor } from "./train/memory-estimate.ts";
