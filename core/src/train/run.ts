/**
 * Run a resolved job: launch `config.world_size` ranks of rank.ts through `launch` (world size 1
 * included, so one code path trains everywhere) and merge their reports into a summary.
 */
import type { JobConfig } from "../config/types.ts";
import { acquireCheckpointLock } from "../checkpoint/dir-lock.ts";
import { launch } from "../launch/launch.ts";
import { loadJobPlugins } from "./job-plugins.ts";
import { checkDeviceBudget, checkModelStateFits, checkPeakFits, cpuMemoryLimits, readHostAvailableMemory } from "./memory-check.ts";
import { TENSOR_CORES_ENV, tensorCoresRequest } from "./backend.ts";
import { ConfigError } from "../config/errors.ts";
import type { TrainRankArgs } from "./rank.ts";
import { createStopFlag, installStopHandlers } from "./stop-signal.ts";
import { buildSummary, type RankReport, type TrainSummary } from "./summary.ts";

/** Options of {@link runTraining}. */
export interface RunTrainingOptions {
  /** Rank 0 prints log lines to stdout (default true). */
  verbose?: boolean;
  /** Draw a progress bar (default: stdout is a terminal and env CI is unset). */
  tty?: boolean;
  /** Terminal width for the bar (default: stdout's columns). */
  columns?: number;
  /** Folder relative plugin paths resolve against (default: the working directory). */
  baseDir?: string;
  /** Collective timeout in seconds (default: launch's, env ZEROMOE_COMM_TIMEOUT_S or 300). */
  timeoutS?: number;
  /** Resume from this checkpoint root or tag directory. */
  resume?: string;
  /** Initialise parameters from this Hugging Face safetensors file. */
  initFrom?: string;
  /** Write every step's batches here (batch-dump.ts; `--dump-batches`). */
  dumpBatches?: string;
  /** Write the step-0 fp32 weights here (checkpoint/fp32-weights.ts; `--save-init`). */
  saveInit?: string;
}

/** What a run produces. */
export interface TrainingRun {
  summary: TrainSummary;
  /** Every rank's report, in rank order. */
  reports: RankReport[];
}

/**
 * Train `config` (see the module comment).
 * @throws MemoryBudgetError (memory-check.ts) before launching when `config.backend` is "cpu" and
 * the model states cannot fit the host (each rank checks again once its backend is chosen);
 * CheckpointLockError (checkpoint/dir-lock.ts) when another live run holds `checkpoint.dir`'s lock;
 * LaunchError (core/src/launch) naming the first failing rank and its error.
 */
export async function runTraining(config: JobConfig, o: RunTrainingOptions = {}): Promise<TrainingRun> {
  // host memory is measured once, before any rank allocates (ranks share this process's memory)
  const hostMemory = readHostAvailableMemory();
  // the plugins are loaded here too: a set that does not compose is a config error before launching,
  // and their memory contributions (a ZeRO stage's, the MoE plugin's, a third party's) shape the estimate
  const jobPlugins = await loadJobPlugins(config, o.baseDir);
  // the environment's tensor-core switch is checked here, not first inside a rank
  try {
    tensorCoresRequest({ fp16: config.fp16.enabled, bf16: config.bf16.enabled });
  } catch (e) {
    throw new ConfigError([{ path: TENSOR_CORES_ENV, message: (e as Error).message, source: "environment" }], "invalid environment");
  }
  if (config.backend === "cpu") {
    checkModelStateFits(config, cpuMemoryLimits(hostMemory), jobPlugins.memory);
    checkPeakFits(config, cpuMemoryLimits(hostMemory), jobPlugins.memory);
  }
  else checkDeviceBudget(config, jobPlugins.memory); // the device budget needs no backend to check
  const verbose = o.verbose ?? true;
  // one run writes a checkpoint directory at a time; held until the ranks are done (and removed by
  // an exit handler when a second SIGINT/SIGTERM ends the process at once)
  const lock = config.checkpoint.dir === null ? null : acquireCheckpointLock(config.checkpoint.dir, (m) => { if (verbose) console.log(`warning: ${m}`); });
  const args: TrainRankArgs = {
    hostMemory,
    config,
    verbose,
    tty: o.tty ?? (process.stdout.isTTY === true && !process.env.CI),
    columns: o.columns ?? process.stdout.columns,
    baseDir: o.baseDir ?? process.cwd(),
    resume: o.resume,
    initFrom: o.initFrom,
    dumpBatches: o.dumpBatches,
    saveInit: o.saveInit,
    processStartMs: Date.now() - process.uptime() * 1000,
  };
  // SIGINT/SIGTERM ask the ranks to stop after the current step (saving a checkpoint) instead of
  // killing the process; the handlers live only while the ranks run
  const stop = createStopFlag();
  args.stop = stop;
  let uninstall = () => {};
  let reports: RankReport[];
  try {
    uninstall = installStopHandlers(stop);
    reports = await launch<RankReport, TrainRankArgs>({
      worldSize: config.world_size,
      entry: new URL("./rank.ts", import.meta.url),
      args,
      timeoutS: o.timeoutS,
    });
  } finally {
    uninstall();
    lock?.release();
  }
  return { summary: buildSummary(reports), reports };
}
