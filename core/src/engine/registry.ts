/**
 * The built-in plugin registry: which plugin *packages* a job's config selects (docs/architecture.md
 * "Packages and layers"). This is the only file of core that names a plugin; the
 * engine, the trainer, the memory check and the checkpoint code know plugins only through the
 * contract (core/src/engine/plugin-context.ts). The packages are loaded by name like third-party
 * ones (engine/plugin-loader.ts).
 *
 * | config                                   | package                  |
 * |------------------------------------------|--------------------------|
 * | `zero_optimization.stage` 1 / 2 / 3      | `@zeromoe/plugin-zero1/2/3` |
 * | a `moe` section (every sparse model)     | `@zeromoe/plugin-moe`    |
 * | `zero_optimization.offload_optimizer.device` or `offload_param.device` not "none" | `@zeromoe/plugin-offload` |
 * | `expert_parallel.enabled` (AutoEP; needs the moe plugin, selected with every sparse model) | `@zeromoe/plugin-autoep` |
 */
import type { JobConfig } from "../config/types.ts";

/** Package of the plugin implementing each ZeRO stage > 0. */
export const STAGE_PLUGIN_PACKAGES: Readonly<Record<1 | 2 | 3, string>> = {
  1: "@zeromoe/plugin-zero1",
  2: "@zeromoe/plugin-zero2",
  3: "@zeromoe/plugin-zero3",
};

/** Package of the plugin every sparse (MoE) model gets: router options, statistics, expert parallelism. */
export const MOE_PLUGIN_PACKAGE = "@zeromoe/plugin-moe";

/** Package of the plugin placing optimizer states / parameters in host memory or on NVMe
 * (ZeRO-Offload, ZeRO-Infinity). */
export const OFFLOAD_PLUGIN_PACKAGE = "@zeromoe/plugin-offload";

/** Package of the AutoEP plugin (DeepSpeed's `expert_parallel`): replaces a Hugging Face model's MoE
 * blocks, found by preset, with expert-parallel layers. */
export const AUTOEP_PLUGIN_PACKAGE = "@zeromoe/plugin-autoep";

/** Short built-in names a job's `plugins` list may use instead of the package name. */
export const BUILTIN_ALIASES: Readonly<Record<string, string>> = {
  zero1: STAGE_PLUGIN_PACKAGES[1],
  zero2: STAGE_PLUGIN_PACKAGES[2],
  zero3: STAGE_PLUGIN_PACKAGES[3],
  moe: MOE_PLUGIN_PACKAGE,
  offload: OFFLOAD_PLUGIN_PACKAGE,
  autoep: AUTOEP_PLUGIN_PACKAGE,
};

/** Packages of the built-in plugins `cfg` selects, in set-up order (stage first, then MoE, then
 * offload, then AutoEP). */
export function builtinPluginPackages(cfg: Pick<JobConfig, "zero_optimization" | "moe"> & { expert_parallel?: { enabled: boolean } }): string[] {
  const out: string[] = [];
  const z = cfg.zero_optimization;
  const stage = z.stage;
  if (stage === 1 || stage === 2 || stage === 3) out.push(STAGE_PLUGIN_PACKAGES[stage]);
  if (cfg.moe) out.push(MOE_PLUGIN_PACKAGE);
  if (z.offload_optimizer.device !== "none" || z.offload_param.device !== "none") out.push(OFFLOAD_PLUGIN_PACKAGE);
  if (cfg.expert_parallel?.enabled) out.push(AUTOEP_PLUGIN_PACKAGE);
  return out;
}
