/**
 * Loads the job for a run: the `--config` file (or {@link DEFAULT_JOB} when none is given),
 * merged with a `--deepspeed` file and command-line overrides, resolved by `resolveJobConfig`;
 * the job file's relative paths read from its folder (job-paths.ts).
 */
import { dirname, resolve } from "node:path";
import { DEFAULT_JOB } from "./default-job.ts";
import { resolveJobPaths } from "./job-paths.ts";
import type { SetOverride } from "./set-override.ts";
import { applyHubModel } from "./resolve-model.ts";
import { readJsonFile, resolveJobConfig, type JobOverrides } from "./resolve.ts";
import type { ResolvedJob } from "./types.ts";

/** Where the job comes from. */
export interface LoadJobOptions {
  /** Path of a job JSON file; absent → the built-in default job. */
  configPath?: string;
  /** Path of a DeepSpeed ds_config.json whose (DeepSpeed-only) keys override the job's. */
  deepspeedPath?: string;
  overrides?: JobOverrides;
  /** `--init-from`: a Hugging Face directory with config.json supplies (or must agree with) the
   * job's model section (resolve-model.ts `applyHubModel`). */
  initFrom?: string;
  /** `--set KEY=VALUE` overrides (set-override.ts), applied after the job file and --deepspeed. */
  sets?: readonly SetOverride[];
}

/**
 * Reads, merges and resolves a job.
 * @throws ConfigError for a missing/unparsable file or any invalid value (all issues at once).
 */
export async function loadJobConfig(opts: LoadJobOptions = {}): Promise<ResolvedJob> {
  // both files may be Hjson (comments), as DeepSpeed parses its config with hjson
  const read = opts.configPath ? await readJsonFile(opts.configPath, { hjson: true }) : DEFAULT_JOB;
  const source = opts.configPath ?? "<default job>";
  // a model from a Hub directory (model.from_pretrained, or --init-from DIR with config.json)
  const raw =
    read !== null && typeof read === "object" && !Array.isArray(read)
      ? applyHubModel(read as Record<string, unknown>, { initFrom: opts.initFrom, baseDir: opts.configPath ? dirname(resolve(opts.configPath)) : process.cwd(), defaultModel: !opts.configPath, source })
      : read;
  const deepspeed = opts.deepspeedPath ? { raw: await readJsonFile(opts.deepspeedPath, { hjson: true }), source: opts.deepspeedPath } : undefined;
  // gradient_clipping follows DeepSpeed (0 = off when a config leaves it out); the built-in job
  // clips at 1.0, which would silently change a DeepSpeed config run without --config
  const builtInClip = !opts.configPath && deepspeed !== undefined && isObject(deepspeed.raw) && !Object.hasOwn(deepspeed.raw, "gradient_clipping") && isObject(raw) && raw.gradient_clipping !== undefined;
  const job = builtInClip ? Object.fromEntries(Object.entries(raw as Record<string, unknown>).filter(([k]) => k !== "gradient_clipping")) : raw;
  // relative paths of a job file are read from its folder (job-paths.ts); --set values, like every
  // command-line path, from the working directory
  const paths = opts.configPath && isObject(job) ? resolveJobPaths(job, dirname(resolve(opts.configPath))) : null;
  const out = resolveJobConfig(paths ? paths.job : job, { source, deepspeed, overrides: opts.overrides, sets: opts.sets });
  if (paths) out.warnings.push(...paths.warnings);
  if (builtInClip && out.config.gradient_clipping === 0) {
    out.warnings.push(`gradient_clipping: off (0, DeepSpeed's default), as ${deepspeed!.source} does not set it; the built-in job alone clips at ${String((raw as Record<string, unknown>).gradient_clipping)} — set gradient_clipping in ${deepspeed!.source} to clip`);
  }
  return out;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}
