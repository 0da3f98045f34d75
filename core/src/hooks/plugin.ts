/**
 * Plugins and their composition on the six hooks (docs/architecture.md "The six hooks").
 *
 * A plugin is `{ name, configKey?, requires?, conflicts?, setup(ctx) }`. In `setup` it *claims* hooks
 * (replaces the current implementation) or *wraps* them (receives the current implementation and
 * returns a new one — explicit composition, like Rollup's sequential hooks). Rules:
 * - Claiming a hook that another plugin already claimed is a {@link PluginConflictError} naming both,
 *   unless the claiming plugin lists the other in `overrides` (it then knowingly takes over).
 * - Wrapping always composes (outermost = last set up).
 * - `requires` names plugins that must be present; they are set up first (topological order, ties
 *   in the order given). A missing requirement is an error naming both plugins.
 * - `conflicts` names plugins that cannot be combined; both present is an error naming both.
 * Core's defaults (plain data parallelism) are installed first, owned by "core", and may be claimed
 * freely.
 */

import type { PluginMemory } from "../engine/plugin-context.ts";

/** The six hook points. */
export type HookName = "partition" | "gather" | "reduce" | "route" | "offload" | "checkpoint";

export const HOOK_NAMES: readonly HookName[] = ["partition", "gather", "reduce", "route", "offload", "checkpoint"];

/** Thrown when two plugins claim the same hook without saying how they compose, when a required
 * plugin is missing, or when declared-conflicting plugins are combined. */
export class PluginConflictError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PluginConflictError";
  }
}

/** Claim/wrap/get of the hooks: the part of a plugin's `setup` context that composes hooks. */
export interface HookRegistry<H extends Record<HookName, unknown>> {
  /** Replace hook `name` with `impl`, owned by this plugin. */
  claim<K extends HookName>(name: K, impl: H[K]): void;
  /** Wrap hook `name`: `f` receives the current implementation and returns the new one. */
  wrap<K extends HookName>(name: K, f: (prev: H[K]) => H[K]): void;
  /** The current implementation of hook `name`. */
  get<K extends HookName>(name: K): H[K];
}

/** What a plugin's `setup` receives: the hook registry plus the engine's verbs `C` (for the
 * engine: {@link SetupContext} — config, rank, groups, collectives, log, metrics, manifest
 * contributions, model transforms; core/src/engine/plugin-context.ts). */
export type PluginContext<H extends Record<HookName, unknown>, C> = HookRegistry<H> & C;

/** A plugin. `setup` may be async (e.g. to allocate buffers or exchange metadata across ranks). */
export interface Plugin<H extends Record<HookName, unknown> = Record<HookName, unknown>, C = unknown> {
  /** Unique name, e.g. "acme-stage" or "@acme/zeromoe-plugin-foo". */
  name: string;
  /** The config section this plugin reads, e.g. "zero_optimization" or "moe". */
  configKey?: string;
  /** Plugins that must be present and set up before this one. */
  requires?: string[];
  /** Plugins that cannot be combined with this one. */
  conflicts?: string[];
  /** Plugins whose hook claims this one may knowingly take over. */
  overrides?: string[];
  /** Hooks this plugin may `claim` (replace), declared statically so that {@link checkPluginSet}
   * finds two plugins claiming one hook before any setup runs (the trainer: before data is
   * loaded). Claiming a hook not listed here is a {@link PluginConflictError}. Wrapping needs no
   * declaration. */
  claims?: HookName[];
  /** Contribution to the up-front memory estimate (core/src/train/memory-estimate.ts); read
   * before any engine exists. */
  memory?: PluginMemory;
  setup(ctx: PluginContext<H, C>): void | Promise<void>;
}

/** Identity helper giving a plugin literal its type (like Vite's `defineConfig`). */
export function definePlugin<H extends Record<HookName, unknown>, C>(p: Plugin<H, C>): Plugin<H, C> {
  if (!p || typeof p.name !== "string" || p.name.length === 0) throw new TypeError("definePlugin: `name` must be a non-empty string");
  if (typeof p.setup !== "function") throw new TypeError(`definePlugin(${p.name}): \`setup\` must be a function`);
  for (const h of p.claims ?? []) {
    if (!HOOK_NAMES.includes(h)) throw new TypeError(`definePlugin(${p.name}): \`claims\` lists "${String(h)}", which is not a hook (expected one of ${HOOK_NAMES.join(", ")})`);
  }
  return p;
}

/** The composed hooks and who owns each. */
export interface ComposedHooks<H extends Record<HookName, unknown>> {
  hooks: H;
  /** Owner of each hook: "core" or the claiming plugin's name (wrappers listed after, e.g. "acme-stage+acme-noise"). */
  owners: Record<HookName, string>;
  /** Plugins in the order they were set up. */
  order: string[];
}

/** Order plugins so that every plugin comes after those it `requires`; validates requirements and
 * conflicts. Throws {@link PluginConflictError}. */
export function orderPlugins<P extends { name: string; requires?: readonly string[]; conflicts?: readonly string[] }>(plugins: readonly P[]): P[] {
  const byName = new Map<string, P>();
  for (const p of plugins) {
    if (byName.has(p.name)) throw new PluginConflictError(`plugin "${p.name}" is listed twice`);
    byName.set(p.name, p);
  }
  for (const p of plugins) {
    for (const c of p.conflicts ?? []) {
      if (byName.has(c)) throw new PluginConflictError(`plugins "${p.name}" and "${c}" cannot be combined ("${p.name}" declares a conflict with "${c}")`);
    }
    for (const r of p.requires ?? []) {
      if (!byName.has(r)) throw new PluginConflictError(`plugin "${p.name}" requires plugin "${r}", which is not in this job`);
    }
  }
  const out: P[] = [];
  const state = new Map<string, "visiting" | "done">();
  const visit = (p: P, path: string[]): void => {
    const s = state.get(p.name);
    if (s === "done") return;
    if (s === "visiting") throw new PluginConflictError(`plugin requirement cycle: ${[...path, p.name].join(" → ")}`);
    state.set(p.name, "visiting");
    for (const r of p.requires ?? []) visit(byName.get(r)!, [...path, p.name]);
    state.set(p.name, "done");
    out.push(p);
  };
  for (const p of plugins) visit(p, []);
  return out;
}

/**
 * Set up `plugins` over `defaults` and return the composed hooks. `context(plugin)` gives the verbs
 * each plugin's `setup` context carries besides claim/wrap/get (the engine's SetupContext; its
 * getters stay live: the context object inherits from it); null gives claim/wrap/get only.
 * @throws PluginConflictError as described in the module comment.
 */
export async function composePlugins<H extends Record<HookName, unknown>, C>(
  defaults: H,
  plugins: readonly Plugin<H, C>[],
  context: ((plugin: Plugin<H, C>) => C) | null,
): Promise<ComposedHooks<H>> {
  const hooks = { ...defaults };
  const owners = Object.fromEntries(HOOK_NAMES.map((n) => [n, "core"])) as Record<HookName, string>;
  const claimedBy = new Map<HookName, string>();
  checkPluginSet(plugins);
  const ordered = orderPlugins(plugins);
  for (const p of ordered) {
    const registry: HookRegistry<H> = {
      get: (name) => hooks[name],
      claim: (name, impl) => {
        if (!(p.claims ?? []).includes(name)) {
          throw new PluginConflictError(`plugin "${p.name}" claims the "${name}" hook without declaring it: add "${name}" to its \`claims\` (definePlugin({ claims: [...] }))`);
        }
        const prev = claimedBy.get(name);
        if (prev !== undefined && !(p.overrides ?? []).includes(prev)) {
          throw new PluginConflictError(
            `plugins "${prev}" and "${p.name}" both claim the "${name}" hook; one must wrap it or list the other in \`overrides\``,
          );
        }
        claimedBy.set(name, p.name);
        hooks[name] = impl;
        owners[name] = p.name;
      },
      wrap: (name, f) => {
        hooks[name] = f(hooks[name]);
        owners[name] = `${owners[name]}+${p.name}`;
      },
    };
    const ctx = Object.assign(Object.create(context ? (context(p) as object) : null) as object, registry) as PluginContext<H, C>;
    await p.setup(ctx);
  }
  return { hooks, owners, order: ordered.map((p) => p.name) };
}

/** The static part of a plugin that {@link checkPluginSet} reads (no `setup` is run). */
export interface PluginDeclaration {
  name: string;
  requires?: readonly string[];
  conflicts?: readonly string[];
  overrides?: readonly string[];
  claims?: readonly HookName[];
}

/**
 * Check a set of plugins from their declarations alone, WITHOUT running any `setup`: a name listed
 * twice, a declared `conflicts` pair present together, a `requires` missing from the set, a
 * `requires` cycle, a `claims` entry that is not a hook, and two plugins claiming one hook where
 * the later one (in set-up order, {@link orderPlugins}) does not list the earlier one in
 * `overrides`. Every problem is collected; each names both plugins (and the hook).
 * The trainer calls it (through the plugin loader) before any data is loaded, so a conflict is a
 * config error (exit 2); {@link composePlugins} calls it again.
 * @throws PluginConflictError whose message lists every problem, one per line.
 */
export function checkPluginSet(plugins: readonly PluginDeclaration[]): void {
  const problems: string[] = [];
  const byName = new Map<string, PluginDeclaration>();
  for (const p of plugins) {
    if (byName.has(p.name)) problems.push(`plugin "${p.name}" is listed twice`);
    byName.set(p.name, p);
  }
  const reported = new Set<string>();
  for (const p of plugins) {
    for (const c of p.conflicts ?? []) {
      const pair = [p.name, c].sort().join("\u0000");
      if (byName.has(c) && !reported.has(pair)) {
        reported.add(pair);
        problems.push(`plugins "${p.name}" and "${c}" cannot be combined ("${p.name}" declares a conflict with "${c}")`);
      }
    }
    for (const r of p.requires ?? []) {
      if (!byName.has(r)) problems.push(`plugin "${p.name}" requires plugin "${r}", which is not in this job`);
    }
    for (const h of p.claims ?? []) {
      if (!HOOK_NAMES.includes(h)) problems.push(`plugin "${p.name}" declares a claim of "${String(h)}", which is not a hook (expected one of ${HOOK_NAMES.join(", ")})`);
    }
  }
  if (problems.length === 0) {
    let ordered: readonly PluginDeclaration[] = [];
    try {
      ordered = orderPlugins(plugins);
    } catch (e) {
      problems.push((e as Error).message);
    }
    for (const hook of HOOK_NAMES) {
      let prev: PluginDeclaration | undefined;
      for (const p of ordered) {
        if (!(p.claims ?? []).includes(hook)) continue;
        if (prev !== undefined && !(p.overrides ?? []).includes(prev.name)) {
          problems.push(`plugins "${prev.name}" and "${p.name}" both claim the "${hook}" hook; one must wrap it or list the other in \`overrides\``);
        }
        prev = p;
      }
    }
  }
  if (problems.length > 0) throw new PluginConflictError(problems.join("\n"));
}
