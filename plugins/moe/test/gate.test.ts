/**
 * The DeepSpeed-option gate (gate.ts, capacity.ts) against independent host references:
 * - defaults reproduce Hugging Face Mixtral: the HF fixture (logits, loss with aux, aux, every
 *   gradient) matches, and bit-identically the model's built-in router;
 * - capacity and drops: the dropped (token, slot) pairs and the block output equal a float64 host
 *   reference of the documented rule (slot-major, then token priority), for aux types mixtral,
 *   switch (k = 1) and gshard (k = 2);
 * - Switch/GShard aux and z-loss values equal host formulas; their gradient w.r.t. the router
 *   weight matches central finite differences (float64 cpu backend);
 * - noise: Jitter/RSample only in training, deterministic per (step, micro, layer), RSample's rule;
 * - logit clamping: values and gradient mask.
 */
import { describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { CpuBackend, type Backend } from "@zeromoe/kernels";
import { MixtralForCausalLM, mixtralConfig } from "@zeromoe/core/models";
import { readGrad, readParam, type MoERouter, type RoutingDecision, type StateDict } from "@zeromoe/core/nn";
import { Variable, add, backward, clamp, fromArray, mul, noGrad, normalFill, streamKey, sum, type Tensor } from "@zeromoe/core/tensor";
import { maxRelativeError as relErr, readSafetensors } from "@zeromoe/core/testing";
import { TopKGate, expertCapacity, rsampleChoice, type GateContext, type GateOptions } from "../src/index.ts";
import { readFileSync } from "node:fs";

const FIX = "core/test/fixtures/mixtral";

function randn(n: number, name: string, std = 1): Float32Array {
  const a = new Float32Array(n);
  normalFill(a, streamKey(5, name), 0, std);
  return a;
}

function opts(over: Partial<GateOptions> = {}): GateOptions {
  return { k: 2, capacityFactor: 1, evalCapacityFactor: 1, minCapacity: 4, dropTokens: false, auxLoss: "mixtral", auxLossCoef: 0.02, zLossCoef: 0, noisyGatePolicy: null, logitsClamp: null, outputRouterLogits: true, ...over };
}

function ctx(training = true, step = 0, micro = 0): GateContext {
  return { phase: { training, backward: false, step }, micro: { index: micro, count: 1 }, rank: 0, worldSize: 1, seed: 3 };
}

/** One layer through a router: gating, then routing. */
async function routeOnce(r: MoERouter, req: { layer: number; x: Tensor; weight: Tensor; numExperts: number; topK: number }): Promise<RoutingDecision> {
  const logits = await r.gating(req);
  return r.routing({ layer: req.layer, logits, numExperts: req.numExperts, topK: req.topK });
}

/** The decision's choices on the host (read from the device when the gate kept them there). */
async function hostChoices(d: RoutingDecision): Promise<Int32Array> {
  return d.topkIndices ?? Int32Array.from(await d.expertIndices!.toArray());
}

describe("defaults reproduce Hugging Face Mixtral", () => {
  test("HF fixture through the gate: logits, loss with aux, aux, all gradients; bit-identical to the built-in router", async () => {
    const config = mixtralConfig(JSON.parse(readFileSync(`${FIX}/config.json`, "utf8")));
    const weights = readSafetensors(`${FIX}/model.safetensors`) as unknown as StateDict;
    const expected = readSafetensors(`${FIX}/expected.safetensors`);
    const inputs = JSON.parse(readFileSync(`${FIX}/inputs.json`, "utf8")) as { input_ids: number[][]; labels: number[][] };
    const run = async (withGate: boolean) => {
      const be = new CpuBackend();
      const model = new MixtralForCausalLM(be, config);
      model.loadStateDict(weights);
      if (withGate) model.moe.router = new TopKGate(opts({ k: config.num_experts_per_tok, auxLossCoef: config.router_aux_loss_coef }), ctx());
      const out = await model.forward({ inputIds: inputs.input_ids.flat(), labels: inputs.labels.flat(), batch: 2, seq: 7, returnLogits: true });
      const logits = await out.logits!.toArray();
      const loss = await out.loss!.item();
      const aux = await model.lastAuxLoss!.item();
      await backward(out.loss!);
      const grads = new Map<string, ArrayLike<number>>();
      for (const p of model.parameters()) grads.set(p.name, (await readGrad(p))!.data);
      return { logits, loss, aux, grads };
    };
    const g = await run(true);
    const ref = await run(false);
    expect(relErr(g.logits, expected.get("logits")!.data)).toBeLessThan(1e-4);
    expect(Math.abs(g.loss - expected.get("loss")!.data[0]!) / Math.abs(expected.get("loss")!.data[0]!)).toBeLessThan(1e-4);
    expect(Math.abs(g.aux - expected.get("aux_loss")!.data[0]!) / expected.get("aux_loss")!.data[0]!).toBeLessThan(1e-4);
    for (const [name, v] of g.grads) expect(relErr(v, expected.get(`grad.${name}`)!.data)).toBeLessThan(1e-3);
    // bit-identical to the model's own router
    expect(Array.from(g.logits)).toEqual(Array.from(ref.logits));
    expect(g.loss).toBe(ref.loss);
    for (const [name, v] of g.grads) expect(Array.from(v)).toEqual(Array.from(ref.grads.get(name)!));
  });
});

/** A tiny mixtral whose layer-0 MoE block the tests call directly. */
function tinyModel(be: Backend, E: number, k: number): MixtralForCausalLM {
  return new MixtralForCausalLM(be, mixtralConfig({ vocab_size: 11, hidden_size: 9, intermediate_size: 6, num_hidden_layers: 1, num_attention_heads: 3, num_key_value_heads: 1, head_dim: 4, num_local_experts: E, num_experts_per_tok: k, max_position_embeddings: 16 }), { seed: 17 });
}

/** Host float64 reference of routing + capacity + combine (module comment of gate.ts/capacity.ts). */
async function reference(model: MixtralForCausalLM, x: Float32Array, T: number, E: number, k: number, o: GateOptions) {
  const H = 9;
  const I = 6;
  const W = (await readParam(model.param("model.layers.0.block_sparse_moe.gate.weight"))).data as Float32Array;
  const p = new Float64Array(T * E);
  const logits = new Float64Array(T * E);
  for (let t = 0; t < T; t++) {
    let m = -Infinity;
    for (let e = 0; e < E; e++) {
      let s = 0;
      for (let h = 0; h < H; h++) s += x[t * H + h]! * W[e * H + h]!;
      logits[t * E + e] = s;
      m = Math.max(m, s);
    }
    let z = 0;
    for (let e = 0; e < E; e++) z += Math.exp(logits[t * E + e]! - m);
    for (let e = 0; e < E; e++) p[t * E + e] = Math.exp(logits[t * E + e]! - m) / z;
  }
  const chosen = new Int32Array(T * k);
  for (let t = 0; t < T; t++) {
    const order = Array.from({ length: E }, (_, e) => e).sort((a, b) => p[t * E + b]! - p[t * E + a]! || a - b);
    for (let s = 0; s < k; s++) chosen[t * k + s] = order[s]!;
  }
  const C = o.dropTokens ? Math.max(o.minCapacity, Math.ceil((T / E) * (o.capacityFactor * k))) : Infinity;
  const kept = chosen.map(() => 0);
  const load = new Array<number>(E).fill(0);
  for (let s = 0; s < k; s++) for (let t = 0; t < T; t++) {
    const e = chosen[t * k + s]!;
    if (load[e]! < C) { load[e]!++; kept[t * k + s] = 1; }
  }
  const idx = chosen.map((e, i) => (kept[i] ? e : -1));
  // combine weights
  const w = new Float64Array(T * k);
  for (let t = 0; t < T; t++) {
    let den = 0;
    for (let s = 0; s < k; s++) {
      const ps = p[t * E + chosen[t * k + s]!]!;
      if (o.auxLoss === "mixtral" || kept[t * k + s]) den += ps;
    }
    for (let s = 0; s < k; s++) {
      const ps = p[t * E + chosen[t * k + s]!]!;
      w[t * k + s] = o.auxLoss !== "mixtral" && k === 1 ? ps : den > 0 ? ps / den : 0;
    }
  }
  const experts: { w1: Float32Array; w2: Float32Array; w3: Float32Array }[] = [];
  for (let e = 0; e < E; e++) {
    const P = async (n: string) => (await readParam(model.param(`model.layers.0.block_sparse_moe.experts.${e}.${n}.weight`))).data as Float32Array;
    experts.push({ w1: await P("w1"), w2: await P("w2"), w3: await P("w3") });
  }
  const out = new Float64Array(T * H);
  for (let t = 0; t < T; t++) for (let s = 0; s < k; s++) {
    if (!kept[t * k + s]) continue;
    const ex = experts[chosen[t * k + s]!]!;
    const a = new Float64Array(I);
    for (let i = 0; i < I; i++) {
      let g = 0;
      let u = 0;
      for (let h = 0; h < H; h++) {
        g += ex.w1[i * H + h]! * x[t * H + h]!;
        u += ex.w3[i * H + h]! * x[t * H + h]!;
      }
      a[i] = (g / (1 + Math.exp(-g))) * u;
    }
    for (let h = 0; h < H; h++) {
      let y = 0;
      for (let i = 0; i < I; i++) y += ex.w2[h * I + i]! * a[i]!;
      out[t * H + h]! += w[t * k + s]! * y;
    }
  }
  // losses
  const counts = new Array<number>(E).fill(0);
  for (const e of chosen) counts[e]!++;
  const pm = new Array<number>(E).fill(0);
  for (let t = 0; t < T; t++) for (let e = 0; e < E; e++) pm[e]! += p[t * E + e]! / T;
  const f = new Array<number>(E).fill(0);
  if (o.auxLoss === "switch") counts.forEach((c, e) => (f[e] = c / (T * k)));
  else for (let t = 0; t < T; t++) f[chosen[t * k]!]! += 1 / T;
  let aux = 0;
  for (let e = 0; e < E; e++) aux += f[e]! * pm[e]!;
  aux *= E;
  let zl = 0;
  for (let t = 0; t < T; t++) {
    let m = -Infinity;
    for (let e = 0; e < E; e++) m = Math.max(m, logits[t * E + e]!);
    let s = 0;
    for (let e = 0; e < E; e++) s += Math.exp(logits[t * E + e]! - m);
    zl += (m + Math.log(s)) ** 2 / T;
  }
  return { idx, out, counts, aux, zl, C };
}

describe("capacity and drops equal a float64 reference of the documented rule", () => {
  const cases: { name: string; E: number; k: number; o: Partial<GateOptions> }[] = [
    { name: "mixtral weights, k = 2, capacity_factor 0.75", E: 5, k: 2, o: { dropTokens: true, capacityFactor: 0.75, minCapacity: 1 } },
    { name: "switch, k = 1 (raw gate weight), capacity_factor 1.0", E: 5, k: 1, o: { auxLoss: "switch", dropTokens: true, capacityFactor: 1.0, minCapacity: 1 } },
    { name: "gshard, k = 2 (renormalised over kept slots), capacity_factor 0.6", E: 5, k: 2, o: { auxLoss: "gshard", dropTokens: true, capacityFactor: 0.6, minCapacity: 2 } },
    { name: "k = 3 of 7 experts, min_capacity dominates", E: 7, k: 3, o: { auxLoss: "switch", dropTokens: true, capacityFactor: 0.1, minCapacity: 3 } },
  ];
  for (const c of cases) {
    test(c.name, async () => {
      const be = new CpuBackend();
      const model = tinyModel(be, c.E, c.k);
      const o = opts({ k: c.k, ...c.o });
      model.moe.router = new TopKGate(o, ctx());
      const T = 13;
      const xh = randn(T * 9, `x-${c.name}`);
      const ref = await reference(model, xh, T, c.E, c.k, o);
      const { out, idx } = await noGrad(async () => {
        const x = fromArray(be, xh, [T, 9]);
        const d = await routeOnce(model.moe.router, { layer: 0, x, weight: model.param("model.layers.0.block_sparse_moe.gate.weight").tensor, numExperts: c.E, topK: c.k });
        const r = await model.sparseMoeBlock(0, x);
        return { out: await r.output.toArray(), idx: d.topkIndices!, counts: r.expertCounts };
      });
      expect(Array.from(idx)).toEqual(Array.from(ref.idx));
      const dropped = Array.from(idx).filter((e) => e === -1).length;
      expect(dropped).toBeGreaterThan(0);
      expect(dropped).toBeLessThan(T * c.k);
      expect(ref.C).toBe(expertCapacity(T, c.E, c.k, o.capacityFactor, o.minCapacity));
      expect(relErr(out, ref.out)).toBeLessThan(1e-5);
    });
  }

  test("drop_tokens false: nothing dropped; eval uses eval_capacity_factor", async () => {
    const be = new CpuBackend();
    const model = tinyModel(be, 5, 2);
    const x = fromArray(be, randn(13 * 9, "x-eval"), [13, 9]);
    const w = model.param("model.layers.0.block_sparse_moe.gate.weight").tensor;
    const run = (o: GateOptions, training: boolean) => noGrad(() => routeOnce(new TopKGate(o, ctx(training)), { layer: 0, x, weight: w, numExperts: 5, topK: 2 }));
    expect(Array.from(await hostChoices(await run(opts({ capacityFactor: 0.1, minCapacity: 0 }), true))).includes(-1)).toBe(false);
    const o = opts({ dropTokens: true, capacityFactor: 0.3, evalCapacityFactor: 10, minCapacity: 1 });
    expect(Array.from(await hostChoices(await run(o, true))).includes(-1)).toBe(true);
    expect(Array.from(await hostChoices(await run(o, false))).includes(-1)).toBe(false);
  });
});

describe("aux and z losses", () => {
  for (const aux of ["switch", "gshard"] as const) {
    test(`${aux} aux loss and z-loss values match the host formulas; weighted sum is the gate's loss`, async () => {
      const be = new CpuBackend();
      const model = tinyModel(be, 5, 2);
      const o = opts({ auxLoss: aux, auxLossCoef: 0.3, zLossCoef: 0.07 });
      const recs: { aux: number | null; zLoss: number | null }[] = [];
      model.moe.router = new TopKGate(o, { ...ctx(), observe: (r) => recs.push(r) });
      const xh = randn(13 * 9, `x-aux-${aux}`);
      const ref = await reference(model, xh, 13, 5, 2, o);
      const loss = await noGrad(async () => {
        const d = await routeOnce(model.moe.router, { layer: 0, x: fromArray(be, xh, [13, 9]), weight: model.param("model.layers.0.block_sparse_moe.gate.weight").tensor, numExperts: 5, topK: 2 });
        return d.loss!.item();
      });
      expect(Math.abs(recs[0]!.aux! - ref.aux) / ref.aux).toBeLessThan(1e-5);
      expect(Math.abs(recs[0]!.zLoss! - ref.zl) / ref.zl).toBeLessThan(1e-5);
      expect(Math.abs(loss - (0.3 * ref.aux + 0.07 * ref.zl)) / loss).toBeLessThan(1e-5);
    });
  }

  test("gradient of (aux + z-loss + combine weights) w.r.t. the router weight matches finite differences (float64)", async () => {
    const be = new CpuBackend({ precision: "f64" });
    const E = 4;
    const H = 5;
    const T = 7;
    const xh = Float64Array.from(randn(T * H, "fd-x"));
    const wh = Float64Array.from(randn(E * H, "fd-w", 0.5));
    const r = Float64Array.from(randn(T * 2, "fd-r"));
    const o = opts({ auxLoss: "gshard", auxLossCoef: 0.5, zLossCoef: 0.2, dropTokens: true, capacityFactor: 0.8, minCapacity: 1 });
    const scalar = async (wv: Variable, grad: boolean): Promise<number> => {
      const f = async () => {
        const d = await routeOnce(new TopKGate(o, ctx()), { layer: 0, x: fromArray(be, xh, [T, H]), weight: wv.tensor, numExperts: E, topK: 2 });
        const l = sum(mul(d.topkWeights, fromArray(be, r, [T * 2])));
        return d.loss ? add(l, d.loss) : l;
      };
      if (!grad) return noGrad(async () => (await f()).item());
      const l = await f();
      const v = await l.item();
      await backward(l);
      return v;
    };
    const wv = new Variable(be, wh, [E, H], { name: "gate" });
    await scalar(wv, true);
    const g = await wv.grad();
    const eps = 1e-6;
    let worst = 0;
    for (const i of [0, 3, 7, 11, 19]) {
      const plus = Float64Array.from(wh);
      plus[i]! += eps;
      const minus = Float64Array.from(wh);
      minus[i]! -= eps;
      const fp = await scalar(new Variable(be, plus, [E, H]), false);
      const fm = await scalar(new Variable(be, minus, [E, H]), false);
      const fd = (fp - fm) / (2 * eps);
      worst = Math.max(worst, Math.abs(fd - Number(g[i])) / Math.max(1e-6, Math.abs(fd)));
    }
    expect(worst).toBeLessThan(1e-5);
  });
});

describe("noisy gating and clamping", () => {
  test("Jitter and RSample act only in training, are deterministic per (step, micro-batch, layer)", async () => {
    const be = new CpuBackend();
    const model = tinyModel(be, 6, 2);
    const x = fromArray(be, randn(40 * 9, "x-noise"), [40, 9]);
    const w = model.param("model.layers.0.block_sparse_moe.gate.weight").tensor;
    const idx = (o: GateOptions, c: GateContext) => noGrad(async () => Array.from(await hostChoices(await routeOnce(new TopKGate(o, c), { layer: 0, x, weight: w, numExperts: 6, topK: 2 }))));
    for (const policy of ["Jitter", "RSample"] as const) {
      const o = opts({ noisyGatePolicy: policy });
      const clean = await idx(opts(), ctx());
      expect(await idx(o, ctx(false))).toEqual(clean);
      const a = await idx(o, ctx(true, 4, 1));
      expect(await idx(o, ctx(true, 4, 1))).toEqual(a);
      if (policy === "RSample") {
        expect(a).not.toEqual(clean);
        // slot 0 is the clean argmax for k ≥ 2
        for (let t = 0; t < 40; t++) expect(a[t * 2]).toBe(clean[t * 2]!);
        expect(await idx(o, ctx(true, 5, 1))).not.toEqual(a);
      }
    }
  });

  test("rsampleChoice: k = 1 takes argmax(logits + G); k = 2 slot 1 maximises the noisy logits over the rest", () => {
    const T = 9;
    const E = 5;
    const p = Float64Array.from(randn(T * E, "rs-p")).map((v) => Math.abs(v));
    const lg = Float64Array.from(randn(T * E, "rs-l"));
    const u = Float64Array.from(randn(T * E, "rs-u")).map((v) => Math.min(0.999, Math.max(0.001, Math.abs(v) / 4)));
    const G = (i: number) => -Math.log(-Math.log(u[i]!));
    const one = rsampleChoice(p, lg, u, T, E, 1);
    const two = rsampleChoice(p, lg, u, T, E, 2);
    for (let t = 0; t < T; t++) {
      const noisy = Array.from({ length: E }, (_, e) => lg[t * E + e]! + G(t * E + e));
      expect(one[t]).toBe(noisy.indexOf(Math.max(...noisy)));
      const pr = Array.from(p.subarray(t * E, t * E + E));
      expect(two[t * 2]).toBe(pr.indexOf(Math.max(...pr)));
      const rest = noisy.map((v, e) => (e === two[t * 2] ? -Infinity : v));
      expect(two[t * 2 + 1]).toBe(rest.indexOf(Math.max(...rest)));
    }
  });

  test("router_logits_clamp clamps values and zeroes the gradient outside (−v, v)", async () => {
    const be = new CpuBackend();
    const xs = [-3, -0.5, 0.2, 1.9, 2.5, -2.1, 0, 2, -2];
    const r = [1, 2, 3, 4, 5, 6, 7, 8, 9];
    const v = new Variable(be, xs, [9]);
    const y = clamp(v.tensor, -2, 2);
    expect(Array.from(await y.toArray())).toEqual(xs.map((a) => Math.min(2, Math.max(-2, a))).map((a) => Math.fround(a)));
    await backward(sum(mul(y, fromArray(be, r, [9]))));
    expect(Array.from(await v.grad())).toEqual(xs.map((a, i) => (a > -2 && a < 2 ? r[i]! : 0)));
  });
});
