/**
 * The training engine of one rank: `Engine.create(...)` ≈ `deepspeed.initialize`, then
 * `trainBatch(microBatches)` runs one optimizer step (forward + backward per micro-batch, reduce,
 * clip, AdamW on owned shards) exactly as docs/architecture.md "One training step" describes.
 *
 * Set-up order: groups → model (born without parameter buffers) → plugins composed on the six hooks
 * (each `setup` gets a SetupContext, plugin-context.ts) → plugins' manifest entries restored from
 * the checkpoint being resumed (`restore`) → model transforms → partition hook plans every unit →
 * each rank allocates and initialises only what its plan says it holds (construction-time
 * partitioning under ZeRO-3) → unit hooks wired to gather/reduce → route hook's router and
 * dispatcher installed into the model's MoE layers.
 *
 * The engine is Stateful (stateful.ts): `stateDict()` / `loadStateDict()` carry its scalars, unit
 * handles its per-unit states, so the checkpoint code never touches its fields.
 */
import type { Backend } from "@zeromoe/kernels";
import { save16bitModel, type Save16Options } from "../checkpoint/export16.ts";
import { loadCheckpoint, type LoadCheckpointOptions, type LoadCheckpointResult } from "../checkpoint/load.ts";
import { saveCheckpoint, type SaveCheckpointOptions, type SaveCheckpointResult } from "../checkpoint/save.ts";
import type { Communicator } from "../comm/communicator.ts";
import { createParallelGroups } from "../comm/groups.ts";
import type { JobConfig } from "../config/types.ts";
import { composePlugins } from "../hooks/plugin.ts";
import type { CausalDecoder } from "../models/llama.ts";
import { initUnit } from "../nn/init.ts";
import type { Unit } from "../nn/unit.ts";
import { createLossScaler, type LossScaler } from "../optim/loss-scaler.ts";
import { createScheduler, type LRScheduler } from "../optim/schedulers.ts";
import { backward, fromArray, noGrad } from "../tensor/index.ts";
import { defaultHooks } from "./defaults.ts";
import type { EngineHooks, EnginePlugin } from "./hooks.ts";
import { applyFreeze } from "./freeze.ts";
import { GradReducedEvents } from "./grad-reduced.ts";
import { initUnitRange } from "../nn/init.ts";
import { createModel } from "./model-factory.ts";
import { initMaster, optimizerStep, outcomeFromSumSquares, type StepOutcome } from "./optimizer.ts";
import type { HookContext, JobView, ManifestContribution, MetricsRegistry, SetupContext, StepMetrics, UnitHandle, UnitInfo, UnitRelocation } from "./plugin-context.ts";
import type { CheckpointTarget, EngineStateDict } from "./stateful.ts";
import { UnitState } from "./unit-state.ts";

/** One micro-batch of token ids, [batch, seq] row-major. Labels follow Hugging Face: the model
 * scores position t against labels[t + 1]; −100 is ignored. */
export interface TrainMicroBatch {
  inputIds: Int32Array;
  labels: Int32Array;
  batch: number;
  seq: number;
  /** Packed rows: per-token segment ids [batch, seq] (models/llama.ts CausalLMInput.segmentIds):
   * positions restart and attention stays inside each segment. Absent: one sequence per row. */
  segmentIds?: Int32Array;
}

/** Labels of a micro-batch that the loss scores: labels[b, t + 1] ≠ −100 for t < seq − 1 (the
 * model's shift, models/llama.ts shiftLabels). */
export function scoredLabels(mb: TrainMicroBatch): number {
  let n = 0;
  for (let b = 0; b < mb.batch; b++) for (let t = 1; t < mb.seq; t++) if (mb.labels[b * mb.seq + t] !== -100) n++;
  return n;
}

/**
 * Weights of the micro-batches' mean cross-entropy so that one optimizer step's gradient is that of
 * Σ(token losses) / N over the whole global batch (N = scored labels of every micro-batch of every
 * rank), as Transformers' Trainer computes it since its 2024 gradient-accumulation fix
 * (`num_items_in_batch`). The engine sums micro-batch gradients and divides by accum·world
 * (gradDivisor), so micro-batch i gets w_i = n_i·accum·world / N: Σ_i w_i·mean_i / (accum·world)
 * = Σ_i n_i·mean_i / N. Where every micro-batch scores the same number of labels (plain text: each
 * row scores seq − 1) every w_i is exactly 1 (integers below 2^53), so those jobs are unchanged bit
 * for bit. N = 0 (nothing scored anywhere) gives weights 0.
 * @param counts scored labels of this rank's micro-batches; `globalCount` N.
 */
export function tokenLossWeights(counts: readonly number[], globalCount: number, worldSize: number): number[] {
  const k = counts.length * worldSize;
  return counts.map((n) => (globalCount > 0 ? (n * k) / globalCount : 0));
}

/** Result of one `trainBatch`. */
export interface StepResult {
  /** Mean training loss over all micro-batches of all ranks (includes the MoE aux term). */
  loss: number;
  /** Learning rate used by this step. */
  lr: number;
  /** Loss scale used by this step (1 without fp16). */
  lossScale: number;
  /** Global gradient norm (averaged, unscaled gradients); inf on overflow. */
  gradNorm: number;
  /** Step skipped because of inf/NaN gradients. */
  skipped: boolean;
}

/** Options of {@link Engine.create}. */
export interface EngineOptions {
  config: JobConfig;
  comm: Communicator;
  backend: Backend;
  /** Plugins to compose (see core/src/engine/plugin-loader.ts for selection from the config). */
  plugins?: readonly EnginePlugin[];
  /** Log sink (default: console.log on rank 0 only). */
  log?: (message: string) => void;
  /** The `plugins` entries of the manifest of a checkpoint being resumed: each plugin's
   * `ctx.checkpoint.contribute(key, {restore})` gets its entry before partitioning. */
  restore?: Readonly<Record<string, unknown>> | null;
  /** Start-up timing: awaited at the end of each phase of `create` with its name ("model build",
   * "plugin set-up", "parameters + states", "master weights"); the trainer waits for the device
   * there and records the phase (train/startup-phases.ts). */
  startupPhase?: (name: string) => void | Promise<void>;
}

/** What plugins registered through their SetupContext. */
interface PluginRegistrations {
  afterStep: (() => StepMetrics | void | Promise<StepMetrics | void>)[];
  summary: Map<string, { plugin: string; fn: () => unknown }>;
  manifest: Map<string, { plugin: string; c: ManifestContribution }>;
  transforms: ((model: CausalDecoder) => void)[];
}

export class Engine implements CheckpointTarget {
  /** The hook context of this rank (job facts, live step position, unit handles): what every hook
   * call receives. */
  readonly env: HookContext;
  readonly hooks: EngineHooks;
  /** Owner of each hook ("core" or a plugin name). */
  readonly hookOwners: Record<string, string>;
  readonly model: CausalDecoder;
  /** The states of the units this rank holds, in model order (engine-internal; plugins see them as
   * UnitHandles). */
  readonly states: readonly UnitState[];
  readonly scheduler: LRScheduler;
  readonly scaler: LossScaler;
  /** Applied (non-skipped) optimizer steps so far. */
  appliedSteps = 0;
  /** All optimizer steps attempted so far (skipped ones included). */
  globalSteps = 0;
  /** Timing points of `trainBatch` (core/src/observe/observer.ts: wall_clock_breakdown, FLOPs
   * profiler); null: none. Phases: forward, backward, reduce, optimizer, gather. */
  phaseObserver: { time<T>(phase: "forward" | "backward" | "reduce" | "optimizer" | "gather", fn: () => T): T } | null = null;
  private readonly phase: { training: boolean; backward: boolean; step: number };
  private readonly micro: { index: number; count: number };
  private readonly byUnit: ReadonlyMap<Unit, UnitState>;
  private readonly reg: PluginRegistrations;
  private readonly reduced: GradReducedEvents;

  private constructor(
    ctx: HookContext,
    model: CausalDecoder,
    hooks: EngineHooks,
    owners: Record<string, string>,
    states: UnitState[],
    byUnit: Map<Unit, UnitState>,
    live: { phase: { training: boolean; backward: boolean; step: number }; micro: { index: number; count: number }; reduced: GradReducedEvents },
    reg: PluginRegistrations,
  ) {
    this.env = ctx;
    this.hooks = hooks;
    this.hookOwners = owners;
    this.model = model;
    this.states = states;
    this.byUnit = byUnit; // shared with create's relocation (units moved between steps)
    this.phase = live.phase;
    this.micro = live.micro;
    this.reduced = live.reduced;
    this.reg = reg;
    const cfg = ctx.config;
    this.scheduler = createScheduler(cfg.scheduler, cfg.optimizer.params.lr);
    this.scaler = createLossScaler(cfg.fp16);
  }

  /** Job facts, collectives, backend and log of this rank (CheckpointTarget). */
  get job(): JobView {
    return this.env;
  }

  /** Every unit of the model in model order, held on this rank or not. */
  get modelUnits(): readonly Unit[] {
    return this.model.units.units;
  }

  /** Build the engine of this rank. Every rank must call it (plugins may run collectives).
   * @throws on config/plugin conflicts and device allocation failures. */
  static async create(opts: EngineOptions): Promise<Engine> {
    const { config, comm, backend: be } = opts;
    const paramDtype = config.bf16.enabled ? "bf16" : config.fp16.enabled ? "f16" : "f32";
    const epSize = config.moe?.ep_size ?? 1;
    const etpSize = config.moe?.etp_size ?? 1;
    const groups = createParallelGroups(comm, epSize, etpSize);
    // expert tensor parallelism: this rank holds slice (its etp index) of each of its experts
    const expertSlice = etpSize > 1 ? { index: groups.etp.rank, count: etpSize } : null;
    const model = createModel(be, config.model, { dtype: paramDtype, seed: config.seed, allocate: false, expertSlice });
    model.lmZLossCoef = config.lm_z_loss_coef;
    await opts.startupPhase?.("model build");
    const micro = { index: 0, count: config.gradient_accumulation_steps };
    const log = opts.log ?? ((m: string) => { if (comm.rank === 0) console.log(m); });
    const phase = { training: true, backward: false, step: 0 };
    const byName = new Map<string, UnitState>();
    const held: UnitState[] = [];
    const lookup = (u: UnitInfo | string): UnitState | undefined => byName.get(typeof u === "string" ? u : u.name);
    const reduced = new GradReducedEvents();
    const ctx: HookContext = {
      config, rank: comm.rank, worldSize: comm.worldSize, groups, comm, be, paramDtype, phase, micro,
      log,
      warn: (m) => log(`warning: ${m}`),
      get isLastMicro() {
        return micro.index === micro.count - 1;
      },
      unit(u) {
        const h = lookup(u);
        if (!h) throw new Error(`engine: rank ${comm.rank} holds no unit ${typeof u === "string" ? u : u.name}`);
        return h;
      },
      holds: (u) => lookup(u) !== undefined,
      units: () => held,
      gradReduced: (u) => reduced.announce(u),
    };
    const reg: PluginRegistrations = { afterStep: [], summary: new Map(), manifest: new Map(), transforms: [] };
    const modelUnits: readonly UnitInfo[] = model.units.units;
    const byUnit = new Map<Unit, UnitState>();
    const mixed = paramDtype !== "f32";
    let built = false;
    // hooks is set once the plugins are composed; relocation is usable only after create
    let hooksRef: EngineHooks | null = null;
    const relocation: UnitRelocation = {
      adopt(info) {
        if (!built || !hooksRef) throw new Error(`engine: units can be relocated only between steps, once the engine is built`);
        const unit = model.units.units.find((u) => u.name === info.name);
        if (!unit) throw new Error(`engine.relocation.adopt: the model has no unit ${info.name}`);
        if (byName.has(unit.name)) throw new Error(`engine.relocation.adopt: rank ${comm.rank} already holds unit ${unit.name}`);
        const plan = hooksRef.partition.plan(unit, ctx);
        if (!plan) throw new Error(`engine.relocation.adopt: the partition hook does not place unit ${unit.name} on rank ${comm.rank}`);
        const st = new UnitState(unit, plan);
        st.optimizerDevice = unit.trainable ? hooksRef.offload.optimizerDevice(st, ctx) : "device";
        if (st.optimizerDevice !== "device" || (plan.params === "sharded" && (hooksRef.offload.paramDevice?.(st, ctx) ?? "device") !== "device")) {
          throw new Error(`engine.relocation.adopt: unit ${unit.name}'s states would be offloaded; relocation moves device states only`);
        }
        if (plan.params === "sharded") st.paramShard = be.alloc(unit.dtype, plan.shardSize, "param");
        else unit.data = be.alloc(unit.dtype, Math.max(1, unit.numel), "param");
        st.allocate(be, mixed);
        const whole = st.gradAcc ?? (st.gradShard && plan.shardStart === 0 && plan.shardSize >= unit.numel ? st.gradShard : null);
        if (unit.dtype !== "f32" && !unit.workingCopy && whole && hooksRef.reduce.accumulatesLocally?.(st, ctx)) unit.gradInto = whole;
        const order = new Map(model.units.units.map((u, i) => [u, i]));
        const at = held.findIndex((h) => order.get(h.unit)! > order.get(unit)!);
        held.splice(at < 0 ? held.length : at, 0, st);
        byName.set(unit.name, st);
        byUnit.set(unit, st);
        return st;
      },
      release(info) {
        const st = byName.get(info.name);
        if (!st) throw new Error(`engine.relocation.release: rank ${comm.rank} holds no unit ${info.name}`);
        st.destroy(be);
        if (st.unit.data) be.free(st.unit.data);
        st.unit.data = null;
        held.splice(held.indexOf(st), 1);
        byName.delete(info.name);
        byUnit.delete(st.unit);
      },
      async commit() {
        if (!hooksRef) return;
        await hooksRef.gather.unitsChanged?.(ctx);
      },
    };
    const setupContext = (p: EnginePlugin): SetupContext => {
      const metrics: MetricsRegistry = {
        afterStep: (fn) => void reg.afterStep.push(fn),
        summary: (section, fn) => {
          const prev = reg.summary.get(section);
          if (prev) throw new Error(`plugins "${prev.plugin}" and "${p.name}" both contribute the summary section "${section}"`);
          reg.summary.set(section, { plugin: p.name, fn });
        },
      };
      const checkpoint = {
        contribute: (key: string, c: ManifestContribution) => {
          const prev = reg.manifest.get(key);
          if (prev) throw new Error(`plugins "${prev.plugin}" and "${p.name}" both contribute the checkpoint manifest entry "${key}"`);
          reg.manifest.set(key, { plugin: p.name, c });
        },
      };
      // inherits the hook context's (live) job facts; adds this plugin's verbs
      return Object.defineProperties(Object.create(ctx) as SetupContext, {
        pluginName: { value: p.name },
        modelUnits: { value: modelUnits },
        metrics: { value: metrics },
        checkpoint: { value: checkpoint },
        transformModel: { value: (fn: (m: CausalDecoder) => void) => void reg.transforms.push(fn) },
        relocation: { value: relocation },
      });
    };
    const composed = await composePlugins<EngineHooks & Record<string, unknown>, SetupContext>(
      defaultHooks() as EngineHooks & Record<string, unknown>,
      (opts.plugins ?? []) as readonly EnginePlugin[],
      setupContext,
    );
    const hooks = composed.hooks as EngineHooks;
    hooksRef = hooks;
    if (hooks.offload.gradReduced) reduced.connect((u) => hooks.offload.gradReduced!(u, ctx));
    if (opts.restore) {
      for (const [key, { c }] of reg.manifest) if (Object.hasOwn(opts.restore, key) && c.restore) c.restore(opts.restore[key]);
    }
    for (const t of reg.transforms) t(model);
    // the job's `freeze` patterns: frozen units get no gradient and no optimizer state (freeze.ts)
    const frozen = applyFreeze(model.units.units, config.freeze ?? []);
    if (frozen.units.length > 0) {
      const total = model.units.numel;
      log(`freeze: ${frozen.units.length} unit${frozen.units.length === 1 ? "" : "s"} frozen (${frozen.elements} of ${total} parameters, ${((100 * frozen.elements) / total).toFixed(1)}%): ${frozen.units.join(", ")}`);
    }
    await opts.startupPhase?.("plugin set-up");
    for (const unit of model.units.units) {
      const plan = hooks.partition.plan(unit, ctx);
      if (!plan) continue; // held by another rank (expert parallelism)
      const st = new UnitState(unit, plan);
      st.optimizerDevice = unit.trainable ? hooks.offload.optimizerDevice(st, ctx) : "device"; // frozen: no states to place
      if (plan.params === "sharded") {
        st.paramShard = be.alloc(unit.dtype, plan.shardSize, "param");
        initUnitRange(be, unit, config.seed, plan.shardStart, plan.owned, st.paramShard);
      } else {
        unit.data = be.alloc(unit.dtype, Math.max(1, unit.numel), "param");
        initUnit(unit, config.seed);
      }
      st.allocate(be, mixed);
      if (st.optimizerDevice !== "device") {
        if (!hooks.offload.createHostState || !hooks.offload.step) throw new Error(`the offload hook (owner ${composed.owners.offload}) places unit ${unit.name}'s optimizer states on "${st.optimizerDevice}" but implements no createHostState/step`);
        st.host = hooks.offload.createHostState(st, ctx);
      }
      if (plan.params === "sharded") st.paramDevice = hooks.offload.paramDevice?.(st, ctx) ?? "device";
      // a 16-bit unit without a working copy adds its gradients straight into the accumulator
      // when the reduce hook would only add its micro-batch gradient there (hooks.ts)
      // (the whole-unit accumulator, or a shard that is the whole unit: a group of one rank)
      const whole = st.gradAcc ?? (st.gradShard && plan.shardStart === 0 && plan.shardSize >= unit.numel ? st.gradShard : null);
      if (unit.dtype !== "f32" && !unit.workingCopy && whole && hooks.reduce.accumulatesLocally?.(st, ctx)) unit.gradInto = whole;
      byName.set(unit.name, st);
      held.push(st);
      // parameter offload: the initialised shard moves to the host at once (its master first), so
      // the device never holds more than one unit's shard beside the gradients (a budget that fits
      // the gradients and one unit fits the set-up too)
      if (st.paramDevice !== "device") {
        if (!hooks.offload.createHostParams) throw new Error(`the offload hook (owner ${composed.owners.offload}) places unit ${st.name}'s parameters on "${st.paramDevice}" but implements no createHostParams`);
        await initMaster(be, st);
        st.paramHost = hooks.offload.createHostParams(st, ctx);
        await st.evictParams(true);
      }
    }
    await opts.startupPhase?.("parameters + states");
    for (const st of held) if (st.paramDevice === "device") await initMaster(be, st);
    await opts.startupPhase?.("master weights");
    for (const st of held) byUnit.set(st.unit, st);
    const of = (u: Unit): UnitState => {
      const s = byUnit.get(u);
      if (!s) throw new Error(`engine: no state for unit ${u.name} (not partitioned on rank ${comm.rank})`);
      return s;
    };
    model.units.hooks = {
      gather: (u, ph) => hooks.gather.gather(of(u), ph, ctx),
      release: (u, ph) => hooks.gather.release(of(u), ph, ctx),
      gradReady: (u) => hooks.reduce.gradReady(of(u), ctx),
    };
    const dispatcher = hooks.route.dispatcher(ctx);
    const router = hooks.route.router?.(ctx) ?? null;
    if (dispatcher || router) {
      if (!model.moe) throw new Error(`the route hook (owner ${composed.owners.route}) needs a model with MoE layers (model.model_type "${config.model.model_type}" has none)`);
      if (dispatcher) model.moe.dispatcher = dispatcher;
      if (router) model.moe.router = router;
    }
    built = true;
    return new Engine(ctx, model, hooks, composed.owners, held, byUnit, { phase, micro, reduced }, reg);
  }

  /**
   * One optimizer step over `micros` (this rank's gradient_accumulation_steps micro-batches).
   * @throws if the number of micro-batches differs from gradient_accumulation_steps.
   */
  async trainBatch(micros: readonly TrainMicroBatch[]): Promise<StepResult> {
    const env = this.env;
    const be = env.be;
    const phase = this.phase;
    const accum = env.config.gradient_accumulation_steps;
    if (micros.length !== accum) throw new Error(`trainBatch: got ${micros.length} micro-batches, gradient_accumulation_steps is ${accum}`);
    const lossScale = this.scaler.lossScale;
    let lossSum = 0;
    phase.training = true;
    phase.step = this.globalSteps;
    // each micro-batch's loss is copied on the device and all are read once, at the end of the
    // step: no device→host sync between a forward and its backward, nor before the optimizer. The
    // 3 elements after the losses take the optimizer's [scale, skip, Σ] when its clip scale stays
    // on the device (optimizer.ts deviceScale), so then the step's only host read is this one.
    const nm = micros.length;
    // the loss is normalised by the scored labels of the whole global batch (tokenLossWeights)
    const counts = micros.map(scoredLabels);
    const total = new Float64Array([counts.reduce((a, b) => a + b, 0)]);
    if (env.comm.worldSize > 1) await env.comm.allReduce(total);
    const ceWeights = tokenLossWeights(counts, total[0]!, env.comm.worldSize);
    const stepScalars = be.alloc("f32", nm + 3, "other");
    this.reduced.reset();
    let out: StepOutcome;
    let lr: number;
    try {
      for (let i = 0; i < micros.length; i++) {
        this.micro.index = i;
        const mb = micros[i]!;
        const out = await this.timed("forward", () => this.model.forward({ inputIds: mb.inputIds, labels: mb.labels, batch: mb.batch, seq: mb.seq, ceWeight: ceWeights[i]!, ...(mb.segmentIds ? { segmentIds: mb.segmentIds } : {}) }));
        const loss = out.loss!;
        be.copy(loss.view, { buf: stepScalars, off: i }, 1);
        const seed = lossScale !== 1 ? fromArray(be, new Float32Array([lossScale]), [1], "f32") : undefined;
        phase.backward = true;
        try {
          await this.timed("backward", () => backward(loss, seed ? { grad: seed } : {}));
        } finally {
          phase.backward = false;
        }
        seed?.dispose();
      }
      this.micro.index = accum - 1;
      await this.timed("reduce", () => this.hooks.reduce.finish(env));
      this.reduced.completeStep(this.states); // units no reduce hook announced (grad-reduced.ts)
      lr = this.scheduler.getLr();
      const gradDivisor = accum * env.comm.worldSize;
      out = await this.timed("optimizer", () => optimizerStep(env, this.states, {
        lr,
        step: this.appliedSteps + 1,
        lossScale,
        maxNorm: env.config.gradient_clipping,
        gradDivisor,
        betas: this.scheduler.getBetas?.() ?? null,
        offloadStep: this.hooks.offload.step ? (units, hp) => this.hooks.offload.step!(units, hp, env) : undefined,
        deviceScale: { buf: stepScalars, off: nm },
      }));
      await this.timed("gather", () => this.hooks.gather.endStep?.(env));
      const host = await be.read({ buf: stepScalars, off: 0 }, out.deferred ? nm + 3 : nm);
      for (let i = 0; i < nm; i++) lossSum += host[i]!;
      if (out.deferred) out = outcomeFromSumSquares(host[nm + 2]!, lossScale * gradDivisor, env.config.gradient_clipping);
    } finally {
      be.free(stepScalars);
    }
    this.scaler.update(out.overflow);
    this.globalSteps++;
    if (!out.overflow) {
      this.appliedSteps++;
      this.scheduler.step();
    }
    const tot = new Float64Array([lossSum, micros.length]);
    if (env.comm.worldSize > 1) await env.comm.allReduce(tot);
    return { loss: tot[0]! / tot[1]!, lr, lossScale, gradNorm: out.gradNorm, skipped: out.overflow };
  }

  /** `fn` inside `phase` of the phase observer (or just `fn`). */
  private timed<T>(phase: "forward" | "backward" | "reduce" | "optimizer" | "gather", fn: () => T): T {
    return this.phaseObserver ? this.phaseObserver.time(phase, fn) : fn();
  }

  /** Mean loss over `micros` without gradients over all ranks (every rank must call it with the
   * same number of micro-batches): the mean of the micro-batch losses where every micro-batch
   * scores the same number of labels (plain text), else their mean weighted by scored labels (the
   * token mean of the cross-entropy, as training normalises it: tokenLossWeights). */
  async evalLoss(micros: readonly TrainMicroBatch[]): Promise<number> {
    let sum = 0;
    let weighted = 0;
    let n1 = 0;
    let n2 = 0;
    this.phase.training = false;
    try {
      for (const mb of micros) {
        const n = scoredLabels(mb);
        n1 += n;
        n2 += n * n;
        const v = await noGrad(async () => {
          const out = await this.model.forward({ inputIds: mb.inputIds, labels: mb.labels, batch: mb.batch, seq: mb.seq, ...(mb.segmentIds ? { segmentIds: mb.segmentIds } : {}) });
          const v = await out.loss!.item();
          out.logits?.dispose();
          out.loss!.dispose();
          out.auxLoss?.dispose();
          return v;
        });
        sum += v;
        weighted += n * v;
      }
    } finally {
      this.phase.training = true;
    }
    const tot = new Float64Array([sum, micros.length, weighted, n1, n2]);
    if (this.env.comm.worldSize > 1) await this.env.comm.allReduce(tot);
    const [s, k, w, c1, c2] = tot as unknown as [number, number, number, number, number];
    // equal counts everywhere ⇔ k·Σn² = (Σn)² (exact for integer counts below 2^26)
    return k * c2 === c1 * c1 || c1 === 0 ? s / k : w / c1;
  }

  /** The engine's scalar state (Stateful): step counters, scheduler, loss scaler. */
  stateDict(): EngineStateDict {
    return { global_steps: this.globalSteps, applied_steps: this.appliedSteps, scheduler: this.scheduler.stateDict(), loss_scaler: this.scaler.stateDict() };
  }

  /** Restore {@link stateDict}'s scalars (the random streams are keyed by the step, so they follow).
   * @throws when the scheduler or loss-scaler state is malformed. */
  loadStateDict(s: EngineStateDict): void {
    if (!Number.isInteger(s.global_steps) || !Number.isInteger(s.applied_steps) || s.applied_steps > s.global_steps || s.applied_steps < 0) {
      throw new Error(`engine.loadStateDict: malformed step counters global_steps ${s.global_steps}, applied_steps ${s.applied_steps}`);
    }
    if (s.scheduler) this.scheduler.loadStateDict(s.scheduler);
    this.scaler.loadStateDict(s.loss_scaler);
    this.globalSteps = s.global_steps;
    this.appliedSteps = s.applied_steps;
    this.phase.step = s.global_steps;
  }

  /** Handles of the units this rank holds, in model order. */
  units(): readonly UnitHandle[] {
    return this.states;
  }

  /** The handle of `unit` when this rank holds it, else null. */
  handleOf(unit: Unit): UnitHandle | null {
    return this.byUnit.get(unit) ?? null;
  }

  /** The units whose states this rank writes to a checkpoint (checkpoint hook `ownedUnits`). */
  checkpointUnits(): readonly UnitHandle[] {
    return this.hooks.checkpoint.ownedUnits(this.env);
  }

  /** Every plugin's manifest contribution (`ctx.checkpoint.contribute`), by key. */
  manifestEntries(): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [key, { c }] of this.reg.manifest) out[key] = c.save();
    return out;
  }

  /** Warnings of the plugins' `check` of their saved manifest entries (CheckpointTarget). */
  /** The model's buffers (CheckpointTarget). */
  modelBuffers(): ReadonlyMap<string, Float32Array> {
    return this.model.buffers();
  }

  checkManifestEntries(saved: Readonly<Record<string, unknown>>): string[] {
    const out: string[] = [];
    for (const [key, { c }] of this.reg.manifest) {
      if (!c.check || !Object.hasOwn(saved, key)) continue;
      const w = c.check(saved[key]);
      if (w) out.push(w);
    }
    return out;
  }

  /** Set `unit`'s fp32 master copy from its stored parameters: the device master (mixed
   * precision), or the host master of offloaded states (any precision). */
  initMaster(unit: UnitHandle): Promise<void> {
    const st = this.byUnit.get((unit as UnitState).unit);
    if (!st) throw new Error(`engine.initMaster: rank ${this.env.rank} holds no unit ${unit.name}`);
    return initMaster(this.env.be, st);
  }

  /** Run every plugin's per-step metrics (`ctx.metrics.afterStep`), in set-up order. A collective
   * when a plugin's is: EVERY rank calls it after every trainBatch. */
  async afterStep(): Promise<StepMetrics[]> {
    const out: StepMetrics[] = [];
    for (const fn of this.reg.afterStep) {
      const m = await fn();
      if (m) out.push(m);
    }
    return out;
  }

  /** The summary sections plugins contribute (`ctx.metrics.summary`), by section name. */
  summarySections(): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [section, { fn }] of this.reg.summary) out[section] = fn();
    return out;
  }

  /** Bytes of padding this rank holds in sharded states (docs/domain.md §1: reported, never hidden). */
  paddingBytes(): number {
    const mixed = this.env.paramDtype !== "f32";
    return this.states.reduce((s, st) => s + st.paddingBytes(mixed), 0);
  }

  /** Save a sharded checkpoint `<dir>/<tag>` (core/src/checkpoint/save.ts: one record file per
   * rank, manifest, atomic rename, `latest`). A collective: every rank calls it with the same
   * `dir` and `tag` between steps; a rank that calls it alone gets an error, not a deadlock. */
  saveCheckpoint(dir: string, tag: string, opts?: SaveCheckpointOptions): Promise<SaveCheckpointResult> {
    return saveCheckpoint(this, dir, tag, opts);
  }

  /** Load a checkpoint saved at any world size / stage / ep_size (core/src/checkpoint/load.ts);
   * `path` is a checkpoint root (its `latest`, or `tag`) or a tag directory. Not a collective. */
  loadCheckpoint(path: string, tag?: string, opts?: LoadCheckpointOptions): Promise<LoadCheckpointResult> {
    return loadCheckpoint(this, path, tag, opts);
  }

  /** Write `<dir>/model.safetensors` with Hugging Face names in the training dtype
   * (core/src/checkpoint/export16.ts). A collective. Returns false (with a warning) under ZeRO-3
   * without `stage3_gather_16bit_weights_on_model_save`, as DeepSpeed does. */
  save16bitModel(dir: string, opts?: Save16Options): Promise<boolean> {
    return save16bitModel(this, dir, opts);
  }

  /** Free every buffer of the model and the engine. */
  destroy(): void {
    for (const st of this.states) st.destroy(this.env.be);
    this.model.destroy();
  }
}
