/**
 * What a run shows about itself (issue 16), for one rank: the wall-clock breakdown
 * (`wall_clock_breakdown`, phase-timer.ts), the communication logger (`comms_logger`,
 * comms-logger.ts), the FLOPs profiler (`flops_profiler`, flops-profiler.ts), the monitors
 * (`csv_monitor`, `tensorboard`; rank 0 writes), and the summary's history per logged step.
 *
 * Use: `RunObserver.create(...)` before the engine (its `comm` and `be` are the observed ones the
 * engine and the loop must use), `attach(engine)` after `Engine.create`, then per step
 * `beginStep` → `engine.trainBatch` → `endStep` → … → `afterStep` (a collective when the
 * breakdown is printed: every rank calls it after every step), `recordEval` after evaluations,
 * and `finish()` at the end (prints the comms table) → `report()` for the summary.
 */
import type { Backend, MemTag } from "@zeromoe/kernels";
import { writeFileSync } from "node:fs";
import { COLLECTIVE_NAMES, type CollectiveName, type Communicator } from "../comm/communicator.ts";
import type { JobConfig } from "../config/types.ts";
import type { Engine, StepResult } from "../engine/engine.ts";
import type { Unit } from "../nn/unit.ts";
import { observeCommunicator } from "./comm-observer.ts";
import { CommsLogger, formatCommsSummary, type CommsRecord } from "./comms-logger.ts";
import { CsvMonitor, type MonitorEvent } from "./csv-monitor.ts";
import { buildProfile, FlopsCounter, formatProfile, measurePeakFlops, type FlopsProfile } from "./flops-profiler.ts";
import { observeBackend, type BackendObservers } from "./observed-backend.ts";
import { emptyPhases, PHASES, PhaseTimer, type Phase } from "./phase-timer.ts";
import { TensorBoardWriter } from "./tensorboard-writer.ts";

/** One entry of the summary's `history`: the figures at a logged step (every `steps_per_print`
 * steps and the last), window = the steps since the previous logged step. */
export interface HistoryEntry {
  step: number;
  loss: number;
  lr: number;
  grad_norm: number;
  loss_scale: number;
  /** Global training tokens per second over the window. */
  tokens_per_second: number;
  /** Latest validation loss evaluated at or before this step (null: none yet). */
  val_loss: number | null;
  /** Mean trainBatch wall time per step over the window, ms (rank 0). */
  step_ms: number;
  /** Rank 0's backend bytes per tag now. */
  memory: Record<string, number>;
  /** Collective time inside the window's training steps by op, ms (rank 0). */
  comm_ms: Record<string, number>;
  /** Σ comm_ms / Σ step time of the window (rank 0). */
  comm_share: number;
  /** Mean exclusive time per step by phase over the window, ms (rank 0); null without wall_clock_breakdown. */
  phases_ms: Record<Phase, number> | null;
  /** Routing choices per [MoE layer][expert] during the window, summed over the data-parallel group; null for dense models. */
  expert_counts: number[][] | null;
}

/** What one rank reports at the end (RankReport.observe). */
export interface ObserveReport {
  history: HistoryEntry[];
  /** The learning rate of every step of this run (rank 0), in step order: the history holds it at
   * logged steps only, where a warm-up is invisible. */
  lrs: number[];
  evals: { step: number; val_loss: number }[];
  /** This rank's run totals by phase, ms (null without wall_clock_breakdown). */
  wallClock: { step_ms: number; phases_ms: Record<Phase, number> } | null;
  /** This rank's comms_logger table (null when disabled). */
  comms: CommsRecord[] | null;
  /** This rank's FLOPs profile (null when disabled or the step was not reached). */
  flops: FlopsProfile | null;
  /** Files the monitors wrote (rank 0; empty elsewhere). */
  monitorFiles: string[];
}

/** Options of {@link RunObserver.create}. */
export interface ObserverOptions {
  config: JobConfig;
  comm: Communicator;
  be: Backend;
  /** Rank 0's log (a no-op elsewhere). */
  line: (message: string) => void;
  /** Warnings (printed once each by rank 0). */
  warn?: (message: string) => void;
}

function zeroOps(): Record<CollectiveName, number> {
  const t = {} as Record<CollectiveName, number>;
  for (const n of COLLECTIVE_NAMES) t[n] = 0;
  return t;
}

/** The per-rank observer (module comment). */
export class RunObserver {
  readonly comm: Communicator;
  readonly be: Backend;
  private readonly raw: { comm: Communicator; be: Backend };
  private readonly cfg: JobConfig;
  private readonly line: (m: string) => void;
  private readonly timer: PhaseTimer | null;
  private readonly logger: CommsLogger | null;
  private readonly obs: BackendObservers;
  private readonly csv: CsvMonitor | null;
  private readonly tb: TensorBoardWriter | null;
  private counter: FlopsCounter | null = null;
  private profile: FlopsProfile | null = null;
  private engine: Engine | null = null;
  private inStep = false;
  private stepComm = zeroOps();
  private win = { steps: 0, ms: 0, comm: zeroOps(), phases: emptyPhases() };
  private total = { ms: 0, phases: emptyPhases() };
  private lastStepPhases = emptyPhases();
  private prevCounts: number[][] | null = null;
  /** The moe section's run totals at the previous step (per-step monitor figures). */
  private prevStepCounts: number[][] | null = null;
  private readonly lrs: number[] = [];
  private valLoss: number | null = null;
  private readonly history: HistoryEntry[] = [];
  private readonly evals: { step: number; val_loss: number }[] = [];

  private constructor(o: ObserverOptions) {
    this.cfg = o.config;
    this.line = o.line;
    this.raw = { comm: o.comm, be: o.be };
    this.timer = o.config.wall_clock_breakdown ? new PhaseTimer() : null;
    const cl = o.config.comms_logger;
    this.logger = cl.enabled ? new CommsLogger(cl, o.line) : null;
    this.obs = { timer: this.timer, flops: null };
    this.be = observeBackend(o.be, this.obs);
    this.comm = observeCommunicator(o.comm, {
      logger: this.logger,
      timer: this.timer,
      onOp: (op, ms) => {
        if (this.inStep) this.stepComm[op] += ms;
      },
    });
    const rank0 = o.comm.rank === 0;
    this.csv = rank0 && o.config.csv_monitor.enabled ? new CsvMonitor(o.config.csv_monitor) : null;
    this.tb = rank0 && o.config.tensorboard.enabled ? new TensorBoardWriter(o.config.tensorboard) : null;
    if (this.csv) o.line(`csv_monitor ${this.csv.dir}`);
    if (this.tb) o.line(`tensorboard ${this.tb.file}`);
  }

  /** Observe this rank's communicator and backend (see the module comment).
   * @throws Error naming the folder when a monitor cannot write it. */
  static create(o: ObserverOptions): RunObserver {
    return new RunObserver(o);
  }

  /** Time a phase (the engine calls it around forward, backward, reduce, optimizer step). */
  time<T>(phase: Phase, fn: () => T): T {
    const c = this.counter;
    if (c && phase === "forward") {
      c.inForward = true;
      const r = this.timer ? this.timer.time(phase, fn) : fn();
      if (r instanceof Promise) return r.finally(() => (c.inForward = false)) as T;
      c.inForward = false;
      return r;
    }
    return this.timer ? this.timer.time(phase, fn) : fn();
  }

  /** Install the timing points into the engine: its phases, the unit hooks (gathers, gradient
   * reduction, module boundaries for the FLOPs profiler) and the MoE dispatcher. */
  attach(engine: Engine): void {
    this.engine = engine;
    engine.phaseObserver = this;
    const units = engine.model.units;
    const h = units.hooks;
    const after = <R>(r: R, f: () => void): R => {
      if (r instanceof Promise) return r.then(f) as R;
      f();
      return r;
    };
    units.hooks = {
      gather: (u: Unit, ph) => after(this.time("gather", () => h.gather(u, ph)), () => ph === "fwd" && this.counter?.enter(u.name)),
      release: (u: Unit, ph) => {
        if (ph === "fwd") this.counter?.leave(u.name);
        return this.time("gather", () => h.release(u, ph));
      },
      gradReady: (u: Unit) => this.time("reduce", () => h.gradReady(u)),
    };
    const moe = engine.model.moe;
    if (moe) {
      const d = moe.dispatcher;
      moe.dispatcher = new Proxy(d, {
        get: (t, p) => {
          if (p === "dispatch") return (req: Parameters<typeof d.dispatch>[0]) => this.time("a2a_dispatch", () => t.dispatch(req));
          if (p === "combine") return (x: Parameters<typeof d.combine>[0], y: Parameters<typeof d.combine>[1]) => this.time("a2a_combine", () => t.combine(x, y));
          const v = Reflect.get(t, p, t);
          return typeof v === "function" ? v.bind(t) : v;
        },
      });
    }
  }

  /** Before `trainBatch` of `step`. */
  beginStep(step: number): void {
    this.stepComm = zeroOps();
    this.inStep = true;
    const fp = this.cfg.flops_profiler;
    if (fp.enabled && step === fp.profile_step) {
      this.counter = new FlopsCounter();
      this.obs.flops = this.counter;
    }
    this.timer?.begin();
  }

  /** Right after `trainBatch` of `step`, which took `seconds`. */
  async endStep(step: number, seconds: number): Promise<void> {
    const t = this.timer?.end();
    this.inStep = false;
    const ms = seconds * 1000;
    this.win.steps++;
    this.win.ms += ms;
    this.total.ms += ms;
    for (const op of COLLECTIVE_NAMES) this.win.comm[op] += this.stepComm[op];
    if (t) {
      this.lastStepPhases = t.phases;
      for (const p of PHASES) {
        this.win.phases[p] += t.phases[p];
        this.total.phases[p] += t.phases[p];
      }
    }
    if (this.counter) {
      const c = this.counter;
      this.counter = null;
      this.obs.flops = null;
      const peak = await measurePeakFlops(this.raw.be);
      const units = (this.engine?.model.units.units ?? []).map((u) => ({ name: u.name, numel: u.numel }));
      this.profile = buildProfile(step, units, c, seconds, peak);
      if (this.raw.comm.rank === 0) {
        const text = formatProfile(this.profile, this.cfg.flops_profiler, { worldSize: this.raw.comm.worldSize, rank: 0, backend: this.raw.be.info.adapter });
        const file = this.cfg.flops_profiler.output_file;
        if (file !== null) {
          writeFileSync(file, text.join("\n") + "\n");
          this.line(`flops_profiler report of step ${step} written to ${file}`);
        } else for (const l of text) this.line(l);
      }
    }
  }

  /**
   * After the step's metrics (every rank, every step): monitor events, and at a logged step the
   * history entry and — with wall_clock_breakdown — the per-rank breakdown lines (an all_gather).
   */
  async afterStep(step: number, r: StepResult, logged: boolean, tokensPerSecond: number): Promise<void> {
    const samples = step * this.cfg.train_batch_size;
    const events: MonitorEvent[] = [
      ["Train/Samples/train_loss", r.loss, samples],
      ["Train/Samples/lr", r.lr, samples],
      ["Train/Samples/grad_norm", r.gradNorm, samples],
    ];
    if (this.cfg.fp16.enabled) events.push(["Train/Samples/loss_scale", r.lossScale, samples]);
    this.lrs.push(r.lr);
    events.push(...this.moeEvents(samples));
    if (!logged) {
      this.write(events);
      return;
    }
    const w = this.win;
    const n = Math.max(1, w.steps);
    let phases: Record<Phase, number> | null = null;
    if (this.timer) {
      phases = emptyPhases();
      for (const p of PHASES) phases[p] = w.phases[p] / n;
      await this.printBreakdown(step, w.ms / n, phases);
      for (const p of PHASES) events.push([`Train/Samples/elapsed_time_ms_${p}`, phases[p], samples]);
      events.push(["Train/Samples/elapsed_time_ms_backward_allreduce", phases.reduce, samples]);
      events.push(["Train/Samples/elapsed_time_ms_step", phases.optimizer, samples]);
    }
    events.push(["Train/Samples/tokens_per_second", tokensPerSecond, samples]);
    const commMs: Record<string, number> = {};
    let commSum = 0;
    for (const op of COLLECTIVE_NAMES) {
      if (w.comm[op] > 0) commMs[op] = w.comm[op];
      commSum += w.comm[op];
    }
    events.push(["Train/Samples/comm_share", w.ms > 0 ? commSum / w.ms : 0, samples]);
    this.write(events);
    const mem = this.raw.be.memory().current as Record<MemTag, number>;
    this.history.push({
      step,
      loss: r.loss,
      lr: r.lr,
      grad_norm: r.gradNorm,
      loss_scale: r.lossScale,
      tokens_per_second: tokensPerSecond,
      val_loss: this.valLoss,
      step_ms: w.ms / n,
      memory: { ...mem },
      comm_ms: commMs,
      comm_share: w.ms > 0 ? commSum / w.ms : 0,
      phases_ms: phases,
      expert_counts: this.expertCountsDelta(),
    });
    this.win = { steps: 0, ms: 0, comm: zeroOps(), phases: emptyPhases() };
  }

  /**
   * The step's MoE figures for the monitors (none for a dense model): the load-balancing loss
   * (`Train/Samples/moe_aux_loss`, before its coefficient), and per MoE layer l the coefficient of
   * variation of the step's expert counts (`moe_layer_<l>_load_cv`), the busiest expert's share of
   * the layer's routing choices (`moe_layer_<l>_max_share`, 1/E when balanced) and the experts
   * that got no token (`moe_layer_<l>_dead_experts`). Counts are the moe section's run totals minus
   * those at the previous step (summed over the data-parallel group).
   */
  private moeEvents(samples: number): MonitorEvent[] {
    const moe = this.engine?.summarySections().moe as { expert_counts?: number[][]; aux_loss?: number | null } | undefined;
    const now = moe?.expert_counts;
    if (!Array.isArray(now)) return [];
    const prev = this.prevStepCounts;
    this.prevStepCounts = now.map((row) => [...row]);
    const out: MonitorEvent[] = [];
    if (typeof moe!.aux_loss === "number") out.push(["Train/Samples/moe_aux_loss", moe!.aux_loss, samples]);
    now.forEach((row, l) => {
      if (row.length === 0) return; // a dense layer of a sparse family
      const c = row.map((v, e) => v - (prev?.[l]?.[e] ?? 0));
      const total = c.reduce((a, b) => a + b, 0);
      if (total <= 0) return;
      const mean = total / c.length;
      const sd = Math.sqrt(c.reduce((a, v) => a + (v - mean) ** 2, 0) / c.length);
      out.push([`Train/Samples/moe_layer_${l}_load_cv`, sd / mean, samples]);
      out.push([`Train/Samples/moe_layer_${l}_max_share`, Math.max(...c) / total, samples]);
      out.push([`Train/Samples/moe_layer_${l}_dead_experts`, c.filter((v) => v === 0).length, samples]);
    });
    return out;
  }

  /** The window's expert counts: the moe section's run totals minus those at the last logged step. */
  private expertCountsDelta(): number[][] | null {
    const moe = this.engine?.summarySections().moe as { expert_counts?: number[][] } | undefined;
    const now = moe?.expert_counts;
    if (!Array.isArray(now)) return null;
    const prev = this.prevCounts;
    this.prevCounts = now.map((row) => [...row]);
    return now.map((row, l) => row.map((v, e) => v - (prev?.[l]?.[e] ?? 0)));
  }

  /** Every rank's mean phase times (all_gather), printed by rank 0. */
  private async printBreakdown(step: number, stepMs: number, phases: Record<Phase, number>): Promise<void> {
    const k = PHASES.length + 1;
    const mine = new Float64Array(k);
    mine[0] = stepMs;
    PHASES.forEach((p, i) => (mine[i + 1] = phases[p]));
    const all = this.raw.comm.worldSize > 1 ? await this.comm.allGather(mine) : mine;
    for (let r = 0; r < this.raw.comm.worldSize; r++) {
      const row = all.subarray(r * k, (r + 1) * k);
      const total = row[0]!;
      const parts = PHASES.map((p, i) => `${p} ${row[i + 1]!.toFixed(1)} (${total > 0 ? ((100 * row[i + 1]!) / total).toFixed(1) : "0.0"}%)`);
      this.line(`time rank ${r} step ${step} | step ${total.toFixed(1)} ms | ${parts.join(" | ")}`);
    }
  }

  /** After an evaluation at `step`. */
  recordEval(step: number, valLoss: number): void {
    this.valLoss = valLoss;
    this.evals.push({ step, val_loss: valLoss });
    const last = this.history[this.history.length - 1];
    if (last && last.step === step) last.val_loss = valLoss;
    this.write([["Eval/Samples/val_loss", valLoss, step * this.cfg.train_batch_size]]);
  }

  private write(events: readonly MonitorEvent[]): void {
    this.csv?.write(events);
    this.tb?.write(events);
  }

  /** End of the run: the comms table (rank 0 prints its own). */
  finish(): void {
    if (this.logger && this.raw.comm.rank === 0) for (const l of formatCommsSummary(this.logger.records(), 0)) this.line(l);
  }

  /** This rank's figures for the summary. */
  report(): ObserveReport {
    const files: string[] = [];
    if (this.tb) files.push(this.tb.file);
    if (this.csv) files.push(...this.csv.files());
    return {
      history: this.history,
      lrs: this.lrs,
      evals: this.evals,
      wallClock: this.timer ? { step_ms: this.total.ms, phases_ms: { ...this.total.phases } } : null,
      comms: this.logger ? this.logger.records() : null,
      flops: this.profile,
      monitorFiles: files,
    };
  }

  /** The last step's exclusive phase times, ms (tests). */
  get lastPhases(): Readonly<Record<Phase, number>> {
    return this.lastStepPhases;
  }
}
