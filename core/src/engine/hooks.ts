/**
 * The six hooks as the engine uses them (design.md "The six hooks"), and the environment every hook
 * implementation receives. Core's defaults (`defaults.ts`) give plain data parallelism; plugins
 * (plugins/zero1, zero2, zero3, moe, …) claim or wrap them through `composePlugins`
 * (core/src/hooks/plugin.ts).
 *
 * | hook       | answers                                                        | default            |
 * |------------|----------------------------------------------------------------|--------------------|
 * | partition  | which rank owns which elements of a unit's params/grads/optim   | all replicated     |
 * | gather     | make a unit's full params resident before use; release after    | no-op              |
 * | reduce     | turn local gradients into the averaged gradients this rank owns | all_reduce         |
 * | route      | MoE dispatch/combine across ranks                               | all experts local  |
 * | offload    | where optimizer state lives                                     | device             |
 * | checkpoint | what each rank writes and reads                                 | (see checkpoint/)  |
 */
import type { Backend } from "@zeromoe/kernels";
import type { Communicator } from "../comm/communicator.ts";
import type { ParallelGroups } from "../comm/groups.ts";
import type { JobConfig } from "../config/types.ts";
import type { Plugin } from "../hooks/plugin.ts";
import type { CausalDecoder } from "../models/llama.ts";
import type { MoEGate, MoERoute } from "../nn/moe-route.ts";
import type { Phase, Unit } from "../nn/unit.ts";
import type { UnitPlan } from "./plan.ts";
import type { UnitState } from "./unit-state.ts";

/** What every hook implementation can see. One per rank. */
export interface EngineEnv {
  readonly be: Backend;
  readonly comm: Communicator;
  readonly config: JobConfig;
  readonly model: CausalDecoder;
  /** dp (all ranks), ep and edp groups of this rank (core/src/comm/groups.ts). */
  readonly groups: ParallelGroups;
  /** Per-unit engine state, filled after partitioning. */
  readonly states: Map<Unit, UnitState>;
  /** Current micro-batch of the step (index 0-based, count = gradient_accumulation_steps). */
  readonly micro: { index: number; count: number };
  /** What the engine is doing now: `training` (trainBatch) or evaluation (evalLoss); `backward`
   * while the backward sweep runs (activation checkpointing recomputes forwards then); `step` = the
   * number of optimizer steps attempted before the current one (0-based step index). Used by the
   * MoE router (train vs eval capacity factor, noise keyed by step, statistics not double-counted). */
  readonly phase: { training: boolean; backward: boolean; step: number };
  /** Storage dtype of parameters and gradients (f32, or bf16/f16 with `bf16`/`fp16` enabled). */
  readonly paramDtype: "f32" | "bf16" | "f16";
  /** Print a line from this rank (rank-0 filtering is the caller's business). */
  log(message: string): void;
}

/** partition: the plan of one unit (placements and group). Called once per unit at set-up.
 * `null` means this rank does not hold the unit at all (an expert placed on another rank of the EP
 * group): no buffers, no optimizer state, and its hooks never fire here. */
export interface PartitionHook {
  plan(unit: Unit, env: EngineEnv): UnitPlan | null;
}

/** gather: make `unit.data` hold the full parameters before a region, release after. */
export interface GatherHook {
  gather(unit: Unit, phase: Phase, env: EngineEnv): void | Promise<void>;
  release(unit: Unit, phase: Phase, env: EngineEnv): void | Promise<void>;
  /** Called after the optimizer step (e.g. to reset prefetch bookkeeping). */
  endStep?(env: EngineEnv): void | Promise<void>;
}

/** reduce: consume `unit.grad` (this micro-batch's local gradient, fresh per micro-batch) into the
 * owned, summed gradient (`state.gradAcc` or `state.gradShard`); `finish` completes outstanding
 * communication after the last micro-batch. Gradients are *summed* over ranks and micro-batches;
 * the optimizer divides by (accumulation steps × group size). */
export interface ReduceHook {
  gradReady(unit: Unit, env: EngineEnv): void | Promise<void>;
  finish(env: EngineEnv): void | Promise<void>;
}

/** route: the MoE dispatcher installed into the model (null keeps the model's local default), and
 * optionally the router (gate) that decides the routing (null/absent keeps the model's own). */
export interface RouteHook {
  create(env: EngineEnv): MoERoute | null;
  createGate?(env: EngineEnv): MoEGate | null;
}

/** offload: where a unit's optimizer state lives. Core supports only "device"; an offload plugin
 * claims this hook to move state to host memory or NVMe. */
export interface OffloadHook {
  optimizerDevice(unit: Unit, env: EngineEnv): "device" | "cpu" | "nvme";
}

/** checkpoint: records this rank contributes to a checkpoint, and how to read them back. */
export interface CheckpointHook {
  /** Which units' states this rank writes (default: the states it owns). For each, the rank
   * writes its optimizer range `[optimStart, optimStart + optimCount)` of params, master (mixed
   * precision), m and v (core/src/checkpoint/save.ts); over all ranks every element of every unit
   * must be written exactly once (the save checks it and names the unit). Reading back needs no
   * hook: any rank reads any range of any rank file (resharding on load). */
  ownedUnits(env: EngineEnv): Unit[];
  /** Entries a plugin adds to the checkpoint's manifest.json (JSON values; e.g. the MoE plugin's
   * `moe: { placement }`, so a resumed job puts every expert back on the same rank). The
   * checkpoint writer merges them into the manifest; absent = nothing to add. */
  manifest?(env: EngineEnv): Record<string, unknown>;
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

/** A ZeroMoE plugin: a {@link Plugin} over the engine's hooks. Write one with `definePlugin`. */
export type EnginePlugin = Plugin<EngineHooks & Record<string, unknown>, EngineEnv>;
