#!/usr/bin/env bun
/**
 * `bun run train [--config job.json] [--deepspeed ds.json] [--steps N] [--world-size N] [--seed S]
 * [--summary out.json] [--backend auto|webgpu|cpu]`: train a job end to end (the built-in default
 * job without `--config`). Prints the job, then rank 0's log (backend and why, data, a line every
 * `steps_per_print` steps, validation every `eval_interval` steps, a progress bar on a terminal),
 * then a result line; `--summary` writes docs/summary.md's JSON.
 *
 * Exit status (docs/checkpoints.md "Exit status"):
 * - 0: the run finished all its steps;
 * - 2: a user error — UsageError (command line), ConfigError (job or DeepSpeed file), DataError
 *   (dataset), CheckpointError (`--resume`: damaged, mixed or edited checkpoint), SafetensorsError
 *   (`--init-from`), DeviceBudgetError (`max_device_memory` passed at run time, e.g. by
 *   activations) — printed as its message without a stack trace;
 * - 1: the run failed otherwise: the failing rank and its error, with the stack; without it for an
 *   environment problem (backend "webgpu" requested where no working WebGPU device exists, a
 *   checkpoint write failing with disk full/quota/read-only: CheckpointWriteError);
 * - 3: stopped by SIGINT/SIGTERM after saving a checkpoint (resume with `--resume`), with a
 *   `stopped` line; without `checkpoint.dir` a stopped run exits 128 + the signal number;
 * - 4: stopped by the divergence policy (train/divergence.ts, job key `max_bad_steps`);
 * - 129: the launcher (parent process, or the `--launcher mpi` process) went away (launch/parent-watch.ts).
 * A rank's user or environment error is printed once, without its error name; the rank is named
 * only when the error is its own (not the same on every failing rank). When several ranks fail,
 * the cause shown first is a rank's own typed error (e.g. rank 0's manifest write failing) rather
 * than another rank's report that the collective step failed.
 */
import { existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { writingFile } from "../checkpoint/errors.ts";
import { ConfigError } from "../config/errors.ts";
import { summarizeJob } from "../config/summary.ts";
import { writePlots } from "../observe/plots.ts";
import { DataError } from "../data/sources.ts";
import { LaunchError } from "../launch/launch.ts";
import { EXIT_ORPHANED, watchParent } from "../launch/parent-watch.ts";
import { EXIT_DIVERGED } from "../train/divergence.ts";
import { runTraining } from "../train/run.ts";
import { mpiEnvironment } from "../comm/mpi/environment.ts";
import { runTrainingMpiRank } from "../train/run-mpi.ts";
import { reportMpiRankError, trainUnderMpirun } from "./mpi-launcher.ts";
import { EXIT_STOPPED_AFTER_SAVE, receivedStopSignal, signalName } from "../train/stop-signal.ts";
import { loadTrainJob, parseTrainArgs, TRAIN_USAGE, UsageError } from "./args.ts";
import { ensureOutputDir, fileOutputProblem } from "./output-paths.ts";
import { resumeStepsProblem } from "./resume-steps.ts";
import { resumeEtpProblem } from "./resume-etp.ts";
import { batchDumpProblem, newOutputDirProblem } from "../train/batch-dump.ts";
import { commEnvProblem } from "./comm-env.ts";
import { torchrunEnvProblem } from "./torchrun-env.ts";
import { sleep } from "@zeromoe/kernels/runtime";

/** Error names that are the user's to fix: shown as their message only, exit status 2. */
const USER_ERRORS = ["UsageError", "ConfigError", "DataError", "CheckpointError", "SafetensorsError", "PluginConflictError", "DeviceBudgetError"];

/** Errors of the environment, not of the input nor a bug: message only, exit status 1. */
const ENVIRONMENT_ERRORS = ["CheckpointWriteError"];

/** A system error of the environment in a rank's message (a save's mkdir or rename on a full or
 * read-only disk): the fs message names the path, so it is shown without a stack. */
const SYSTEM_ERROR = /^\w*Error: (ENOSPC|EDQUOT|EROFS|EIO|EACCES)\b/;

/** The error name of a rank failure's message ("<ErrorName>: <text>"), or "". */
function failureName(message: string): string {
  return /^(\w*Error): /.exec(message)?.[1] ?? "";
}

/** Message and exit status for an error that ended `train`. */
export function describeTrainError(e: unknown): { message: string; status: number } {
  if (e instanceof UsageError || e instanceof ConfigError || e instanceof DataError) return { message: `error: ${e.message}`, status: 2 };
  if (e instanceof LaunchError) {
    // a rank's own typed error is the cause, not another rank's report that the collective failed
    const typed = [...USER_ERRORS, ...ENVIRONMENT_ERRORS, "DivergenceError", "LossScaleError"];
    const own = e.failures.find((f) => !f.aborted && (typed.includes(failureName(f.message)) || SYSTEM_ERROR.test(f.message)));
    const cause = own ?? e.failures.find((f) => f.rank === e.rank);
    if (cause) {
      // a rank's message is "<ErrorName>: <text>"; the name is not shown to the user
      const name = failureName(cause.message);
      const text = name ? cause.message.slice(name.length + 2) : cause.message;
      // the same error on every rank that failed on its own (the others only aborted): not the
      // rank's own problem, so the rank is not named; world size 1 has one rank to blame
      const causes = e.failures.filter((f) => !f.aborted);
      const shared = causes.every((f) => f.message === cause.message) && (causes.length > 1 || e.failures.length === 1);
      const where = shared ? "" : `rank ${cause.rank}: `;
      if (USER_ERRORS.includes(name)) return { message: `error: ${where}${text}`, status: 2 };
      if (ENVIRONMENT_ERRORS.includes(name) || SYSTEM_ERROR.test(cause.message)) return { message: `error: ${where}${text}`, status: 1 };
      // every rank stops at the same step with the same message: shown once, no stack
      if (name === "DivergenceError" || name === "LossScaleError") return { message: `error: ${text}`, status: EXIT_DIVERGED };
      // an environment problem, not a bug: the message says why, a stack would only hide it
      if (/backend "webgpu" requested but unavailable/.test(text)) return { message: `error: ${where}${text}`, status: 1 };
    }
    return { message: `error: training failed: ${e.message}`, status: 1 };
  }
  if (e instanceof Error && ENVIRONMENT_ERRORS.includes(e.name)) return { message: `error: ${e.message}`, status: 1 };
  if (e instanceof Error && (e.name === "LossScaleError" || e.name === "DivergenceError")) return { message: `error: ${e.message}`, status: EXIT_DIVERGED };
  return { message: `error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`, status: 1 };
}

/** Write `value` as indented JSON to `path`, creating its folder: into a temporary file renamed
 * onto `path`, so a full disk leaves no empty or truncated file.
 * @throws CheckpointWriteError naming `path` when the environment refuses the write (disk full,
 *   quota, read-only file system): shown without a stack, exit 1. */
function writeJson(path: string, value: unknown): void {
  const abs = resolve(path);
  mkdirSync(dirname(abs), { recursive: true });
  const tmp = `${abs}.tmp-${process.pid}`;
  try {
    writingFile(abs, "write", () => {
      writeFileSync(tmp, JSON.stringify(value, null, 2) + "\n");
      renameSync(tmp, abs);
    });
  } catch (e) {
    rmSync(tmp, { force: true });
    throw e;
  }
}

/** Run `train` with `argv` (without the runtime and script); returns the exit status. */
export async function main(argv: readonly string[]): Promise<number> {
  // the trainer dies with its launcher (exit handlers release the checkpoint lock)
  const unwatch = watchParent((old, what) => {
    try {
      process.stderr.write(`error: the launcher (${what === "parent" ? "parent process" : "--launcher mpi process"} ${old}) is gone; stopping the run (exit ${EXIT_ORPHANED})\n`);
    } catch {
      // stderr may be a closed pipe
    }
    process.exit(EXIT_ORPHANED);
  });
  // under mpirun this process is one rank (docs/comm.md "The mpi transport"); only rank 0 prints
  const mpi = mpiEnvironment();
  try {
    const a = parseTrainArgs(argv);
    if (a.help) {
      console.log(TRAIN_USAGE);
      return 0;
    }
    if (a.hostfile !== undefined && a.launcher !== "mpi") throw new UsageError(`--hostfile is only used with --launcher mpi`);
    // torchrun-style RANK/WORLD_SIZE/...: honoured only as a world of one, else refused naming the launcher to use
    const torchrun = torchrunEnvProblem(process.env, a.worldSize, mpi !== null);
    if (torchrun !== null) throw new UsageError(torchrun, "");
    if (a.launcher === "mpi" && mpi === null) return await trainUnderMpirun(a, argv);
    if (mpi !== null) {
      if (a.worldSize !== undefined && a.worldSize !== mpi.worldSize) throw new UsageError(`--world-size ${a.worldSize} but mpirun started ${mpi.worldSize} processes (under mpirun the world size is mpirun's -np)`, "");
      a.worldSize = mpi.worldSize;
    }
    if (a.initFrom !== undefined && a.resume !== undefined) throw new UsageError(`--init-from and --resume: give one (a checkpoint already holds the parameters)`);
    if (a.initFrom !== undefined && !existsSync(a.initFrom)) throw new UsageError(`--init-from: file not found: ${resolve(a.initFrom)}`);
    const { config, warnings } = await loadTrainJob(a);
    // expert tensor parallelism holds experts as slices: no Hugging Face weights in or out (docs/moe.md)
    const etp = config.moe?.etp_size ?? 1;
    if (etp > 1 && a.initFrom !== undefined) throw new UsageError(`--init-from with moe.etp_size ${etp}: loading Hugging Face weights into expert slices is not supported (use moe.etp_size 1)`, "");
    if (etp > 1 && a.saveInit !== undefined) throw new UsageError(`--save-init with moe.etp_size ${etp}: the experts are etp slices; writing them as Hugging Face weights is not supported (use moe.etp_size 1)`, "");
    const commProblem = commEnvProblem(process.env, config.world_size);
    if (commProblem !== null) throw new UsageError(commProblem, "");
    // paths written after training are checked before it starts
    const summaryProblem = a.summary === undefined ? null : fileOutputProblem(a.summary, true);
    if (summaryProblem !== null) throw new UsageError(`--summary: ${summaryProblem}`);
    // under mpirun every process checks its arguments; the output folders only at rank 0, as the
    // other ranks may already be writing into them
    const checksOutputs = mpi === null || mpi.rank === 0;
    const dumpProblem = a.dumpBatches === undefined || !checksOutputs ? null : batchDumpProblem(a.dumpBatches, config);
    if (dumpProblem !== null) throw new UsageError(`--dump-batches: ${dumpProblem}`, "");
    if (a.dumpBatches !== undefined && a.saveInit !== undefined && resolve(a.dumpBatches) === resolve(a.saveInit)) throw new UsageError(`--dump-batches and --save-init name the same directory ${resolve(a.saveInit)}; give two`, "");
    const initProblem = a.saveInit === undefined || !checksOutputs ? null : newOutputDirProblem(a.saveInit);
    if (initProblem !== null) throw new UsageError(`--save-init: ${initProblem}`, "");
    const ckptProblem = config.checkpoint.dir === null ? null : ensureOutputDir(config.checkpoint.dir);
    if (ckptProblem !== null) throw new ConfigError([{ path: "checkpoint.dir", message: ckptProblem }], `invalid job ${a.config ?? "<default job>"}`);
    if (a.resume !== undefined) {
      // a checkpoint that is not there is refused before any rank starts (no backend probe, no data)
      const bareTag = config.checkpoint.dir !== null && existsSync(join(config.checkpoint.dir, a.resume));
      if (!existsSync(a.resume) && !bareTag) throw new UsageError(`--resume: no such checkpoint: ${resolve(a.resume)} (give a checkpoint directory, a tag directory, or a tag under checkpoint.dir)`, "");
      const problem = resumeStepsProblem(a.resume, config.steps, config.checkpoint.dir, a.steps !== undefined ? "--steps" : "steps");
      if (problem !== null) throw new UsageError(problem, "");
      const etpProblem = config.moe ? resumeEtpProblem(a.resume, config.moe.etp_size ?? 1, config.checkpoint.dir) : null;
      if (etpProblem !== null) throw new UsageError(etpProblem, "");
    }
    const out = mpi !== null && mpi.rank !== 0 ? (_: string) => {} : (s: string) => void process.stdout.write(s + "\n");
    out(`job        ${a.config ?? "<default job>"}${a.deepspeed ? ` + ${a.deepspeed}` : ""}`);
    for (const l of summarizeJob(config)) out(l);
    for (const w of warnings) out(`warning: ${w}`);
    const t0 = performance.now();
    const runOpts = { resume: a.resume, initFrom: a.initFrom, dumpBatches: a.dumpBatches, saveInit: a.saveInit, baseDir: a.config === undefined ? undefined : dirname(resolve(a.config)) };
    const run = mpi === null
      ? await runTraining(config, runOpts)
      : await runTrainingMpiRank(config, mpi.rank, { ...runOpts, onError: (e, r) => reportMpiRankError(e, r, describeTrainError) });
    if (run === null) return 0; // a rank other than 0 under mpirun: rank 0 reports
    const { summary } = run;
    const secs = (performance.now() - t0) / 1000;
    const val = summary.val_loss === null ? "" : `, val_loss ${summary.val_loss.toFixed(4)}`;
    const fin = summary.final_loss === null ? "no steps" : `final loss ${summary.final_loss.toFixed(4)}${val}`;
    const range = summary.start_step > 0 ? ` (${summary.start_step + 1}–${summary.start_step + summary.steps} of ${config.steps})` : "";
    out(`done       ${summary.steps} step${summary.steps === 1 ? "" : "s"}${range} in ${secs.toFixed(1)} s: ${fin}, ${Math.round(summary.tokens_per_second)} tokens/s (${summary.world_size} rank${summary.world_size === 1 ? "" : "s"}, ${summary.backend.name})`);
    if (a.plots) {
      const files = await writePlots(summary, a.plots);
      out(`plots      ${files.length} files in ${a.plots}`);
    }
    if (a.summary) {
      writeJson(a.summary, summary);
      out(`summary    ${a.summary}`);
    }
    // the signal the ranks stopped on: under mpirun it may have reached another rank's process only
    const sig = receivedStopSignal() || (run.reports[0]?.stopSignal ?? 0);
    const ended = summary.start_step + summary.steps;
    if (sig !== 0 && ended < config.steps) {
      // stopped by a signal before the last step: a supervisor must tell it from a finished run
      if (config.checkpoint.dir === null) {
        out(`stopped    by ${signalName(sig)} after step ${ended} of ${config.steps}; no checkpoint (checkpoint.dir is null) (exit ${128 + sig})`);
        return 128 + sig;
      }
      out(`stopped    by ${signalName(sig)} after step ${ended} of ${config.steps}; checkpoint saved in ${config.checkpoint.dir}: continue with --resume ${config.checkpoint.dir} (exit ${EXIT_STOPPED_AFTER_SAVE})`);
      // `bun run train` follows a non-zero status with its own "error: script … exited with code
      // 3", which reads like a crash: say beforehand that it is the clean stop's status
      const script = runScriptName();
      if (script !== null) out(`           a clean stop, nothing lost: the "error: script \"${script}\" exited with code ${EXIT_STOPPED_AFTER_SAVE}" bun run prints next is this status, not a failure`);
      return EXIT_STOPPED_AFTER_SAVE;
    }
    return 0;
  } catch (e) {
    const { message, status } = describeTrainError(e);
    if (mpi !== null && mpi.rank !== 0) {
      // every rank parsed the same job and fails the same way before training: rank 0 says it
      // (after a moment, so mpirun does not end rank 0 before it has)
      await sleep(1000);
      return status;
    }
    console.error(message);
    return status;
  } finally {
    unwatch();
  }
}

/** The package script this process runs under (`bun run train` sets npm_lifecycle_event), or null
 * when started directly (`bun core/src/cli/train.ts`). */
export function runScriptName(env: Record<string, string | undefined> = process.env): string | null {
  const name = env.npm_lifecycle_event;
  return typeof name === "string" && /^[A-Za-z0-9:_-]{1,40}$/.test(name) ? name : null;
}

if (import.meta.main) process.exit(await main(process.argv.slice(2)));
