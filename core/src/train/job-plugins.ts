/**
 * The plugins of a job as the trainer needs them before any engine exists: the plugin objects (for
 * `Engine.create`) and their memory contributions for the up-front memory check, including the
 * plugins a *variant* of the job would load (another ZeRO stage, when the check looks for a remedy).
 * Built-ins come from the registry (engine/registry.ts), loaded by package name like third-party
 * plugins (engine/plugin-loader.ts); this file names none.
 */
import { ConfigError } from "../config/errors.ts";
import type { JobConfig } from "../config/types.ts";
import type { EnginePlugin } from "../engine/hooks.ts";
import { importPlugin, pluginsForJob } from "../engine/plugin-loader.ts";
import { builtinPluginPackages, OFFLOAD_PLUGIN_PACKAGE, STAGE_PLUGIN_PACKAGES } from "../engine/registry.ts";
import type { MemoryPlugins } from "./memory-check.ts";

/** What {@link loadJobPlugins} returns. */
export interface JobPlugins {
  /** The job's plugins in set-up order: the built-ins its config selects, then its `plugins` list. */
  plugins: EnginePlugin[];
  /** Memory contributions of the job and of its variants (memory-check.ts). */
  memory: MemoryPlugins;
}

/**
 * Load `config`'s plugins and the built-in plugins of every ZeRO stage and offload (for the memory
 * check's remedies).
 * @param baseDir the job file's directory (relative plugin paths and package names resolve there)
 * @throws ConfigError (key `plugins`) when a plugin cannot be loaded or the set does not compose
 */
export async function loadJobPlugins(config: JobConfig, baseDir?: string): Promise<JobPlugins> {
  const plugins = await pluginsForJob(config, baseDir);
  const builtin = builtinPluginPackages(config).length;
  const extra = plugins.slice(builtin); // the job's own `plugins` list, in order
  const byPackage = new Map<string, EnginePlugin>();
  const own = builtinPluginPackages(config);
  own.forEach((pkg, i) => byPackage.set(pkg, plugins[i]!));
  for (const pkg of [...Object.values(STAGE_PLUGIN_PACKAGES), OFFLOAD_PLUGIN_PACKAGE]) {
    if (byPackage.has(pkg)) continue;
    // another stage is needed only to look for a remedy; where its package is not installed (a
    // project with just @zeromoe/core and @zeromoe/kernels) that variant is estimated without it,
    // i.e. replicated — an over-estimate, so no remedy is suggested that would not fit
    try {
      byPackage.set(pkg, await importPlugin(pkg, baseDir));
    } catch (e) {
      if (!(e instanceof ConfigError)) throw e;
    }
  }
  const pluginsFor = (variant: JobConfig): EnginePlugin[] => {
    const pkgs = builtinPluginPackages(variant);
    return [...pkgs.map((p) => byPackage.get(p)).filter((p): p is EnginePlugin => p !== undefined), ...extra];
  };
  return { plugins, memory: { plugins, pluginsFor } };
}
