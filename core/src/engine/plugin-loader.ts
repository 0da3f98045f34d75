/**
 * The plugin loader: turns the specifiers a job names into plugin objects, and checks the set
 * before anything runs (docs/architecture.md "Packages and layers"; docs/plugins.md "6. Loading a plugin").
 *
 * A specifier is one of (tried in this order):
 * - a built-in alias: the registry (registry.ts, the one file of core that names plugins) maps it
 *   to its package, loaded as below;
 * - a path (starts with `.` or `/`): resolved against the job file's directory, then the working
 *   directory;
 * - a package name (`zeromoe-plugin-x`, `@acme/zeromoe-plugin-y`): resolved as an import from the
 *   job file's directory, then the working directory, then this installation of @zeromoe/core
 *   (where the built-in plugin packages sit next to it) — so a plugin installed with `bun add` in
 *   the job's project, or in the project the trainer runs from, is found.
 *
 * The module's default export (or any export with a `name` and a `setup`) is the plugin. Failures
 * that are the user's to fix are {@link ConfigError}s on key `plugins` naming the specifier and what
 * to do (exit 2, no stack trace); an error thrown by the plugin module itself while it is imported
 * (a bug in the plugin) keeps its stack.
 */
import { existsSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { ConfigError } from "../config/errors.ts";
import type { JobConfig } from "../config/types.ts";
import { checkPluginSet, PluginConflictError } from "../hooks/plugin.ts";
import type { EnginePlugin } from "./hooks.ts";
import { BUILTIN_ALIASES, builtinPluginPackages } from "./registry.ts";
import { resolvePackage } from "@zeromoe/kernels/runtime";

/** Directory of this module: the last place a package name is resolved from. */
const CORE_DIR = import.meta.dirname;

function loadError(specifier: string, message: string): ConfigError {
  return new ConfigError([{ path: "plugins", message: `cannot load "${specifier}": ${message}` }], "invalid plugins");
}

/** Directories searched, in order, without repeats. */
function searchDirs(baseDir: string | undefined): string[] {
  const dirs = [baseDir ?? process.cwd(), process.cwd()].map((d) => resolve(d));
  return [...new Set(dirs)];
}

/**
 * Absolute file path of the module `specifier` names (see the module comment for the order).
 * @param specifier a built-in name, a path or a package name
 * @param baseDir the job file's directory (default: the working directory)
 * @throws ConfigError on key `plugins` naming the specifier, where it was looked for, and what to do
 */
export function resolvePlugin(specifier: string, baseDir?: string): string {
  if (typeof specifier !== "string" || specifier.length === 0) throw loadError(String(specifier), "a plugin specifier must be a non-empty string (a built-in name, a path or a package name)");
  const dirs = searchDirs(baseDir);
  if (specifier.startsWith(".") || isAbsolute(specifier)) {
    const tried = isAbsolute(specifier) ? [specifier] : dirs.map((d) => resolve(d, specifier));
    for (const f of tried) if (existsSync(f)) return f;
    throw loadError(specifier, `no such file (looked for ${tried.join(" and ")}); a relative path is resolved against the job file's directory, then the working directory`);
  }
  const pkg = BUILTIN_ALIASES[specifier] ?? specifier;
  for (const d of [...dirs, CORE_DIR]) {
    try {
      return resolvePackage(pkg, d);
    } catch {
      // not installed there: try the next place
    }
  }
  const builtin = pkg !== specifier || Object.values(BUILTIN_ALIASES).includes(pkg) ? `built-in plugin package ${pkg} ` : `package ${pkg} `;
  throw loadError(specifier, `${builtin}is not installed where the job file is (${dirs[0]})${dirs.length > 1 ? ` nor in the working directory (${dirs[1]})` : ""}: install it there with \`bun add ${pkg}\` (or \`bun add <path-to-its-folder-or-tarball>\`), or name the plugin by path`);
}

function isPlugin(v: unknown): v is EnginePlugin {
  return typeof v === "object" && v !== null && typeof (v as EnginePlugin).name === "string" && typeof (v as EnginePlugin).setup === "function";
}

/**
 * Load one plugin (see the module comment).
 * @param specifier a built-in name, a path or a package name
 * @param baseDir the job file's directory (default: the working directory)
 * @throws ConfigError on key `plugins` when the module cannot be found, when it cannot find a
 *   package it imports (typically `@zeromoe/core` not installed next to the plugin), or when it
 *   exports no plugin; the module's own error (with its stack) when importing it fails otherwise
 */
export async function importPlugin(specifier: string, baseDir?: string): Promise<EnginePlugin> {
  const file = resolvePlugin(specifier, baseDir);
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  } catch (e) {
    const msg = (e as Error).message ?? String(e);
    const missing = /Cannot find (?:module|package) ['"]([^'"]+)['"]/.exec(msg);
    if (missing) {
      const dep = missing[1]!;
      const bare = !dep.startsWith(".") && !isAbsolute(dep) && !dep.startsWith("file:");
      const fix = bare ? `install it next to the plugin (\`bun add ${dep.startsWith("@") ? dep.split("/").slice(0, 2).join("/") : dep.split("/")[0]}\` in the plugin's package, or in the project that runs it)` : "check the plugin's own import paths";
      throw loadError(specifier, `${file} imports "${dep}", which cannot be found: ${fix}`);
    }
    if (/Cannot find (module|package)/.test(msg)) throw loadError(specifier, msg);
    throw new Error(`plugins: cannot load "${specifier}" (${file}): ${msg}`, { cause: e });
  }
  if (isPlugin(mod.default)) return mod.default;
  for (const v of Object.values(mod)) if (isPlugin(v)) return v;
  throw loadError(specifier, `module ${file} exports no plugin (expected a default export made with definePlugin from @zeromoe/core/plugin)`);
}

/**
 * The job's plugins: the built-ins its config selects (registry.ts), then its `plugins` list in
 * order; the set is checked from the plugins' declarations (`claims`, `requires`, `conflicts`,
 * `overrides`) without running any setup, so a conflict surfaces before any data is loaded.
 * @param cfg the resolved job
 * @param baseDir the job file's directory (default: the working directory)
 * @throws ConfigError on key `plugins`: a plugin cannot be loaded (see {@link importPlugin}), or the
 *   set does not compose (two plugins claim one hook, a declared conflict, a missing requirement —
 *   each naming both plugins; hooks/plugin.ts checkPluginSet)
 */
export async function pluginsForJob(cfg: JobConfig, baseDir?: string): Promise<EnginePlugin[]> {
  const names = [...builtinPluginPackages(cfg), ...((cfg as { plugins?: string[] }).plugins ?? [])];
  const out: EnginePlugin[] = [];
  for (const n of names) out.push(await importPlugin(n, baseDir));
  try {
    checkPluginSet(out);
  } catch (e) {
    if (!(e instanceof PluginConflictError)) throw e;
    throw new ConfigError(e.message.split("\n").map((message) => ({ path: "plugins", message })), "plugins that cannot be combined");
  }
  return out;
}
