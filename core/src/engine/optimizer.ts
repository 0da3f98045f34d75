/**
 * The optimizer step on the shards each rank owns (design.md "One training step", after the last
 * micro-batch): global gradient norm over all ranks → overflow check → clip → fused AdamW on owned
 * ranges → all_gather of updated parameters where parameters are replicated but optimizer states
 * are sharded (ZeRO-1/2). Under ZeRO-3 parameters stay sharded.
 *
 * Gradients arrive *summed* over ranks and micro-batches (reduce hook); AdamW's `gradScale`
 * multiplies them by clipCoef / (lossScale · accumulation · world_size), so every stage applies the
 * same arithmetic to the same values (domain.md §5).
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
}

/** Outcome of one optimizer step. */
export interface StepOutcome {
  /** Global L2 norm of the averaged, unscaled gradients (NaN/inf on overflow). */
  gradNorm: number;
  /** True when the step was skipped because gradients held inf/NaN. */
  overflow: boolean;
  clipCoef: number;
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

/** Run one optimizer step over `states` (see the module comment). On overflow nothing is
 * updated. Gradient accumulators are zeroed either way. */
export async function optimizerStep(env: JobView, states: readonly UnitState[], inp: StepInputs): Promise<StepOutcome> {
  const be = env.be;
  const sumsq = await globalSumSquares(env, states);
  const overflow = !Number.isFinite(sumsq);
  const { norm, clipCoef } = unscaleAndClip(overflow ? 0 : sumsq, inp.lossScale * inp.gradDivisor, inp.maxNorm);
  if (!overflow) {
    const o = env.config.optimizer.params;
    const gradScale = clipCoef / (inp.lossScale * inp.gradDivisor);
    const mixed = env.paramDtype !== "f32";
    const hp: AdamWParams = {
      lr: inp.lr,
      beta1: (inp.betas ?? o.betas)[0],
      beta2: (inp.betas ?? o.betas)[1],
      eps: o.eps,
      weightDecay: o.weight_decay,
      decoupled: o.adam_w_mode,
      step: inp.step,
      gradScale,
    };
    const lamb = env.config.optimizer.type === "Lamb";
    if (lamb) await lambOptimizerStep(env, states, { lr: inp.lr, step: inp.step, betas: [hp.beta1, hp.beta2], gradScale, gradNorm: norm });
    const offloaded: UnitState[] = [];
    for (const st of lamb ? [] : states) { // LAMB stepped every unit above
      const n = st.optimCount;
      if (n === 0 || !st.unit.trainable) continue; // frozen: no step, no weight decay
      if (st.host) {
        offloaded.push(st);
        continue;
      }
      const u = st.unit;
      // offload_param with the optimizer on the device: the host shard is copied to the device for the
      // update (paramStorage marks it dirty) and written back to the host right after it
      if (st.paramHost) st.paramStorage();
      const paramBuf = st.paramShard ?? u.data;
      if (!paramBuf) throw new Error(`optimizer: unit ${u.name} has neither a parameter shard nor resident data`);
      const pOff = st.paramShard ? 0 : st.optimStart;
      const param16: View | null = mixed ? { buf: paramBuf, off: pOff } : null;
      const master: View = mixed ? { buf: st.master!, off: 0 } : { buf: paramBuf, off: pOff };
      be.adamw(master, ownedGrad(st).view, { buf: st.m!, off: 0 }, { buf: st.v!, off: 0 }, param16, n, hp);
      if (st.paramHost) await st.evictParams();
    }
    if (offloaded.length > 0) {
      if (!inp.offloadStep) throw new Error(`optimizer: unit ${offloaded[0]!.name}'s states are offloaded but the offload hook has no step`);
      await inp.offloadStep(offloaded, hp);
    }
    await allGatherUpdatedParams(env, states);
  }
  for (const st of states) {
    const g = st.gradShard ?? st.gradAcc;
    if (g) be.fill({ buf: g, off: 0 }, 0, g.length);
  }
  return { gradNorm: overflow ? Number.POSITIVE_INFINITY : norm, overflow, clipCoef: overflow ? 1 : clipCoef };
}

/** ZeRO-1/2: parameters are replicated but each rank updated only its shard — all_gather them
 * (frozen units were not updated: nothing to gather). */
export async function allGatherUpdatedParams(env: JobView, states: readonly UnitState[]): Promise<void> {
  for (const st of states) {
    const p = st.plan;
    if (p.params !== "replicated" || p.optim !== "sharded" || p.group.size === 1 || p.numel === 0 || !st.unit.trainable) continue;
    const u = st.unit;
    const shard = await readPadded(env.be, u.data!, p.shardStart, p.owned, p.shardSize);
    const full = await env.comm.allGather(shard, undefined, { group: p.group });
    env.be.write({ buf: u.data!, off: 0 }, full.subarray(0, p.numel));
  }
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
