/**
 * `@zeromoe/core/plugin` — everything a plugin author needs: `definePlugin`, the six hook
 * contracts, the plugin context and the helpers the built-in plugins use. See docs/plugins.md.
 */
export { definePlugin, composePlugins, PluginConflictError, HOOK_NAMES, type HookName, type Plugin, type PluginContext } from "./hooks/plugin.ts";
export * from "./engine/index.ts";
export type { Unit, Phase, UnitKind } from "./nn/unit.ts";
