/**
 * The six hooks as the engine uses them (docs/architecture.md "The six hooks"). Every call receives a
 * per-call {@link HookContext} (plugin-context.ts): job facts, the live step position and unit
 * handles with verbs over their buffers — no engine state map, no model object. Core's defaults
 * (`defaults.ts`) give plain data parallelism; plugins claim or wrap them through
 * `composePlugins` (core/src/hooks/plugin.ts); the registry (registry.ts) says which built-in
 * plugin packages a job's config selects.
 *
 * | hook       | answers                                                        | default            |
 * |------------|----------------------------------------------------------------|--------------------|
 * | partition  | which rank owns which elements of a unit's params/grads/optim   | all replicated     |
 * | gather     | make a unit's full params resident before use; release after    | no-op              |
 * | reduce     | turn local gradients into the averaged gradients this rank owns | all_reduce         |
 * | route      | MoE dispatch/combine across ranks                               | all experts local  |
 * | offload    | where optimizer state and sharded params live; per-unit gradReduced | device         |
 * | checkpoint | what each rank writes and reads                                 | (see checkpoint/)  |
 */
import type { Plugin } from "../hooks/plugin.ts";
import type { MoERouter, TokenDispatcher } from "../nn/moe/index.ts";
import type { Phase } from "../nn/unit.ts";
import type { UnitPlan } from "./plan.ts";
import type { HookContext, HostOptimizerState, HostParamShard, OffloadStepInputs, OptimizerDevice, SetupContext, UnitHandle, UnitInfo } from "./plugin-context.ts";

/** @deprecated The per-call hook context was called EngineEnv; use {@link HookContext}. */
export type EngineEnv = HookContext;

/** partition: the plan of one unit (placements and group). Called once per unit at set-up.
 * `null` means this rank does not hold the unit at all (an expert placed on another rank of the EP
 * group): no buffers, no optimizer state, and its hooks never fire here. */
export interface PartitionHook {
  plan(unit: UnitInfo, ctx: HookContext): UnitPlan | null;
}

/** gather: make the unit's full parameters resident (`unit.setParams(buf)`) before a region,
 * release after. `gather` returns a handle (a promise, or a comm `Work`) that completes when the
 * unit's parameters are resident; core waits for it right before the region computes. Gathers of
 * later units that the hook decides to prefetch are *issued* inside the call and left in flight
 * (their collectives' order is fixed at issue: core/src/comm), never waited there, so they overlap
 * the current unit's compute. */
export interface GatherHook {
  gather(unit: UnitHandle, phase: Phase, ctx: HookContext): void | PromiseLike<void>;
  release(unit: UnitHandle, phase: Phase, ctx: HookContext): void | Promise<void>;
  /** Called after the optimizer step (e.g. to reset prefetch bookkeeping). */
  endStep?(ctx: HookContext): void | Promise<void>;
  /** Called between steps after units moved between ranks (SetupContext `relocation.commit`):
   * per-unit bookkeeping (recorded order of use) starts afresh. */
  unitsChanged?(ctx: HookContext): void | Promise<void>;
}

/** reduce: consume `unit.microGrad()` (this micro-batch's local gradient, fresh per micro-batch)
 * into the owned, summed gradient (`unit.gradAccumulator()`); `finish` completes outstanding
 * communication after the last micro-batch. `gradReady` may issue its collective and return before
 * it completes (zero2's buckets under `overlap_comm`); `finish` waits for all of them. Gradients are *summed* over ranks and micro-batches;
 * the optimizer divides by (accumulation steps × world size). */
export interface ReduceHook {
  gradReady(unit: UnitHandle, ctx: HookContext): void | Promise<void>;
  finish(ctx: HookContext): void | Promise<void>;
  /** Whether `gradReady` consumes `unit`'s micro-batch gradient only by adding it into the whole
   * accumulator `unit.gradAccumulator()` (`accumulateLocal` with grads replicated; `takeMicroGrad`
   * in a group of one rank, whose shard is the whole unit), so the engine may
   * have a 16-bit unit without an f32 working copy (nn/unit.ts `workingCopy: false`: the experts)
   * add its contributions into that accumulator directly: its `microGrad()` is then null and no
   * micro-batch gradient buffer exists. Asked once per held unit at set-up; absent or false: a
   * fresh micro-batch gradient as for every other unit. A plugin wrapping `reduce` whose
   * `gradReady` reads `microGrad()` must not pass the inner hook's answer on. */
  accumulatesLocally?(unit: UnitHandle, ctx: HookContext): boolean;
}

/** route: the token dispatcher of the model's MoE layers (nn/moe/dispatcher.ts; null keeps the
 * model's LocalDispatcher), and optionally their router (nn/moe/router.ts; null/absent keeps the
 * model's Hugging Face router). Called once at set-up; the engine installs them into `model.moe`. */
export interface RouteHook {
  dispatcher(ctx: HookContext): TokenDispatcher | null;
  router?(ctx: HookContext): MoERouter | null;
}

/** offload: where a unit's optimizer state lives and who updates it there. Core's default keeps
 * everything on the device. An offload plugin claims the hook: `optimizerDevice` is asked once per
 * held unit at set-up (before its optimizer buffers would be allocated); for a unit answered "cpu"
 * or "nvme" the engine allocates no device `optim` buffer and asks `createHostState` for its host
 * states instead; after the gradient norm and clipping, the engine runs the device AdamW on the
 * other units and `step` on the offloaded ones (which must write the updated parameters of each
 * unit's optimizer range back to `paramStorage()`), then all_gathers parameters as usual. */
export interface OffloadHook {
  optimizerDevice(unit: UnitHandle, ctx: HookContext): OptimizerDevice;
  /** The host states of a unit placed off the device (required when any unit is). */
  createHostState?(unit: UnitHandle, ctx: HookContext): HostOptimizerState;
  /** AdamW over the optimizer ranges of `units` (every offloaded unit of this rank with
   * optimCount > 0, model order) with the gradients `unit.ownedGrad()` (device) times
   * `hp.gradScale`; writes each updated range back to the device parameters. */
  step?(units: readonly UnitHandle[], hp: OffloadStepInputs, ctx: HookContext): Promise<void>;
  /** Where a unit's sharded parameters live (asked once per held unit whose `plan.params` is
   * "sharded"; absent = "device"). For "cpu"/"nvme" the engine initialises the shard on the device,
   * then hands it to `createHostParams` and evicts the device copy (UnitHandle `evictParams`). */
  paramDevice?(unit: UnitHandle, ctx: HookContext): OptimizerDevice;
  /** The host copy of an offloaded parameter shard (required when `paramDevice` is not "device"). */
  createHostParams?(unit: UnitHandle, ctx: HookContext): HostParamShard;
  /** `unit`'s owned gradient (`ownedGrad()`) is final for this step: called once per step for every
   * trainable unit this rank holds — during the last micro-batch's backward as soon as the reduce
   * hook announces it (`ctx.gradReduced`), at the latest right after `reduce.finish` — and always
   * before the gradient norm and `step` (grad-reduced.ts). Must not block: start work (e.g.
   * ZeRO-Offload's device → host gradient copy, overlapped with the rest of backward) and return;
   * the device gradient stays valid and unchanged until the end of the optimizer step. */
  gradReduced?(unit: UnitHandle, ctx: HookContext): void;
}

/** checkpoint: which units' states this rank writes. */
export interface CheckpointHook {
  /** Which units' states this rank writes (default: those whose optimizer states it owns; a
   * replicated one by world rank 0). For each, the rank writes its optimizer range
   * `[optimStart, optimStart + optimCount)` of params, master (mixed precision), m and v
   * (core/src/checkpoint/save.ts); over all ranks every element of every unit must be written
   * exactly once (the save checks it and names the unit). Reading back needs no hook: any rank
   * reads any range of any rank file (resharding on load). Manifest entries are contributed with
   * `ctx.checkpoint.contribute` in setup. */
  ownedUnits(ctx: HookContext): readonly UnitHandle[];
}

/** The six hooks. */
export interface EngineHooks {
  partition: PartitionHook;
  gather: GatherHook;
  reduce: ReduceHook;
  route: RouteHook;
  offload: OffloadHook;
  checkpoint: CheckpointHook;
}

/** A ZeroMoE plugin: a {@link Plugin} over the engine's hooks whose `setup` receives a
 * {@link SetupContext}. Write one with `definePlugin`. */
export type EnginePlugin = Plugin<EngineHooks & Record<string, unknown>, SetupContext>;
