/**
 * The engine's LAMB step over the units of a rank (optimizer.type "Lamb"; algorithm and sources in
 * lamb-step.ts). Called by engine/optimizer.ts in place of the fused AdamW step, after the global
 * gradient norm, overflow check and clip; ZeRO-1/2's all_gather of updated parameters follows there.
 *
 * Collectives: one f64 all_reduce of 2 × (tensors of the unit) values per unit whose optimizer
 * states are sharded over a group of more than one rank, in unit order on every member — the same
 * order and condition as the parameter all_gather, so members agree even when a rank owns nothing
 * of a unit.
 */
import type { Buf, LambParams, View } from "@zeromoe/kernels";
import type { JobView } from "../engine/plugin-context.ts";
import type { UnitState } from "../engine/unit-state.ts";
import { lambApply, lambPartials, lambPieces, lambStepSize, trustRatio, type LambRange } from "./lamb-step.ts";

/** Inputs of {@link lambOptimizerStep}. */
export interface LambStepInputs {
  lr: number;
  /** 1-based applied step (bias correction). */
  step: number;
  betas: readonly [number, number];
  /** Gradient multiplier already folding 1/(loss scale · accumulation · world size) and gradient_clipping. */
  gradScale: number;
  /** Global L2 norm of the averaged, unscaled gradients (for max_grad_norm). */
  gradNorm: number;
}

/** Apply one LAMB step to the trainable, device-resident units of `states`.
 * @throws when a unit's optimizer states are offloaded (config refuses that combination). */
export async function lambOptimizerStep(env: JobView, states: readonly UnitState[], inp: LambStepInputs): Promise<void> {
  const be = env.be;
  const o = env.config.optimizer.params;
  const maxGradNorm = o.max_grad_norm ?? 0;
  let gradScale = inp.gradScale;
  if (maxGradNorm > 0) {
    // DeepSpeed FusedLamb.step: clip = (‖g‖ + 1e-6) / max_grad_norm, gradients divided by it when > 1
    const clip = (inp.gradNorm + 1e-6) / maxGradNorm;
    if (clip > 1) gradScale /= clip;
  }
  const hp: LambParams = { beta1: inp.betas[0], beta2: inp.betas[1], eps: o.eps, epsInsideSqrt: o.eps_inside_sqrt ?? false, weightDecay: o.weight_decay, gradScale };
  const stepSize = lambStepSize(inp.lr, inp.betas[0], inp.betas[1], inp.step, o.bias_correction ?? true);
  const minCoeff = o.min_coeff ?? 0.01;
  const maxCoeff = o.max_coeff ?? 10;
  const mixed = env.paramDtype !== "f32";

  interface Entry { st: UnitState; r: LambRange | null; sumsOff: number; param16: View | null }
  const entries: Entry[] = [];
  let totalPieces = 0;
  for (const st of states) {
    const u = st.unit;
    if (!u.trainable || st.plan.numel === 0) continue; // frozen: no step
    if (st.host) throw new Error(`optimizer: unit ${u.name}'s states are offloaded; optimizer.type "Lamb" runs on the device only`);
    const n = st.optimCount;
    if (n === 0) {
      entries.push({ st, r: null, sumsOff: totalPieces, param16: null }); // owns nothing; still joins the all_reduce
      continue;
    }
    const pieces = lambPieces(u.params, st.optimStart, n);
    const paramBuf = st.paramShard ?? u.data;
    if (!paramBuf) throw new Error(`optimizer: unit ${u.name} has neither a parameter shard nor resident data`);
    const pOff = st.paramShard ? 0 : st.optimStart;
    const master: View = mixed ? { buf: st.master!, off: 0 } : { buf: paramBuf, off: pOff };
    const r: LambRange = { master, grad: st.ownedGrad().view, m: { buf: st.m!, off: 0 }, v: { buf: st.v!, off: 0 }, n, pieces };
    entries.push({ st, r, sumsOff: totalPieces, param16: mixed ? { buf: paramBuf, off: pOff } : null });
    totalPieces += pieces.length;
  }
  if (entries.length === 0) return;

  // phase 1 on the device: moments, update, per-piece Σp² and Σu²
  const sums: Buf | null = totalPieces > 0 ? be.alloc("f32", 2 * totalPieces, "other") : null;
  const upds: (Buf | null)[] = entries.map((e) => (e.r === null ? null : lambPartials(be, e.r, hp, { buf: sums!, off: 2 * e.sumsOff })));
  const local = sums ? await be.read({ buf: sums, off: 0 }, 2 * totalPieces) : new Float32Array(0);
  if (sums) be.free(sums);

  // per-tensor sums over the unit's group, trust ratios, phase 2 on the device
  for (let i = 0; i < entries.length; i++) {
    const { st, r, sumsOff, param16 } = entries[i]!;
    const tensors = st.unit.params.length;
    const tot = new Float64Array(2 * tensors);
    r?.pieces.forEach((pc, k) => {
      tot[2 * pc.tensor] = local[2 * (sumsOff + k)]!;
      tot[2 * pc.tensor + 1] = local[2 * (sumsOff + k) + 1]!;
    });
    const p = st.plan;
    if (p.optim === "sharded" && p.group.size > 1) await env.comm.allReduce(tot, { group: p.group });
    const upd = upds[i];
    if (!upd || !r) continue;
    const ratios = new Float64Array(tensors);
    for (let t = 0; t < tensors; t++) ratios[t] = trustRatio(tot[2 * t]!, tot[2 * t + 1]!, minCoeff, maxCoeff);
    lambApply(be, r, upd, ratios, stepSize);
    if (param16) be.cast(r.master, param16, r.n);
    be.free(upd);
  }
}
