/**
 * The MoE router with DeepSpeed's MoE-layer options (`deepspeed.moe.layer.MoE` / `TopKGate` in
 * `sharded_moe.py`), installed as the model's router through the route hook (`MoERouter` of
 * `@zeromoe/core/nn`, gating then routing). The Hugging Face steps (logits, softmax, top-k,
 * renormalised weights) are core's router blocks (core/src/nn/moe/router.ts); this file adds the
 * DeepSpeed options around them:
 *
 *   gating:
 *   x' = x · U(1−ε, 1+ε)              noisy_gate_policy "Jitter", training only, ε = 1e-2
 *                                     (DeepSpeed `multiplicative_jitter`)
 *   logits = x' · Wᵀ                  [T, E]; clamped to [−v, v] when router_logits_clamp = v
 *   routing:
 *   p = softmax(logits) in f32
 *   choice: top-k of p (ties to the lower expert) — with "RSample" in training, DeepSpeed's Gumbel
 *           trick: k = 1 takes argmax(logits + G); k ≥ 2 takes slot 0 = argmax(p), later slots =
 *           argmax(logits + G) over the experts not yet chosen (G = −log(−log U))
 *   counts = histogram of the flattened [T·k] choices (before drops; DeepSpeed `exp_counts`)
 *   drops:  with drop_tokens, pairs past the capacity (capacity.ts; capacity_factor in training,
 *           eval_capacity_factor in evaluation, at least min_capacity) become −1
 *   weights: aux_loss "mixtral": p_i / Σ_{all k slots} p (Hugging Face; drops just remove pairs);
 *           "switch"/"gshard": k = 1 → p (DeepSpeed top1gating: raw gate), k ≥ 2 → p_i / Σ_{kept
 *           slots} p (DeepSpeed top2gating normalises after capacity masking; a token with every
 *           slot dropped gets weight 0)
 *   losses (per layer, weighted, added to the training loss by the model):
 *     switch: aux_loss_coef · E · Σ_e f_e · P_e, f_e = fraction of the T·k pairs choosing e
 *             (Switch Transformer eq. 4; for k = 1 exactly Fedus et al.)
 *     gshard: aux_loss_coef · E · Σ_e f_e · P_e, f_e = fraction of tokens whose FIRST choice is e
 *             (GShard Algorithm 1 / DeepSpeed `l_aux = mean(me·ce)·E²`)
 *     mixtral: Hugging Face's all-layer formula in mixtral.ts, weighted aux_loss_coef, and only when
 *             the model's `output_router_logits` is true (as in HF) — `mixtralAuxCoef`
 *     z-loss: z_loss_coef · mean_t logsumexp(logits_t)²  (ST-MoE, Zoph et al. 2022)
 *   P_e = mean_t p[t, e] before drops, f_e before drops (DeepSpeed computes both before capacity).
 *
 * With the defaults of a mixtral model (no noise, no clamp, no drops, aux "mixtral") the ops are
 * exactly Hugging Face's (core's `TopKRouter`, the same blocks): bit-identical results.
 * Noise is drawn from a Philox stream keyed by (seed, step, global micro-batch slot
 * micro·world_size + rank, layer): an activation-checkpointing recomputation sees the same noise,
 * and a micro-batch gets the same noise at any world size (a single rank accumulating the slots
 * routes like the ranks of a larger world).
 */
import type { MoeConfig } from "@zeromoe/core/config";
import { chooseExperts, chooseExpertsOnDevice, deferRead, chosenProbs, expertHistogram, expertHistogramDevice, renormalize, routerLogits, routerScores, type GatingRequest, type MoERouter, type RoutingDecision, type RoutingRequest } from "@zeromoe/core/nn";
import { add, clamp, div, empty, fromArray, gatherRows, logSoftmax, mean, mul, reshape, scale, square, streamKey, sub, sum, uniformFill, type Tensor } from "@zeromoe/core/tensor";
import { applyCapacity, expertCapacity } from "./capacity.ts";

/** Router options (the resolved `moe` section plus the model's HF switch). */
export interface GateOptions {
  k: number;
  capacityFactor: number;
  evalCapacityFactor: number;
  minCapacity: number;
  dropTokens: boolean;
  auxLoss: "switch" | "gshard" | "mixtral";
  auxLossCoef: number;
  zLossCoef: number;
  noisyGatePolicy: "Jitter" | "RSample" | null;
  logitsClamp: number | null;
  /** HF `output_router_logits`: whether the "mixtral" aux loss joins the loss. */
  outputRouterLogits: boolean;
}

/** Gate options from a resolved job config. */
export function gateOptionsFromConfig(moe: MoeConfig, outputRouterLogits: boolean): GateOptions {
  return {
    k: moe.k,
    capacityFactor: moe.capacity_factor,
    evalCapacityFactor: moe.eval_capacity_factor,
    minCapacity: moe.min_capacity,
    dropTokens: moe.drop_tokens,
    auxLoss: moe.aux_loss,
    auxLossCoef: moe.aux_loss_coef,
    zLossCoef: moe.z_loss_coef,
    noisyGatePolicy: moe.noisy_gate_policy,
    logitsClamp: moe.router_logits_clamp,
    outputRouterLogits,
  };
}

/** What the gate reports about one layer's routing (to the statistics recorder). */
export interface GateRecord {
  layer: number;
  tokens: number;
  /** Pre-drop picks per expert [E]. */
  counts: Int32Array;
  /** Dropped (token, slot) pairs. */
  dropped: number;
  /** Mean router probability per expert [E] (host). */
  probMean: Float64Array;
  /** Unweighted Switch/GShard aux loss of this layer, or null (mixtral type). */
  aux: number | null;
  /** Unweighted z-loss of this layer, or null when z_loss_coef is 0. */
  zLoss: number | null;
  /** The pre-drop top-k choice [T·k] (expert per (token, slot)), for the pair statistics
   * (pair-stats.ts); absent when the caller did not supply it. */
  indices?: Int32Array;
  /** The choice after capacity drops (−1 = dropped), when any pair was dropped: what the
   * dispatcher sends (the pair statistics' traffic). */
  kept?: Int32Array;
}

/** Where the gate runs: phase (train/eval, backward), step/micro index, rank, world size, seed.
 * `phase` and `micro` are read at every call (the engine's live objects). */
export interface GateContext {
  /** `training` (trainBatch) or evaluation; `backward` while a recomputation runs; `step` = 0-based
   * optimizer step. */
  phase: { readonly training: boolean; readonly backward: boolean; readonly step: number };
  /** Micro-batch index within the step and the count. */
  micro: { readonly index: number; readonly count: number };
  rank: number;
  /** world_size (the noise key uses the global micro-batch slot micro·world_size + rank). */
  worldSize: number;
  seed: number;
  /** Called once per layer per training forward (not during a backward recomputation). */
  observe?: (rec: GateRecord) => void;
}

/** Multiplicative jitter ε (DeepSpeed `multiplicative_jitter(x, epsilon=1e-2)`). */
export const JITTER_EPS = 1e-2;

/** The DeepSpeed-option router (see the module comment). */
export class TopKGate implements MoERouter {
  readonly name = "topk";
  readonly opts: GateOptions;
  private readonly ctx: GateContext;

  constructor(opts: GateOptions, ctx: GateContext) {
    this.opts = opts;
    this.ctx = ctx;
  }

  get mixtralAuxCoef(): number | null {
    return this.opts.auxLoss === "mixtral" && this.opts.outputRouterLogits ? this.opts.auxLossCoef : null;
  }

  private noiseKey(what: string, layer: number): [number, number] {
    const c = this.ctx;
    const slot = c.micro.index * c.worldSize + c.rank;
    return streamKey(c.seed, `moe.${what}/step${c.phase.step}/slot${slot}/layer${layer}`);
  }

  /** Gating: jitter (training, "Jitter"), logits = x'·Wᵀ, clamp (router_logits_clamp). */
  async gating(req: GatingRequest): Promise<Tensor> {
    const o = this.opts;
    const { x, weight, layer } = req;
    const T = x.shape[0]!;
    const H = x.shape[1]!;
    let xin = x;
    if (this.ctx.phase.training && o.noisyGatePolicy === "Jitter") {
      const u = new Float32Array(T * H);
      uniformFill(u, this.noiseKey("jitter", layer), 0, 1 - JITTER_EPS, 1 + JITTER_EPS);
      xin = mul(x, fromArray(x.be, u, [T, H]));
    }
    const logits = routerLogits(xin, weight); // [T, E]
    return o.logitsClamp !== null ? clamp(logits, -o.logitsClamp, o.logitsClamp) : logits;
  }

  /** Routing: softmax, choice, capacity drops, combine weights, losses (module comment). */
  async routing(req: RoutingRequest): Promise<RoutingDecision> {
    const o = this.opts;
    const { logits, numExperts: E, topK: k, layer } = req;
    if (k !== o.k) throw new Error(`moe gate: the model routes top-${k}, moe.k is ${o.k}`);
    const T = logits.shape[0]!;
    const be = logits.be;
    const training = this.ctx.phase.training;
    const probs = routerScores(logits, req.scoreFunc);
    // enqueued before the choice is read, so that read's flush also completes it
    const pMean = mean(probs, 0); // [E]
    // ---- the device path: plain top-k, no drops, HF's weights — nothing is read back here ----
    const rsample = training && o.noisyGatePolicy === "RSample";
    if (!rsample && !o.dropTokens && o.auxLoss === "mixtral") return this.routeOnDevice(req, probs, pMean);
    // ---- choice (host) ----
    let chosen: Int32Array;
    if (rsample) {
      const p = await probs.toArray();
      const lg = await logits.toArray();
      const u = new Float64Array(T * E);
      uniformFill(u, this.noiseKey("gumbel", layer), 0);
      if (req.selectionBias || req.groupLimit || req.scoreFunc === "sigmoid") throw new Error(`moe gate: noisy_gate_policy "RSample" cannot be combined with the model's ${req.scoreFunc === "sigmoid" ? "sigmoid scores" : "biased or group-limited"} routing (layer ${layer}); use noisy_gate_policy null or Jitter`);
      chosen = rsampleChoice(p, lg, u, T, E, k);
    } else {
      chosen = await chooseExperts(probs, req);
    }
    const counts = expertHistogram(chosen, E);
    // ---- capacity ----
    let routed = chosen;
    let dropped = 0;
    if (o.dropTokens) {
      const C = expertCapacity(T, E, k, training ? o.capacityFactor : o.evalCapacityFactor, o.minCapacity);
      const r = applyCapacity(chosen, T, k, E, C);
      routed = r.indices;
      dropped = r.dropped;
    }
    // ---- combine weights ----
    const picked = chosenProbs(probs, chosen, k);
    let weights: Tensor;
    if (o.auxLoss === "mixtral") weights = req.normTopkProb === false ? picked : renormalize(picked);
    else if (k === 1) weights = picked;
    else if (dropped === 0) weights = renormalize(picked);
    else {
      const keep = new Float32Array(T * k);
      const fix = new Float32Array(T);
      for (let t = 0; t < T; t++) {
        let any = false;
        for (let s = 0; s < k; s++) if (routed[t * k + s] !== -1) { keep[t * k + s] = 1; any = true; }
        if (!any) fix[t] = 1;
      }
      const masked = mul(picked, fromArray(be, keep, [T, k]));
      weights = div(masked, add(sum(masked, -1, true), fromArray(be, fix, [T, 1])));
    }
    // ---- losses ----
    let loss: Tensor | null = null;
    let auxVal: number | null = null;
    let zVal: number | null = null;
    if (o.auxLoss !== "mixtral") {
      const f = new Float64Array(E);
      if (o.auxLoss === "switch") for (let e = 0; e < E; e++) f[e] = counts[e]! / (T * k);
      else for (let t = 0; t < T; t++) f[chosen[t * k]!]! += 1 / T;
      const aux = scale(sum(mul(pMean, fromArray(be, f, [E]))), E);
      if (this.observing()) auxVal = (await aux.toArray())[0]!;
      if (o.auxLossCoef > 0) loss = scale(aux, o.auxLossCoef);
    }
    if (o.zLossCoef > 0) {
      // logsumexp(logits_t) = logits_t0 − logSoftmax(logits)_t0, taken at column 0 of each row
      const lse = sub(logits, logSoftmax(logits));
      const col0 = Int32Array.from({ length: T }, (_, t) => t * E);
      const lse0 = gatherRows(reshape(lse, [T * E, 1]), fromArray(be, col0, [T], "i32"));
      const z = mean(square(lse0));
      if (this.observing()) zVal = (await z.toArray())[0]!;
      const zw = scale(z, o.zLossCoef);
      loss = loss ? add(loss, zw) : zw;
    }
    if (this.observing()) {
      const pm = await pMean.toArray();
      this.ctx.observe!({ layer, tokens: T, counts, dropped, probMean: Float64Array.from(pm as Float32Array), aux: auxVal, zLoss: zVal, indices: chosen, ...(dropped > 0 ? { kept: routed } : {}) });
    }
    const f = req.routedScalingFactor ?? 1;
    if (f !== 1) weights = scale(weights, f);
    return { topkIndices: routed, topkWeights: reshape(weights, [T * k]), probs, counts, loss };
  }

  /** Routing with the choice kept on the device (no capacity drops, aux type "mixtral"): top-k on the
   * device (router.ts chooseExpertsOnDevice; the host only for a selection bias or group limit),
   * counts by a device histogram, the z-loss as on the host path; the statistics for `observe` are
   * read later, batched with every layer's (core's deferRead: at the end of the forward, or when the
   * step is reduced) — the same values as the host path, bit for bit on the cpu backend. */
  private async routeOnDevice(req: RoutingRequest, probs: Tensor, pMean: Tensor): Promise<RoutingDecision> {
    const o = this.opts;
    const { logits, numExperts: E, topK: k, layer } = req;
    const T = logits.shape[0]!;
    const be = logits.be;
    const { host, device } = await chooseExpertsOnDevice(probs, req);
    const picked = chosenProbs(probs, host ?? device, k);
    let weights = req.normTopkProb === false ? picked : renormalize(picked);
    const counts = host ? expertHistogram(host, E) : null;
    const countsDevice = counts ? null : expertHistogramDevice(device, E);
    let loss: Tensor | null = null;
    let z: Tensor | null = null;
    if (o.zLossCoef > 0) {
      const lse = sub(logits, logSoftmax(logits));
      const col0 = Int32Array.from({ length: T }, (_, t) => t * E);
      const lse0 = gatherRows(reshape(lse, [T * E, 1]), fromArray(be, col0, [T], "i32"));
      z = mean(square(lse0));
      loss = scale(z, o.zLossCoef);
    }
    if (this.observing()) {
      // read later, batched with the other layers' (the model's end-of-forward read, or the step's
      // reduction): core readback.ts deferRead
      const observe = this.ctx.observe!;
      // the choice too when it lives on the device (T·k Int32, for the pair statistics): a copy,
      // since the deferred read disposes what it reads and the backward still needs `device`
      let choice: Tensor | null = null;
      if (countsDevice) {
        choice = empty(be, [T * k], "i32");
        if (T * k > 0) be.copy(device.view, choice.view, T * k);
      }
      const ts = [pMean, ...(z ? [z] : []), ...(countsDevice ? [countsDevice, choice!] : [])];
      deferRead(ts, (v) => {
        const c = counts ?? Int32Array.from(v[z ? 2 : 1]!);
        const indices = host ?? Int32Array.from(v[z ? 3 : 2]!);
        observe({ layer, tokens: T, counts: c, dropped: 0, probMean: Float64Array.from(v[0]!), aux: null, zLoss: z ? Number(v[1]![0]) : null, indices });
      });
    }
    const f = req.routedScalingFactor ?? 1;
    if (f !== 1) weights = scale(weights, f);
    return { topkIndices: host, expertIndices: host ? null : device, topkWeights: reshape(weights, [T * k]), probs, counts, expertCounts: countsDevice, loss };
  }

  /** Statistics are recorded in training forwards only (not evaluation, not recomputation). */
  private observing(): boolean {
    return !!this.ctx.observe && this.ctx.phase.training && !this.ctx.phase.backward;
  }
}

/**
 * DeepSpeed's RSample choice (see the module comment) on host arrays: p and logits [T, E], u [T·E]
 * uniform samples in [0, 1). Ties go to the lower expert. Returns [T·k].
 */
export function rsampleChoice(p: ArrayLike<number>, logits: ArrayLike<number>, u: ArrayLike<number>, T: number, E: number, k: number): Int32Array {
  const out = new Int32Array(T * k);
  const noisy = new Float64Array(E);
  for (let t = 0; t < T; t++) {
    for (let e = 0; e < E; e++) {
      const uu = Math.min(Math.max(u[t * E + e]!, 1e-12), 1 - 1e-12);
      noisy[e] = logits[t * E + e]! - Math.log(-Math.log(uu));
    }
    const taken = new Set<number>();
    for (let s = 0; s < k; s++) {
      const useClean = k > 1 && s === 0;
      let best = -1;
      for (let e = 0; e < E; e++) {
        if (taken.has(e)) continue;
        const v = useClean ? p[t * E + e]! : noisy[e]!;
        const bv = best < 0 ? -Infinity : useClean ? p[t * E + best]! : noisy[best]!;
        if (best < 0 || v > bv) best = e;
      }
      taken.add(best);
      out[t * k + s] = best;
    }
  }
  return out;
}
