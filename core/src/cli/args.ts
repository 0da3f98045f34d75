/**
 * Command-line parsing for `bun run train`, with Node's `util.parseArgs` (built into Bun; no
 * dependency). Unknown options, missing values and malformed numbers are {@link UsageError}s whose
 * message ends with the usage text.
 */
import { parseArgs } from "node:util";
import { parseByteSize } from "../config/byte-size.ts";
import { suggest } from "../config/errors.ts";
import { suggestBackend } from "../config/backend-name.ts";
import { quoteUntrusted } from "../config/quote-untrusted.ts";
import type { JobOverrides } from "../config/resolve.ts";
import { parseSetOverride, type SetOverride } from "../config/set-override.ts";
import { loadJobConfig } from "../config/load.ts";
import type { ResolvedJob } from "../config/types.ts";

/** Usage of `bun run train`. */
export const TRAIN_USAGE = `usage: bun run train [options]

  --config <job.json>          job file (default: the built-in job, a small mixtral on Moby Dick)
  --deepspeed <ds_config.json> merge a DeepSpeed config (DeepSpeed keys only) over the job
  --steps <N>                  optimizer steps (overrides "steps")
  --world-size <N>             number of ranks (overrides "world_size")
  --seed <S>                   seed (overrides "seed")
  --backend <auto|webgpu|cpu>  compute backend (overrides "backend")
  --summary <out.json>         write a JSON summary of the run here
  --plots <dir>                write the run's plots (SVG and PNG) here (docs/summary.md)
  --resume <dir|tag>           resume from a checkpoint directory (its "latest" tag) or a tag path
  --init-from <dir|file>       initialise weights from a Hugging Face checkpoint: a save_pretrained
                               directory (config.json, model.safetensors or shards + index; its
                               config.json gives the model, a job's model section must agree),
                               an index file or one .safetensors file
  --dump-batches <dir>         write every step's input ids and labels as trained, one safetensors
                               file per step and rank (docs/summary.md "Batch dumps"); dir must be
                               new or empty
  --save-init <dir>            before step 1, write the initial weights in fp32 (the master copy
                               under bf16/fp16) as a Hugging Face directory (config.json +
                               model.safetensors) that --init-from and Transformers read
  --set <key=value>            override any job key, repeatable (--set moe.ep_size=1,
                               --set optimizer.params.lr=1e-4; value JSON or text)
  --max-device-memory <size>   device memory budget per rank, e.g. 8MiB or 4GiB (overrides
                               "max_device_memory"): the memory check and the backend honour it
  --launcher <local|mpi>       local: ranks are threads of this process (default); mpi: run
                               \`mpirun -np <world size>\` for you, one process per rank (Open MPI)
  --hostfile <file>            with --launcher mpi: Open MPI hostfile (ranks on several hosts)
  -h, --help                   show this help`;

/** A command-line mistake; `message` includes the usage text unless constructed with `usage` "". */
export class UsageError extends Error {
  /** @param usage appended after a blank line; "" appends nothing (a problem the usage text would not help with). */
  constructor(problem: string, usage = TRAIN_USAGE) {
    super(usage === "" ? problem : `${problem}\n\n${usage}`);
    this.name = "UsageError";
  }
}

/** Parsed `train` arguments. Absent options are undefined. */
export interface TrainArgs {
  help: boolean;
  config?: string;
  deepspeed?: string;
  steps?: number;
  worldSize?: number;
  seed?: number;
  backend?: "auto" | "webgpu" | "cpu";
  summary?: string;
  /** `--plots`: folder for the run's plots. */
  plots?: string;
  resume?: string;
  initFrom?: string;
  /** `--dump-batches`: folder for the per-step batch files (train/batch-dump.ts). */
  dumpBatches?: string;
  /** `--save-init`: folder for the step-0 fp32 weights (checkpoint/fp32-weights.ts). */
  saveInit?: string;
  /** `--launcher`: "local" (default) or "mpi" (run under mpirun; docs/comm.md). */
  launcher?: "local" | "mpi";
  /** `--hostfile` for `--launcher mpi`. */
  hostfile?: string;
  /** `--max-device-memory`, bytes. */
  maxDeviceMemory?: number;
  /** `--set KEY=VALUE`, in order (config/set-override.ts). */
  sets?: SetOverride[];
}

const OPTIONS = {
  config: { type: "string" },
  deepspeed: { type: "string" },
  steps: { type: "string" },
  "world-size": { type: "string" },
  seed: { type: "string" },
  backend: { type: "string" },
  summary: { type: "string" },
  plots: { type: "string" },
  resume: { type: "string" },
  "init-from": { type: "string" },
  "dump-batches": { type: "string" },
  "save-init": { type: "string" },
  launcher: { type: "string" },
  hostfile: { type: "string" },
  "max-device-memory": { type: "string" },
  set: { type: "string", multiple: true },
  help: { type: "boolean", short: "h" },
} as const;

/** Parses an integer option in [min, max]; throws UsageError naming the option. */
function intOption(name: string, raw: string | undefined, min: number, max: number): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^[+-]?\d+$/.test(raw.trim())) throw new UsageError(`--${name}: expected an integer, got ${quoteUntrusted(raw)}`);
  const v = Number(raw);
  if (!Number.isSafeInteger(v) || v < min || v > max) throw new UsageError(`--${name}: expected an integer in [${min}, ${max}], got ${raw}`);
  return v;
}

/** Most arguments accepted (every option given twice is far below it). */
export const MAX_ARGS = 64;
/** Longest argument accepted, characters (Linux PATH_MAX). */
export const MAX_ARG_CHARS = 4096;

/** Options whose value is a number: a negative value after a space is a value, not an option. */
const NUMERIC_OPTIONS = new Set(["--steps", "--world-size", "--seed"]);

/**
 * Joins `--steps -5` into `--steps=-5` for the numeric options, so that a negative number reaches
 * the range check (which names the option and its range) instead of `util.parseArgs`' "argument
 * is ambiguous", which treats any value starting with "-" as a possible option.
 */
function joinNegativeNumbers(argv: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const next = argv[i + 1];
    if (NUMERIC_OPTIONS.has(a) && next !== undefined && /^-[\d.]/.test(next)) {
      out.push(`${a}=${next}`);
      i++;
    } else out.push(a);
  }
  return out;
}

/** Rejects an empty string value (e.g. `--config=`). */
function pathOption(name: string, raw: string | undefined): string | undefined {
  if (raw !== undefined && raw.trim() === "") throw new UsageError(`--${name}: expected a path, got an empty string`);
  return raw;
}

/** `--launcher`: "local" or "mpi"; anything else is a UsageError. */
function launcherOption(raw: string | undefined): "local" | "mpi" | undefined {
  if (raw === undefined || raw === "local" || raw === "mpi") return raw;
  const near = suggest(raw, ["local", "mpi"]);
  throw new UsageError(`--launcher: expected local or mpi, got ${quoteUntrusted(raw)}${near ? `; did you mean ${near}?` : ""}`);
}

/**
 * Parses `argv` (without the `bun` and script entries, i.e. `process.argv.slice(2)`).
 * @throws UsageError for an unknown option (with a did-you-mean), a missing value, a positional
 * argument, a malformed number or an unknown backend.
 */
export function parseTrainArgs(argv: readonly string[]): TrainArgs {
  // bounded before any parsing, suggestion or echo (issue 18): a path is at most PATH_MAX
  if (argv.length > MAX_ARGS) throw new UsageError(`${argv.length} arguments; at most ${MAX_ARGS} are accepted`);
  for (const a of argv) {
    if (a.length > MAX_ARG_CHARS) throw new UsageError(`argument ${quoteUntrusted(a)} is longer than the ${MAX_ARG_CHARS}-character limit`);
  }
  let values: Record<string, string | boolean | string[] | undefined>;
  try {
    ({ values } = parseArgs({ args: joinNegativeNumbers(argv), options: OPTIONS, strict: true, allowPositionals: false }));
  } catch (e) {
    const msg = e instanceof Error ? e.message : String(e);
    const unknown = /Unknown option '(-{1,2}[^']+)'/.exec(msg);
    if (unknown) {
      const name = unknown[1].replace(/^-+/, "").split("=")[0];
      const near = suggest(name, Object.keys(OPTIONS));
      throw new UsageError(`unknown option ${quoteUntrusted(unknown[1])}${near ? `; did you mean --${near}?` : ""}`);
    }
    if (/Unexpected argument/.test(msg)) throw new UsageError(`unexpected argument: ${msg.replace(/^.*Unexpected argument '([^']*)'.*$/s, "$1")} (options take the form --name value)`);
    throw new UsageError(msg);
  }
  const backend = values.backend as string | undefined;
  if (backend !== undefined && backend !== "auto" && backend !== "webgpu" && backend !== "cpu") {
    const near = suggestBackend(backend);
    throw new UsageError(`--backend: expected auto, webgpu or cpu, got ${quoteUntrusted(backend)}${near ? `; did you mean ${near}?${near === "webgpu" ? " (the GPU backend)" : ""}` : ""}`);
  }
  const str = (k: keyof typeof OPTIONS) => values[k] as string | undefined;
  return {
    help: values.help === true,
    config: pathOption("config", str("config")),
    deepspeed: pathOption("deepspeed", str("deepspeed")),
    steps: intOption("steps", str("steps"), 0, 2 ** 31 - 1),
    worldSize: intOption("world-size", str("world-size"), 1, 65536),
    seed: intOption("seed", str("seed"), 0, 2 ** 32 - 1),
    backend,
    summary: pathOption("summary", str("summary")),
    plots: pathOption("plots", str("plots")),
    resume: pathOption("resume", str("resume")),
    initFrom: pathOption("init-from", str("init-from")),
    dumpBatches: pathOption("dump-batches", str("dump-batches")),
    saveInit: pathOption("save-init", str("save-init")),
    launcher: launcherOption(str("launcher")),
    hostfile: pathOption("hostfile", str("hostfile")),
    maxDeviceMemory: sizeOption("max-device-memory", str("max-device-memory")),
    sets: (values.set as string[] | undefined)?.map((a) => {
      const s = parseSetOverride(a);
      if (typeof s === "string") throw new UsageError(`--set: ${s}`);
      return s;
    }),
  };
}

/** Parses a byte-size option ("8MiB", "4GiB", bytes); throws UsageError naming the option. */
function sizeOption(name: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const b = parseByteSize(raw);
  if (typeof b === "string") throw new UsageError(`--${name}: ${b}`);
  return b;
}

/** The config overrides carried by parsed arguments (for `loadJobConfig`). */
export function trainArgsToOverrides(a: TrainArgs): JobOverrides {
  return { steps: a.steps, world_size: a.worldSize, seed: a.seed, backend: a.backend, max_device_memory: a.maxDeviceMemory };
}

/**
 * Loads the job the arguments describe: `--config` (or the default job), `--deepspeed`, and the
 * overrides. @throws ConfigError (all config problems at once).
 */
export function loadTrainJob(a: TrainArgs): Promise<ResolvedJob> {
  return loadJobConfig({ configPath: a.config, deepspeedPath: a.deepspeed, overrides: trainArgsToOverrides(a), initFrom: a.initFrom, sets: a.sets });
}
