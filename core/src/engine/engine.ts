/**
 * The training engine of one rank: `Engine.create(...)` ≈ `deepspeed.initialize`, then
 * `trainBatch(microBatches)` runs one optimizer step (forward + backward per micro-batch, reduce,
 * clip, AdamW on owned shards) exactly as design.md "One training step" describes.
 *
 * Set-up order: groups → model (born without parameter buffers) → plugins composed on the six hooks
 * → partition hook plans every unit → each rank allocates and initialises only what its plan says
 * it holds (construction-time partitioning under ZeRO-3) → unit hooks wired to gather/reduce →
 * route hook installed into MoE blocks.
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
import { MixtralForCausalLM } from "../models/mixtral.ts";
import { initUnit } from "../nn/init.ts";
import { createLossScaler, type LossScaler } from "../optim/loss-scaler.ts";
import { createScheduler, type LRScheduler } from "../optim/schedulers.ts";
import { backward, fromArray, noGrad } from "../tensor/index.ts";
import { defaultHooks } from "./defaults.ts";
import type { EngineEnv, EngineHooks, EnginePlugin } from "./hooks.ts";
import { initUnitRange } from "./init-shard.ts";
import { createModel } from "./model-factory.ts";
import { initMaster, optimizerStep } from "./optimizer.ts";
import { UnitState } from "./unit-state.ts";

/** One micro-batch of token ids, [batch, seq] row-major. Labels follow Hugging Face: the model
 * scores position t against labels[t + 1]; −100 is ignored. */
export interface TrainMicroBatch {
  inputIds: Int32Array;
  labels: Int32Array;
  batch: number;
  seq: number;
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
  /** Plugins to compose (see core/src/engine/plugins.ts for selection from the config). */
  plugins?: readonly EnginePlugin[];
  /** Log sink (default: console.log on rank 0 only). */
  log?: (message: string) => void;
}

export class Engine {
  readonly env: EngineEnv;
  readonly hooks: EngineHooks;
  /** Owner of each hook ("core" or a plugin name). */
  readonly hookOwners: Record<string, string>;
  readonly model: CausalDecoder;
  readonly states: UnitState[];
  readonly scheduler: LRScheduler;
  readonly scaler: LossScaler;
  /** Applied (non-skipped) optimizer steps so far. */
  appliedSteps = 0;
  /** All optimizer steps attempted so far (skipped ones included). */
  globalSteps = 0;

  private constructor(env: EngineEnv, hooks: EngineHooks, owners: Record<string, string>, states: UnitState[]) {
    this.env = env;
    this.hooks = hooks;
    this.hookOwners = owners;
    this.model = env.model;
    this.states = states;
    const cfg = env.config;
    this.scheduler = createScheduler(cfg.scheduler, cfg.optimizer.params.lr);
    this.scaler = createLossScaler(cfg.fp16);
  }

  /** Build the engine of this rank. Every rank must call it (plugins may run collectives).
   * @throws on config/plugin conflicts and device allocation failures. */
  static async create(opts: EngineOptions): Promise<Engine> {
    const { config, comm, backend: be } = opts;
    const paramDtype = config.bf16.enabled ? "bf16" : config.fp16.enabled ? "f16" : "f32";
    const epSize = config.moe?.ep_size ?? 1;
    const groups = createParallelGroups(comm, epSize);
    const model = createModel(be, config.model, { dtype: paramDtype, seed: config.seed, allocate: false });
    const states = new Map<import("../nn/unit.ts").Unit, UnitState>();
    const micro = { index: 0, count: config.gradient_accumulation_steps };
    const log = opts.log ?? ((m: string) => { if (comm.rank === 0) console.log(m); });
    const phase = { training: true, backward: false, step: 0 };
    const env: EngineEnv = { be, comm, config, model, groups, states, micro, phase, paramDtype, log };
    const composed = await composePlugins(defaultHooks() as EngineHooks & Record<string, unknown>, opts.plugins ?? [], env);
    const hooks = composed.hooks as EngineHooks;
    const mixed = paramDtype !== "f32";
    const list: UnitState[] = [];
    for (const unit of model.units.units) {
      const plan = hooks.partition.plan(unit, env);
      if (!plan) continue; // held by another rank (expert parallelism)
      const st = new UnitState(unit, plan);
      if (plan.params === "sharded") {
        st.paramShard = be.alloc(unit.dtype, plan.shardSize, "param");
        initUnitRange(be, unit, config.seed, plan.shardStart, plan.owned, st.paramShard);
      } else {
        unit.data = be.alloc(unit.dtype, Math.max(1, unit.numel), "param");
        initUnit(unit, config.seed);
      }
      st.allocate(be, mixed);
      states.set(unit, st);
      list.push(st);
    }
    for (const st of list) initMaster(env, st);
    model.units.hooks = {
      gather: (u, ph) => hooks.gather.gather(u, ph, env),
      release: (u, ph) => hooks.gather.release(u, ph, env),
      gradReady: (u) => hooks.reduce.gradReady(u, env),
    };
    const route = hooks.route.create(env);
    const gate = hooks.route.createGate?.(env) ?? null;
    if (route || gate) {
      if (!(model instanceof MixtralForCausalLM)) throw new Error(`the route hook (owner ${composed.owners.route}) needs a sparse model (model.model_type "mixtral")`);
      if (route) model.route = route;
      if (gate) model.gate = gate;
    }
    return new Engine(env, hooks, composed.owners, list);
  }

  /**
   * One optimizer step over `micros` (this rank's gradient_accumulation_steps micro-batches).
   * @throws if the number of micro-batches differs from gradient_accumulation_steps.
   */
  async trainBatch(micros: readonly TrainMicroBatch[]): Promise<StepResult> {
    const env = this.env;
    const be = env.be;
    const accum = env.config.gradient_accumulation_steps;
    if (micros.length !== accum) throw new Error(`trainBatch: got ${micros.length} micro-batches, gradient_accumulation_steps is ${accum}`);
    const lossScale = this.scaler.lossScale;
    let lossSum = 0;
    env.phase.training = true;
    env.phase.step = this.globalSteps;
    // each micro-batch's loss is copied on the device and all are read once after the last
    // backward: no device→host sync between a forward and its backward
    const microLosses = be.alloc("f32", micros.length, "other");
    try {
      for (let i = 0; i < micros.length; i++) {
        env.micro.index = i;
        const mb = micros[i]!;
        const out = await this.model.forward({ inputIds: mb.inputIds, labels: mb.labels, batch: mb.batch, seq: mb.seq });
        const loss = out.loss!;
        be.copy(loss.view, { buf: microLosses, off: i }, 1);
        const seed = lossScale !== 1 ? fromArray(be, new Float32Array([lossScale]), [1], "f32") : undefined;
        env.phase.backward = true;
        try {
          await backward(loss, seed ? { grad: seed } : {});
        } finally {
          env.phase.backward = false;
        }
        seed?.dispose();
      }
      const losses = await be.read({ buf: microLosses, off: 0 }, micros.length);
      for (let i = 0; i < micros.length; i++) lossSum += losses[i]!;
    } finally {
      be.free(microLosses);
    }
    env.micro.index = accum - 1;
    await this.hooks.reduce.finish(env);
    const lr = this.scheduler.getLr();
    const out = await optimizerStep(env, this.states, {
      lr,
      step: this.appliedSteps + 1,
      lossScale,
      maxNorm: env.config.gradient_clipping,
      gradDivisor: accum * env.comm.worldSize,
    });
    await this.hooks.gather.endStep?.(env);
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

  /** Mean loss over `micros` without gradients, averaged over all ranks (every rank must call it
   * with the same number of micro-batches). */
  async evalLoss(micros: readonly TrainMicroBatch[]): Promise<number> {
    const be = this.env.be;
    let sum = 0;
    this.env.phase.training = false;
    try {
      for (const mb of micros) {
        sum += await noGrad(async () => {
          const out = await this.model.forward({ inputIds: mb.inputIds, labels: mb.labels, batch: mb.batch, seq: mb.seq });
          const v = (await be.read(out.loss!.view, 1))[0]!;
          out.logits.dispose();
          out.loss!.dispose();
          out.auxLoss?.dispose();
          return v;
        });
      }
    } finally {
      this.env.phase.training = true;
    }
    const tot = new Float64Array([sum, micros.length]);
    if (this.env.comm.worldSize > 1) await this.env.comm.allReduce(tot);
    return tot[0]! / tot[1]!;
  }

  /** Bytes of padding this rank holds in sharded states (domain.md §1: reported, never hidden). */
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
