/**
 * The plugin contract (issue 10): what a plugin sees, in the manner of Rollup's `PluginContext` —
 * verbs over the engine instead of its raw state.
 *
 * - {@link SetupContext}: what `setup(ctx)` receives — claim/wrap/get of the six hooks plus the job
 *   (`config`, `rank`, `worldSize`, `groups`, `comm`, `be`), logging, per-step metrics and summary
 *   sections, checkpoint-manifest contributions with a restore callback, and model transforms.
 * - {@link HookContext}: the second argument of every hook call — the same job facts plus the live
 *   step position (`micro`, `isLastMicro`, `phase`) and unit accessors ({@link UnitHandle}).
 * - {@link UnitHandle}: one unit as a hook sees it — identity (name, kind, numel, dtype), its plan
 *   and group, and verbs over its buffers (gathered parameters, this micro-batch's gradient, the
 *   owned gradient accumulator, optimizer state) and "which rank counts this gradient".
 * - {@link PluginMemory}: a plugin's contribution to the up-front memory estimate, usable before
 *   any engine exists (core/src/train/memory-estimate.ts).
 *
 * Nothing here hands out a mutable engine map or the model object.
 */
import type { AdamWParams, Backend, Buf, DType, View } from "@zeromoe/kernels";
import type { Communicator, Group } from "../comm/communicator.ts";
import type { ParallelGroups } from "../comm/groups.ts";
import type { JobConfig } from "../config/types.ts";
import type { CausalDecoder } from "../models/llama.ts";
import type { UnitKind } from "../nn/unit.ts";
import type { UnitPlan } from "./plan.ts";

/** Read-only identity of a unit (core/src/nn/unit.ts): what `partition.plan` and setup see. */
export interface UnitInfo {
  /** `embed`, `layers.<i>`, `layers.<i>.experts.<e>`, `head`. */
  readonly name: string;
  readonly kind: UnitKind;
  /** Layer index (layer and expert units), else undefined. */
  readonly layer?: number;
  /** Expert index within its layer (expert units), else undefined. */
  readonly expert?: number;
  /** Elements of the unit's flat buffer. */
  readonly numel: number;
  /** Storage dtype of parameters and gradients. */
  readonly dtype: DType;
}

/** The live step position, read by hooks (the engine updates it; hooks only read it). */
export interface StepPhase {
  /** `training` (trainBatch) or evaluation (evalLoss). */
  readonly training: boolean;
  /** True while the backward sweep runs (activation checkpointing recomputes forwards then). */
  readonly backward: boolean;
  /** Optimizer steps attempted before the current one (0-based step index). */
  readonly step: number;
}

/** Current micro-batch: `index` 0-based, `count` = gradient_accumulation_steps. */
export interface MicroPosition {
  readonly index: number;
  readonly count: number;
}

/** Facts of the job and this rank, shared by {@link SetupContext} and {@link HookContext}. */
export interface JobView {
  /** The resolved job (do not mutate). */
  readonly config: Readonly<JobConfig>;
  /** World rank and size. */
  readonly rank: number;
  readonly worldSize: number;
  /** dp (all ranks), ep, edp and etp groups of this rank (core/src/comm/groups.ts). */
  readonly groups: ParallelGroups;
  /** Process-group collectives (all_reduce, all_gather, reduce_scatter, all_to_all_v, broadcast,
   * barrier); pass `{ group }` for a sub-group. */
  readonly comm: Communicator;
  /** The device backend (allocate scratch buffers tagged appropriately, run kernels). */
  readonly be: Backend;
  /** Storage dtype of parameters and gradients (f32, or bf16/f16 with `bf16`/`fp16` enabled). */
  readonly paramDtype: "f32" | "bf16" | "f16";
  /** Live step position (see {@link StepPhase}). */
  readonly phase: StepPhase;
  /** Live micro-batch position. */
  readonly micro: MicroPosition;
  /** Print a line (the engine's log sink: rank 0 only by default). */
  log(message: string): void;
  /** Print `warning: <message>` through the same sink. */
  warn(message: string): void;
}

/** One unit of this rank as a hook sees it: identity, plan, and verbs over its buffers. Handles are
 * stable (the same object for the same unit for the engine's life). */
export interface UnitHandle extends UnitInfo {
  /** This rank's partition of the unit (placements, group, shard geometry). */
  readonly plan: UnitPlan;
  /** The group the unit's state is split and reduced over (`plan.group`). */
  readonly group: Group;
  /** First element (unit coordinates) and count of the range this rank's optimizer updates. */
  readonly optimStart: number;
  readonly optimCount: number;
  /** Whether this rank counts this unit's reduced gradient in global sums (gradient norm, noise
   * statistics): its optimizer range when optimizer states are sharded, group rank 0 when they are
   * replicated — so over all ranks every element counts exactly once. The optimizer's rule. */
  readonly countsGradient: boolean;
  /** False for a frozen unit (the job's `freeze`, engine/freeze.ts): it gets no gradient (no
   * `gradReady`), holds no gradient or optimizer buffer, and the optimizer skips it. */
  readonly trainable: boolean;

  /** The unit's full parameters when resident (replicated, or gathered under ZeRO-3), else null. */
  params(): Buf | null;
  /** Make `buf` (numel elements, the unit's dtype) the unit's resident full parameters, or null to
   * mark them not resident. The caller keeps ownership of `buf` (frees it when done). */
  setParams(buf: Buf | null): void;
  /** Where this rank's stored parameters live: its shard when `plan.params` is sharded (elements
   * [shardStart, shardStart + owned); the buffer has shardSize elements, padding zero), else the
   * whole resident buffer (elements [0, numel)). `buf[0]` holds unit element `start`.
   * @throws when neither exists (a replicated unit released by a gather hook). */
  paramStorage(): { buf: Buf; start: number; count: number };

  /** This micro-batch's local gradient (numel elements, fresh per micro-batch), or null when the
   * unit received none. Valid inside `reduce.gradReady` until {@link releaseMicroGrad}. */
  microGrad(): Buf | null;
  /** Free this micro-batch's gradient buffers (after consuming them). */
  releaseMicroGrad(): void;
  /** The summed gradient buffer this rank keeps: the whole-unit accumulator (`grads` replicated)
   * or its shard (`grads` sharded, shardSize elements). */
  gradAccumulator(): Buf;
  /** The owned, summed gradient region the optimizer reads (after `reduce.finish`). */
  ownedGrad(): { view: View; n: number };
  /** Optimizer-state buffers (optimLength elements each; `master` only with mixed precision).
   * @throws when the states are offloaded (`optimizerDevice` is not "device"): use
   * {@link readOptimizerState} / {@link writeOptimizerState}, which work wherever they live. */
  optimizerState(): { master: Buf | null; m: Buf; v: Buf };
  /** Where this unit's optimizer states live (the offload hook's `optimizerDevice`, asked once at
   * set-up): "device" (backend buffers, tag `optim`), "cpu" (host memory) or "nvme" (files). */
  readonly optimizerDevice: OptimizerDevice;
  /** The host-side states when offloaded, else null. */
  hostOptimizerState(): HostOptimizerState | null;
  /** Where the sharded parameter storage lives (offload hook `paramDevice`; "device" unless
   * `plan.params` is sharded and a plugin offloads it). An offloaded shard is copied to the device
   * on demand: `paramStorage()` materialises it (marked dirty: written back when evicted),
   * {@link prefetchParams} materialises it clean; {@link evictParams} frees the device copy. */
  readonly paramDevice: OptimizerDevice;
  /** The host copy of an offloaded parameter shard, else null. */
  hostParams(): HostParamShard | null;
  /** Whether an offloaded shard has a device copy now (always true for device-resident shards). */
  paramsResident(): boolean;
  /** Copy an offloaded shard to the device now, marked clean (a prefetch; no-op when resident). */
  prefetchParams(): void;
  /** Free the device copy of an offloaded shard, writing it back to the host first when dirty
   * (materialised by `paramStorage()`, which callers may write through). No-op otherwise. */
  evictParams(): Promise<void>;
  /** Elements [off, off + n) of optimizer state `state` (f32), wherever it lives. `master` exists on
   * the device only with mixed precision; offloaded units always keep an f32 master on the host.
   * @throws when the state does not exist here. */
  readOptimizerState(state: OptimizerStateName, off: number, n: number): Promise<Float32Array>;
  /** Overwrite elements [off, off + data.length) of optimizer state `state`, wherever it lives. */
  writeOptimizerState(state: OptimizerStateName, off: number, data: Float32Array): Promise<void>;
}

/** The optimizer states a unit keeps per element (f32 each). */
export type OptimizerStateName = "master" | "m" | "v";

/** Where a unit's optimizer states live. */
export type OptimizerDevice = "device" | "cpu" | "nvme";

/**
 * One unit's optimizer states outside the device (ZeRO-Offload / ZeRO-Infinity; created by the
 * offload hook's `createHostState`): an f32 master copy of the owned parameters (for f32 training
 * too: the device keeps its parameters for compute, the host its master), m and v, `length`
 * elements each (the unit's optimLength; element 0 is unit element `optimStart`).
 */
export interface HostOptimizerState {
  readonly length: number;
  /** "cpu" (host memory) or "nvme" (files under nvme_path). */
  readonly device: "cpu" | "nvme";
  /** Elements [off, off + n) of `state`. */
  read(state: OptimizerStateName, off: number, n: number): Promise<Float32Array>;
  /** Overwrite elements [off, off + data.length) of `state` (durable on return for nvme). */
  write(state: OptimizerStateName, off: number, data: Float32Array): Promise<void>;
  /** Release host memory and files. */
  free(): void;
}

/** The host copy of one unit's parameter shard (parameter offload, ZeRO-Infinity): `length`
 * elements (the plan's shardSize) of the unit's dtype — f32 values or 16-bit bits. */
export interface HostParamShard {
  readonly length: number;
  readonly device: "cpu" | "nvme";
  /** The whole shard, synchronously (a host array, or a synchronous file read for nvme): what
   * `paramStorage()` copies to the device. */
  loadSync(): Float32Array | Uint16Array;
  /** Overwrite elements [off, off + data.length). */
  write(off: number, data: Float32Array | Uint16Array): Promise<void>;
  free(): void;
}

/** What the offload hook's `step` receives: AdamW's hyper-parameters of this step (as the device's
 * fused `adamw` takes them, gradScale included) — kernels' `AdamWParams`. */
export type OffloadStepInputs = AdamWParams;

/** The second argument of every hook call. */
export interface HookContext extends JobView {
  /** True during the last micro-batch of the step. */
  readonly isLastMicro: boolean;
  /** The handle of a unit this rank holds. @throws if this rank does not hold it. */
  unit(u: UnitInfo | string): UnitHandle;
  /** Whether this rank holds the unit (its plan was not null). */
  holds(u: UnitInfo | string): boolean;
  /** Handles of every unit this rank holds, in model order. */
  units(): readonly UnitHandle[];
  /** A reduce hook says that `unit`'s owned gradient (`ownedGrad()`) is final for this step: the
   * reduction of its last micro-batch's gradient has been added in. Core's reduction helpers
   * (`accumulateLocal`… `reduceScatterBucket`) call it during the last micro-batch; the engine
   * announces every unit not announced by the end of `reduce.finish` itself (grad-reduced.ts). It
   * reaches the offload hook's `gradReduced` once per unit per step; repeats are ignored. */
  gradReduced(unit: UnitHandle): void;
}

/** What a per-step metrics callback returns: a line for the step log and warnings (printed at once). */
export interface StepMetrics {
  /** Shown under the step line every `steps_per_print` steps (the latest one), e.g. MoE load. */
  line?: string | null;
  /** Printed as `warning: …` right after the step. */
  warnings?: readonly string[];
}

/** Named per-step metrics and summary sections (`ctx.metrics`). */
export interface MetricsRegistry {
  /** Run `fn` on EVERY rank after every trainBatch (a collective is allowed: all ranks call it in
   * the same order). */
  afterStep(fn: () => StepMetrics | void | Promise<StepMetrics | void>): void;
  /** Contribute the run summary's `section` (`--summary` JSON; rank 0's value is used). Called once
   * at the end of the run. @throws if another plugin already owns the section. */
  summary(section: string, fn: () => unknown): void;
}

/** A checkpoint-manifest contribution (`ctx.checkpoint.contribute(key, …)`). */
export interface ManifestContribution {
  /** JSON value written under `plugins[key]` of manifest.json at every save (rank 0's). */
  save(): unknown;
  /** Given the saved value on resume, BEFORE partitioning (so e.g. expert placement can be
   * restored). Not called when the checkpoint has no entry under `key`. */
  restore?(saved: unknown): void;
  /** After a checkpoint was loaded into an engine (resumed or not): compare the saved value with the
   * state now; a returned string is logged as a warning (e.g. experts placed differently). */
  check?(saved: unknown): string | null;
}

/** What `setup(ctx)` receives besides claim/wrap/get. */
export interface SetupContext extends JobView {
  /** This plugin's name. */
  readonly pluginName: string;
  /** Every unit of the model in model order (including units this rank will not hold). */
  readonly modelUnits: readonly UnitInfo[];
  /** Per-step metrics and summary sections. */
  readonly metrics: MetricsRegistry;
  /** Checkpoint-manifest contributions and their restore. */
  readonly checkpoint: { contribute(key: string, c: ManifestContribution): void };
  /** Register a transform applied to the model after all plugins are set up and before it is
   * partitioned (e.g. replacing layers; AutoEP). */
  transformModel(fn: (model: CausalDecoder) => void): void;
  /** Moving units between ranks between steps (live re-placement): usable once the engine is
   * built, from a `metrics.afterStep` callback (after the optimizer step, nothing in flight). */
  readonly relocation: UnitRelocation;
}

/**
 * Changing which units this rank holds between steps (plugins/moe/src/live-replace.ts). The caller
 * first changes what its partition hook answers, then adopts and releases units, fills the adopted
 * buffers (through the handles' verbs) and calls `commit`. Every rank calls `commit`.
 */
export interface UnitRelocation {
  /** Plan `unit` with the partition hook and hold it on this rank: a new handle whose buffers
   * (parameters, gradient, master, m, v as the plan says) are allocated and zeroed, placed in model
   * order among the held units. @throws when this rank already holds the unit, the partition hook
   * plans it null here, or the offload hook would put its states off the device. */
  adopt(unit: UnitInfo): UnitHandle;
  /** Free this rank's states of `unit` (its parameters included) and stop holding it.
   * @throws when this rank does not hold it. */
  release(unit: UnitInfo): void;
  /** The held set changed: hooks with per-unit bookkeeping start afresh (the gather hook's
   * `unitsChanged`: ZeRO-3 records its order of use again in the next step). */
  commit(): Promise<void>;
}

/** One part of the model-state memory of a rank (memory-estimate.ts). */
export interface MemoryPart {
  /** "dense", "expert", or a plugin's own name. */
  name: string;
  /** Parameter elements this rank keeps state for (before partitioning). */
  elements: number;
  /** Ranks the part's states may be partitioned over. */
  groupSize: number;
  /** Bytes per rank of parameters, gradients, optimizer states (on the device). */
  params: number;
  grads: number;
  optim: number;
  /** Bytes per rank a plugin keeps in host memory instead (offload); absent = 0. */
  host?: number;
  /** Bytes of `params` a partition keeps whole on every rank while sharding the rest (ZeRO-3's
   * units under `stage3_param_persistence_threshold`); a later contribution that moves sharded
   * parameters off the device (offload_param) leaves these on it. Absent = 0. */
  wholeParams?: number;
}

/** What memory contributions see: the job, the bytes per parameter of its precision, and the
 * model's units. */
export interface MemoryEstimateInput {
  readonly config: Readonly<JobConfig>;
  readonly mixed: boolean;
  readonly perParameter: { readonly param: number; readonly grad: number; readonly optim: number };
  /** The model's units in model order (memory-estimate.ts `modelUnits`): name, kind, elements of
   * one unit, and how many equal units the entry stands for (a MoE layer's E experts are one entry
   * of count E). Expert units make up the `expert` part, the others the `dense` part; see
   * `partElementsInUnitsBelow` (`@zeromoe/core/plugin`). */
  readonly units: readonly { readonly name: string; readonly kind: UnitKind; readonly numel: number; readonly count: number }[];
}

/** A plugin's contribution to the memory estimate (a field of the plugin, usable before any engine
 * exists). Core starts from every state replicated on every rank, one part per kind of parameter;
 * all `layout`s run (plugin order), then all `partition`s. */
export interface PluginMemory {
  /** Change which parts a rank holds (e.g. MoE: a rank keeps Ψ_e/ep_size expert elements over its
   * edp group of world_size/ep_size ranks). */
  layout?(parts: MemoryPart[], input: MemoryEstimateInput): MemoryPart[];
  /** Bytes per rank of one part's states (e.g. a ZeRO stage's formula). */
  partition?(part: MemoryPart, input: MemoryEstimateInput): MemoryPart;
}
