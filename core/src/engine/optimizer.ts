/**
 * The optimizer step on the shards each rank owns (docs/architecture.md "One training step", after the last
 * micro-batch): global gradient norm over all ranks → overflow check → clip → fused AdamW on owned
 * ranges → all_gather of updated parameters where parameters are replicated but optimizer states
 * are sharded (ZeRO-1/2). Under ZeRO-3 parameters stay sharded.
 *
 * Gradients arrive *summed* over ranks and micro-batches (reduce hook); AdamW's `gradScale`
 * multiplies them by clipCoef / (lossScale · accumulation · world_size), so every stage applies the
 * same arithmetic to the same values (docs/domain.md §5).
 *
 * Where the norm needs no collective (one rank), no state is offloaded and the optimizer is AdamW,
 * a device backend keeps the whole computation on the device (`deviceScale`): the per-unit sums of
 * squares feed `Backend.clipScale`, whose [scale, skip, Σ] AdamW reads as `scaleFrom`, so the host
 * records the step without waiting for the norm; the caller reads Σ later together with the loss
 * (engine.ts: one host read per step) and settles the outcome with {@link outcomeFromSumSquares}.
 * The cpu backend keeps the host path: a read costs it nothing, and the host's float64 arithmetic
 * is the reference its results are pinned to.
 */
import type { AdamWParams, Backend, Buf, View } from "@zeromoe/kernels";
import { bf16ToNumber, f16ToNumber } from "@zeromoe/kernels";
import { unscaleAndClip } from "../optim/clip.ts";
import { lambOptimizerStep } from "../optim/lamb-optimizer.ts";
import type { JobView } from "./plugin-context.ts";
import { readPadded } from "./host-transfer.ts";
import { countsGradient, type UnitState } from "./unit-state.ts";

/** Inputs of one optimizer step. */
export interface StepInputs {
  lr: number;
  /** 1-based optimizer step (bias correction), counting only applied steps. */
  step: number;
  lossScale: number;
  /** `gradient_clipping` (0 = off). */
  maxNorm: number;
  /** Divisor turning summed gradients into the mean: accumulation steps × world size. */
  gradDivisor: number;
  /** Adam betas of this step when the schedule sets them (OneCycle's cycle_momentum); default optimizer.params.betas. */
  betas?: readonly [number, number] | null;
  /** The offload hook's `step` for units whose states are off the device (required if any is). */
  offloadStep?: (units: readonly UnitState[], hp: AdamWParams) => Promise<void>;
  /** Three f32 where the device path (see the module comment) may write [scale, skip, Σ]; when it
   * does, the outcome is `deferred` and the caller settles it from Σ. Omitted: host path. */
  deviceScale?: View | null;
}

/** Outcome of one optimizer step. */
export interface StepOutcome {
  /** Global L2 norm of the averaged, unscaled gradients (NaN/inf on overflow). */
  gradNorm: number;
  /** True when the step was skipped because gradients held inf/NaN. */
  overflow: boolean;
  clipCoef: number;
  /** True when the step ran on the device path: gradNorm/overflow/clipCoef are not known yet (NaN,
   * false, NaN); read Σ (deviceScale[2]) and call {@link outcomeFromSumSquares}. */
  deferred?: boolean;
}

/** Whether this step's scale can stay on the device (module comment): a device backend, one rank
 * (no all_reduce of the norm), AdamW, and no optimizer state or parameter off the device. */
export function deviceScaleEligible(env: JobView, states: readonly UnitState[]): boolean {
  return env.be.info.name !== "cpu" && env.comm.worldSize === 1 && env.config.optimizer.type !== "Lamb" && states.every((st) => !st.host && !st.paramHost);
}

/** The outcome of a device-path step from Σ (the summed squares of the loss-scaled gradients, read
 * back from deviceScale[2]); the same arithmetic as the host path. */
export function outcomeFromSumSquares(sumsq: number, lsDiv: number, maxNorm: number): StepOutcome {
  const overflow = !Number.isFinite(sumsq);
  const { norm, clipCoef } = unscaleAndClip(overflow ? 0 : sumsq, lsDiv, maxNorm);
  return { gradNorm: overflow ? Number.POSITIVE_INFINITY : norm, overflow, clipCoef: overflow ? 1 : clipCoef };
}

/** View of the summed gradient region the optimizer of `st` updates, and its length. */
export function ownedGrad(st: UnitState): { view: View; n: number } {
  return st.ownedGrad();
}

/** Σ g² of the gradients this rank is responsible for, over all ranks (f64 all_reduce over the
 * world). A replicated state is counted by its group's rank 0 only, so every element counts once
 * (unit-state.ts `countsGradient`, the rule plugins read as `UnitHandle.countsGradient`). */
export async function globalSumSquares(env: JobView, states: readonly UnitState[]): Promise<number> {
  const be = env.be;
  const counted = states.filter((st) => countsGradient(st.plan, st.optimCount, st.unit.trainable));
  let local = 0;
  if (counted.length > 0) {
    const out: Buf = be.alloc("f32", counted.length, "other");
    counted.forEach((st, i) => {
      const g = ownedGrad(st);
      be.sumSquares(g.view, { buf: out, off: i }, g.n);
    });
    const parts = await be.read({ buf: out, off: 0 }, counted.length);
    be.free(out);
    for (let i = 0; i < parts.length; i++) local += parts[i]!;
  }
  const tot = new Float64Array([local]);
  if (env.comm.worldSize > 1) await env.comm.allReduce(tot);
  return tot[0]!;
}

/** Record the local sums of squares into a device buffer (one partial per counted state) and
 * `Backend.clipScale` from them into `out` (3 f32). No host read. */
function deviceClipScale(env: JobView, states: readonly UnitState[], out: View, lsDiv: number, maxNorm: number): void {
  const be = env.be;
  const counted = states.filter((st) => countsGradient(st.plan, st.optimCount, st.unit.trainable));
  const parts: Buf = be.alloc("f32", Math.max(1, counted.length), "other");
  counted.forEach((st, i) => {
    const g = ownedGrad(st);
    be.sumSquares(g.view, { buf: parts, off: i }, g.n);
  });
  be.clipScale({ buf: parts, off: 0 }, counted.length, out, { lsDiv, maxNorm });
  be.free(parts);
}

/** Run one optimizer step over `states` (see the module comment). On overflow nothing is
 * updated. Gradient accumulators are zeroed either way. */
export async function optimizerStep(env: JobView, states: readonly UnitState[], inp: StepInputs): Promise<StepOutcome> {
  if (inp.deviceScale && deviceScaleEligible(env, states)) return deviceOptimizerStep(env, states, inp, inp.deviceScale);
  const be = env.be;
  const sumsq = await globalSumSquares(env, states);
  const overflow = !Number.isFinite(sumsq);
  const { norm, clipCoef } = unscaleAndClip(overflow ? 0 : sumsq, inp.lossScale * inp.gradDivisor, inp.maxNorm);
  if (!overflow) {
    const gradScale = clipCoef / (inp.lossScale * inp.gradDivisor);
    const hp = adamwParams(env, inp, gradScale);
    const lamb = env.config.optimizer.type === "Lamb";
    if (lamb) await lambOptimizerStep(env, states, { lr: inp.lr, step: inp.step, betas: [hp.beta1, hp.beta2], gradScale, gradNorm: norm });
    const offloaded: UnitState[] = [];
    for (const st of lamb ? [] : states) { // LAMB stepped every unit above
      if (st.optimCount === 0 || !st.unit.trainable) continue; // frozen: no step, no weight decay
      if (st.host) {
        offloaded.push(st);
        continue;
      }
      // offload_param with the optimizer on the device: the host shard is copied to the device for the
      // update (paramStorage marks it dirty) and written back to the host right after it
      if (st.paramHost) st.paramStorage();
      adamwDeviceUnit(be, st, env.paramDtype !== "f32", hp);
      if (st.paramHost) await st.evictParams();
    }
    if (offloaded.length > 0) {
      if (!inp.offloadStep) throw new Error(`optimizer: unit ${offloaded[0]!.name}'s states are offloaded but the offload hook has no step`);
      await inp.offloadStep(offloaded, hp);
    }
    await allGatherUpdatedParams(env, states);
  }
  zeroGradients(be, states);
  return { gradNorm: overflow ? Number.POSITIVE_INFINITY : norm, overflow, clipCoef: overflow ? 1 : clipCoef };
}

/** The {@link AdamWParams} of a step with gradient multiplier `gradScale`. */
function adamwParams(env: JobView, inp: StepInputs, gradScale: number): AdamWParams {
  const o = env.config.optimizer.params;
  return {
    lr: inp.lr,
    beta1: (inp.betas ?? o.betas)[0],
    beta2: (inp.betas ?? o.betas)[1],
    eps: o.eps,
    weightDecay: o.weight_decay,
    decoupled: o.adam_w_mode,
    step: inp.step,
    gradScale,
  };
}

/** AdamW on every trainable unit of `states` whose states are on the device. */
function adamwDeviceUnits(env: JobView, states: readonly UnitState[], hp: AdamWParams): void {
  const mixed = env.paramDtype !== "f32";
  for (const st of states) {
    if (st.optimCount === 0 || !st.unit.trainable) continue; // frozen: no step, no weight decay
    adamwDeviceUnit(env.be, st, mixed, hp);
  }
}

/** AdamW on one unit whose optimizer states are on the device: its owned range of the parameter
 * shard (or of the resident data), through the f32 master copy when `mixed` (16-bit parameters).
 * @throws when the unit has neither a parameter shard nor resident data */
function adamwDeviceUnit(be: Backend, st: UnitState, mixed: boolean, hp: AdamWParams): void {
  const u = st.unit;
  const paramBuf = st.paramShard ?? u.data;
  if (!paramBuf) throw new Error(`optimizer: unit ${u.name} has neither a parameter shard nor resident data`);
  const pOff = st.paramShard ? 0 : st.optimStart;
  const param16: View | null = mixed ? { buf: paramBuf, off: pOff } : null;
  const master: View = mixed ? { buf: st.master!, off: 0 } : { buf: paramBuf, off: pOff };
  be.adamw(master, ownedGrad(st).view, { buf: st.m!, off: 0 }, { buf: st.v!, off: 0 }, param16, st.optimCount, hp);
}

/** The device path (module comment): clip scale and AdamW recorded with no host read; the outcome
 * is deferred to the caller's read of Σ. On overflow (Σ inf/NaN) AdamW changes nothing. */
async function deviceOptimizerStep(env: JobView, states: readonly UnitState[], inp: StepInputs, out: View): Promise<StepOutcome> {
  const lsDiv = inp.lossScale * inp.gradDivisor;
  deviceClipScale(env, states, out, lsDiv, inp.maxNorm);
  adamwDeviceUnits(env, states, { ...adamwParams(env, inp, 1), scaleFrom: out });
  await allGatherUpdatedParams(env, states); // nothing at one rank; kept so the paths stay alike
  zeroGradients(env.be, states);
  return { gradNorm: NaN, overflow: false, clipCoef: NaN, deferred: true };
}

/** Zero every gradient accumulator (after the step, applied or skipped). */
function zeroGradients(be: Backend, states: readonly UnitState[]): void {
  for (const st of states) {
    const g = st.gradShard ?? st.gradAcc;
    if (g) be.fill({ buf: g, off: 0 }, 0, g.length);
  }
}

/** Units whose updated-parameter all_gathers are in flight at once after the step. */
const PARAM_GATHER_WINDOW = 4;

/** ZeRO-1/2: parameters are replicated but each rank updated only its shard — all_gather them
 * (frozen units were not updated: nothing to gather). Each unit's all_gather is issued with its
 * shard's device read as input and written back when it completes, up to
 * {@link PARAM_GATHER_WINDOW} units in flight (bounding the host copies held). */
export async function allGatherUpdatedParams(env: JobView, states: readonly UnitState[]): Promise<void> {
  const inFlight: Promise<void>[] = [];
  for (const st of states) {
    const p = st.plan;
    if (p.params !== "replicated" || p.optim !== "sharded" || p.group.size === 1 || p.numel === 0 || !st.unit.trainable) continue;
    const u = st.unit;
    const shard = readPadded(env.be, u.data!, p.shardStart, p.owned, p.shardSize);
    const done = env.comm.allGather(shard, undefined, { group: p.group }).wait().then((full) => env.be.write({ buf: u.data!, off: 0 }, full.subarray(0, p.numel)));
    done.catch(() => undefined); // waited below
    inFlight.push(done);
    if (inFlight.length >= PARAM_GATHER_WINDOW) await inFlight.shift();
  }
  await Promise.all(inFlight);
}

/** Initialise the fp32 master copy from the parameters this rank owns: the device master (mixed
 * precision; a cast on the device) or, for offloaded states, the host master (any precision: the
 * owned range read from the device and widened to f32 exactly). */
export async function initMaster(be: Backend, st: UnitState): Promise<void> {
  if (st.optimCount === 0 || !st.unit.trainable) return;
  const stored = st.paramStorage();
  const src = { buf: stored.buf, off: st.optimStart - stored.start };
  if (st.host) {
    const raw = await be.read(src, st.optimCount);
    let f32: Float32Array;
    if (raw instanceof Uint16Array) {
      const dec = st.unit.dtype === "f16" ? f16ToNumber : bf16ToNumber;
      f32 = new Float32Array(raw.length);
      for (let i = 0; i < raw.length; i++) f32[i] = dec(raw[i]!);
    } else f32 = raw instanceof Float32Array ? raw : Float32Array.from(raw as ArrayLike<number>);
    await st.host.write("master", 0, f32);
    return;
  }
  if (!st.master) return;
  be.cast(src, { buf: st.master, off: 0 }, st.optimCount);
}
