/**
 * Which plugins a job needs (design.md "Composition is by the job's config"):
 * `zero_optimization.stage` 1/2/3 → zero1/zero2/zero3; a sparse model (a resolved `moe` section,
 * i.e. model_type "mixtral") → moe (router options, MoE statistics, expert parallelism);
 * a `plugins` list adds third-party plugins by package name or path. Built-in plugins live in
 * `plugins/<name>/src/index.ts` of this repository and are loaded by path (core never imports
 * plugin code statically: arrows point down only).
 */
import { isAbsolute, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { ConfigError } from "../config/errors.ts";
import type { JobConfig } from "../config/types.ts";
import type { EnginePlugin } from "./hooks.ts";

const REPO_ROOT = resolve(import.meta.dir, "../../..");

/** Built-in plugin names → entry file. */
export const BUILTIN_PLUGINS: Readonly<Record<string, string>> = {
  zero1: "plugins/zero1/src/index.ts",
  zero2: "plugins/zero2/src/index.ts",
  zero3: "plugins/zero3/src/index.ts",
  moe: "plugins/moe/src/index.ts",
  offload: "plugins/offload/src/index.ts",
  autoep: "plugins/autoep/src/index.ts",
};

/** Names of the built-in plugins the config selects, in set-up order. */
export function builtinPluginNames(cfg: JobConfig): string[] {
  const out: string[] = [];
  const stage = cfg.zero_optimization.stage;
  if (stage > 0) out.push(`zero${stage}`);
  if (cfg.moe) out.push("moe"); // every sparse (mixtral) model: router options, statistics, EP
  return out;
}

/** Load a plugin module (default export or a named export that looks like a plugin).
 * @throws ConfigError (key `plugins`, a user error) naming the specifier when the module cannot be
 *   found or has no plugin export; the module's own error (with its stack) when importing it fails
 *   otherwise. */
export async function importPlugin(specifier: string, baseDir = process.cwd()): Promise<EnginePlugin> {
  let target = specifier;
  if (BUILTIN_PLUGINS[specifier]) target = pathToFileURL(resolve(REPO_ROOT, BUILTIN_PLUGINS[specifier]!)).href;
  else if (specifier.startsWith(".") || isAbsolute(specifier)) target = pathToFileURL(resolve(baseDir, specifier)).href;
  let mod: Record<string, unknown>;
  try {
    mod = (await import(target)) as Record<string, unknown>;
  } catch (e) {
    const msg = (e as Error).message;
    if (/Cannot find (module|package)/.test(msg)) throw new ConfigError([{ path: "plugins", message: `cannot load "${specifier}": ${msg}` }], "invalid plugins");
    throw new Error(`plugins: cannot load "${specifier}": ${msg}`, { cause: e });
  }
  const isPlugin = (v: unknown): v is EnginePlugin => typeof v === "object" && v !== null && typeof (v as EnginePlugin).name === "string" && typeof (v as EnginePlugin).setup === "function";
  if (isPlugin(mod.default)) return mod.default;
  for (const v of Object.values(mod)) if (isPlugin(v)) return v;
  throw new ConfigError([{ path: "plugins", message: `module "${specifier}" exports no plugin (expected a default export made with definePlugin)` }], "invalid plugins");
}

/** All plugins for a job: the built-ins its config selects, then its `plugins` list. */
export async function pluginsForJob(cfg: JobConfig, baseDir = process.cwd()): Promise<EnginePlugin[]> {
  const names = [...builtinPluginNames(cfg), ...((cfg as { plugins?: string[] }).plugins ?? [])];
  const out: EnginePlugin[] = [];
  for (const n of names) out.push(await importPlugin(n, baseDir));
  return out;
}
