/**
 * The training loop of one rank, top to bottom: for each step take this rank's micro-batches from
 * the DataLoader, run `engine.trainBatch`, print a line every `steps_per_print` steps (rank 0),
 * evaluate every `eval_interval` steps, save a checkpoint every `checkpoint.save_interval` steps and
 * at the end (when `checkpoint.dir` is set), stop cleanly after the step during which SIGINT/SIGTERM
 * arrived (saving a checkpoint there; stop-signal.ts), stop with a DivergenceError after
 * `max_bad_steps` consecutive bad steps and write no checkpoint while the loss is non-finite
 * (divergence.ts), and keep what the summary needs. Steps are numbered
 * from the start of training: a run resumed after step s runs steps s+1 … `steps`. Every rank runs the same
 * sequence of collectives (trainBatch, the plugins' per-step metrics `engine.afterStep()` — e.g.
 * the MoE statistics' reduction —, evalLoss), so the loop must not branch on rank except for output.
 */
import type { Backend } from "@zeromoe/kernels";
import type { Communicator } from "../comm/communicator.ts";
import type { JobConfig } from "../config/types.ts";
import type { DataLoader, MicroBatch } from "../data/loader.ts";
import type { Engine, StepResult, TrainMicroBatch } from "../engine/engine.ts";
import { formatEvalLine, formatStepLine, mib } from "./log.ts";
import { DivergenceWatch } from "./divergence.ts";
import { signalName, stopRequested, type StopFlag } from "./stop-signal.ts";
import type { RunObserver } from "../observe/observer.ts";
import type { BatchDumper } from "./batch-dump.ts";

/** Where rank 0's output goes (the others pass a sink that drops everything). */
export interface LoopOutput {
  /** A whole log line (no newline). */
  line(message: string): void;
  /** Progress after `step` steps with the latest figures (draws the bar on a terminal). */
  progress(step: number, fields: Record<string, number | string>): void;
}

/** What the loop hands back for the summary. */
export interface LoopResult {
  /** Mean loss of each step over all ranks. */
  losses: number[];
  /** trainBatch wall time of each step, seconds. */
  stepSeconds: number[];
  /** Latest validation loss (over all ranks), null when none ran. */
  valLoss: number | null;
  /** The last step's result, null after 0 steps. */
  last: StepResult | null;
  /** Tag directories of the checkpoints saved, oldest first. */
  checkpoints: string[];
  /** The step after which a SIGINT/SIGTERM stopped the run (null: it ran to `steps`). */
  stoppedAfter: number | null;
  /** The signal number the ranks agreed to stop on (2 SIGINT, 15 SIGTERM; 0: not stopped). The
   * same on every rank, also on those whose process did not receive it (mpi: one rank signalled). */
  stopSignal: number;
}

/** Engine micro-batches from loader batches: labels = inputs (the model shifts them, as in HF). */
export function toEngineBatches(mbs: readonly MicroBatch[]): TrainMicroBatch[] {
  return mbs.map((m) => ({ inputIds: m.inputs, labels: m.labels ?? m.inputs, batch: m.micro, seq: m.seqLen, ...(m.segmentIds ? { segmentIds: m.segmentIds } : {}) }));
}

/** Validation micro-batches per rank per evaluation: at most `eval_batches`, and the same number on
 * every rank (evalLoss is a collective), so only whole rounds of world_size slots are used. */
export function evalBatchCount(validationWindows: number, micro: number, worldSize: number, evalBatches: number): number {
  return Math.min(evalBatches, Math.floor(Math.floor(validationWindows / micro) / worldSize));
}

/** Options of {@link trainLoop}. */
export interface LoopOptions {
  config: JobConfig;
  comm: Communicator;
  backend: Backend;
  engine: Engine;
  loader: DataLoader;
  out: LoopOutput;
  /** Steps already done (a resumed run: the checkpoint's global step); default 0. */
  startStep?: number;
  /** Where to save checkpoints (`checkpoint.dir`, absolute or relative to the working directory);
   * null: no saving. */
  checkpointDir?: string | null;
  /** Stop flag set by SIGINT/SIGTERM in the launcher (stop-signal.ts); absent: no signal handling. */
  stop?: StopFlag;
  /** Timing, comms logger, FLOPs profiler, monitors and history (core/src/observe/observer.ts);
   * `comm`, `backend` and `engine` must be the observer's observed ones. */
  observer?: RunObserver;
  /** Writes each step's micro-batches as trained (`--dump-batches`, batch-dump.ts); null: none. */
  dump?: BatchDumper | null;
  /** Called once when the first step of this run has finished (its loss read), e.g. to print the
   * start-up phases (startup-phases.ts). */
  onFirstStep?: () => void | Promise<void>;
}

/** Runs `config.steps` optimizer steps (see the module comment).
 * @throws DivergenceError (divergence.ts) after `max_bad_steps` consecutive bad steps, or when the
 *   run ends (or is stopped) while its loss is non-finite; no checkpoint is written then. */
export async function trainLoop(o: LoopOptions): Promise<LoopResult> {
  const { config, comm, backend: be, engine, loader, out } = o;
  const steps = config.steps;
  const startStep = o.startStep ?? 0;
  const ckptDir = o.checkpointDir ?? null;
  const checkpoints: string[] = [];
  let lastSaved = startStep;
  let stoppedAfter: number | null = null;
  let stopSignal = 0;
  const tokensPerStep = config.train_batch_size * config.data.seq_len;
  const printEvery = Math.max(1, config.steps_per_print);
  const nEval = evalBatchCount(loader.info.validationWindows, config.train_micro_batch_size_per_gpu, comm.worldSize, config.eval_batches);
  const losses: number[] = [];
  const stepSeconds: number[] = [];
  let valLoss: number | null = null;
  let lastEvalStep = -1;
  let last: StepResult | null = null;
  let windowSeconds = 0;
  let windowSteps = 0;
  let metricLines: string[] = [];
  const precision = config.bf16.enabled ? "bf16" : config.fp16.enabled ? (config.fp16.loss_scale > 0 ? `fp16 static loss_scale ${config.fp16.loss_scale}` : "fp16 dynamic loss scaling") : "fp32";
  const watch = new DivergenceWatch(config.max_bad_steps, config.fp16.enabled && config.fp16.loss_scale === 0, `this run: lr ${config.optimizer.params.lr}, ${precision}, gradient_clipping ${config.gradient_clipping}`);

  const evaluate = async (step: number): Promise<void> => {
    if (nEval < 1) return;
    const t0 = performance.now();
    valLoss = await engine.evalLoss(toEngineBatches(loader.validationBatches(nEval)));
    lastEvalStep = step;
    o.observer?.recordEval(step, valLoss);
    out.line(formatEvalLine(step, valLoss, nEval * comm.worldSize * config.train_micro_batch_size_per_gpu, (performance.now() - t0) / 1000));
  };

  const save = async (step: number): Promise<void> => {
    if (watch.holdCheckpoints) {
      out.line(`checkpoint not written at step ${step}: the loss is not finite (the last checkpoint stays the newest)`);
      return;
    }
    const r = await engine.saveCheckpoint(ckptDir!, `global_step${step}`, { dataPosition: loader.state() });
    checkpoints.push(r.tagDir);
    lastSaved = step;
    out.line(`checkpoint ${r.tagDir} | ${mib(r.fileBytes)} MiB written by rank ${comm.rank} | ${r.seconds.toFixed(1)} s`);
  };

  for (let step = startStep + 1; step <= steps; step++) {
    const micros = toEngineBatches(loader.nextStep());
    o.dump?.write(step, micros);
    o.observer?.beginStep(step);
    const t0 = performance.now();
    const r = await engine.trainBatch(micros);
    const dt = (performance.now() - t0) / 1000;
    if (step === startStep + 1) await o.onFirstStep?.();
    await o.observer?.endStep(step, dt);
    // the plugins' per-step metrics (a collective on every rank); their lines show at print time
    const metrics = await engine.afterStep();
    for (const m of metrics) for (const w of m.warnings ?? []) out.line(`warning: ${w}`);
    const lines = metrics.map((m) => m.line).filter((l): l is string => typeof l === "string" && l.length > 0);
    if (lines.length > 0) metricLines = lines;
    last = r;
    losses.push(r.loss);
    stepSeconds.push(dt);
    windowSeconds += dt;
    windowSteps++;
    out.progress(step, { loss: r.loss, lr: r.lr });
    const logged = step % printEvery === 0 || step === steps;
    const windowTokensPerSecond = windowSeconds > 0 ? (windowSteps * tokensPerStep) / windowSeconds : 0;
    if (logged) {
      const mem = be.memory();
      out.line(
        formatStepLine({
          step,
          totalSteps: steps,
          loss: r.loss,
          lr: r.lr,
          tokensPerSecond: windowSeconds > 0 ? (windowSteps * tokensPerStep) / windowSeconds : 0,
          lossScale: r.lossScale,
          gradNorm: r.gradNorm,
          skipped: r.skipped,
          memory: mem.current,
          paddingBytes: engine.paddingBytes(),
          peakTotal: mem.peakTotal,
        }),
      );
      for (const l of metricLines) out.line(`           ${l}`);
      windowSeconds = 0;
      windowSteps = 0;
    }
    // monitors every step; at a logged step the history entry and the breakdown (a collective)
    await o.observer?.afterStep(step, r, logged, windowTokensPerSecond);
    const warning = watch.observe(step, r);
    if (warning !== null) out.line(warning);
    if (config.eval_interval > 0 && step % config.eval_interval === 0 && !watch.holdCheckpoints) await evaluate(step);
    if (ckptDir !== null && config.checkpoint.save_interval > 0 && step % config.checkpoint.save_interval === 0) await save(step);
    // SIGINT/SIGTERM: all ranks agree after the same step, save there and stop (stop-signal.ts)
    const sig = o.stop && step < steps ? await stopRequested(comm, o.stop) : 0;
    if (sig !== 0) {
      stoppedAfter = step;
      stopSignal = sig;
      out.line(`stopping   ${signalName(sig)} received: stopping after step ${step}${ckptDir !== null ? " with a checkpoint" : ""}`);
      break;
    }
  }
  const end = stoppedAfter ?? steps;
  // a run may not end "successfully" on a non-finite loss, nor save one
  if (watch.holdCheckpoints) throw watch.error(end);
  if (ckptDir !== null && lastSaved < end) await save(end);
  // A run that evaluates at all ends with a validation loss of its final weights.
  if (stoppedAfter === null && config.eval_interval > 0 && lastEvalStep !== steps) await evaluate(steps);
  return { losses, stepSeconds, valLoss, last, checkpoints, stoppedAfter, stopSignal };
}
