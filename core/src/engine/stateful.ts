/**
 * What checkpoint code needs of an engine, as an interface the engine implements: the Stateful
 * protocol (`stateDict` / `loadStateDict`, like PyTorch's and DeepSpeed's `state_dict`) for the
 * scalars, and unit handles (plugin-context.ts) for the per-unit states. core/src/checkpoint
 * imports this file, never engine.ts, so the engine → checkpoint arrow has no way back.
 */
import type { Unit } from "../nn/unit.ts";
import type { LossScalerState } from "../optim/loss-scaler.ts";
import type { SchedulerState } from "../optim/schedulers.ts";
import type { JobView, UnitHandle } from "./plugin-context.ts";

/** The engine's scalar state (names as the checkpoint manifest stores them). */
export interface EngineStateDict {
  /** All optimizer steps attempted (skipped ones included). */
  global_steps: number;
  /** Applied (non-skipped) optimizer steps. */
  applied_steps: number;
  scheduler: SchedulerState | null;
  loss_scaler: LossScalerState;
}

/** An object whose state can be saved and restored. */
export interface Stateful<S> {
  stateDict(): S;
  /** @throws when `state` is malformed. */
  loadStateDict(state: S): void;
}

/** An engine as the checkpoint code sees it (core/src/checkpoint/{save,load,export16,init-from}.ts). */
export interface CheckpointTarget extends Stateful<EngineStateDict> {
  /** Job facts, collectives, backend and log of this rank. */
  readonly job: JobView;
  /** Every unit of the model in model order (names, parameter layout), held here or not. */
  readonly modelUnits: readonly Unit[];
  /** Handles of the units this rank holds, in model order. */
  units(): readonly UnitHandle[];
  /** The handle of `unit` when this rank holds it, else null. */
  handleOf(unit: Unit): UnitHandle | null;
  /** The units whose states this rank writes (the checkpoint hook's `ownedUnits`). */
  checkpointUnits(): readonly UnitHandle[];
  /** Manifest entries contributed by plugins (`plugins` of manifest.json), by key. */
  manifestEntries(): Record<string, unknown>;
  /** Warnings of plugins whose state differs from their saved manifest entry (`plugins[key]` of a
   * loaded checkpoint; ManifestContribution `check`). */
  checkManifestEntries(saved: Readonly<Record<string, unknown>>): string[];
  /** The model's buffers by Hugging Face name (the live arrays; the same on every rank): saved with
   * the model, not trained (CausalDecoder.buffers; DeepSeek-V3's e_score_correction_bias). */
  modelBuffers(): ReadonlyMap<string, Float32Array>;
  /** Set the fp32 master copy of `unit` from its stored parameters (mixed precision: the device
   * master; offloaded optimizer states: the host master, any precision). */
  initMaster(unit: UnitHandle): Promise<void>;
}
