import { describe, expect, test } from "bun:test";
import { CpuBackend } from "@zeromoe/kernels";
import { LlamaForCausalLM } from "../src/models/llama.ts";
import { MixtralForCausalLM } from "../src/models/mixtral.ts";
import { LocalDispatcher, type DispatchRequest } from "../src/nn/moe/dispatcher.ts";
import { readGrad } from "../src/nn/state-dict.ts";
import type { UnitHooks } from "../src/nn/unit.ts";
import { backward, fromArray, noGrad } from "../src/tensor/index.ts";
import { rootArena } from "../src/tensor/arena.ts";
import { sgdStep, tinyLlama, tinyMixtral, tokens, zero3Like } from "./tiny-models.ts";

const B = 2;
const S = 7;

describe("llama", () => {
  test("HF names and shapes, logits shape, loss ≈ ln(vocab) at init", async () => {
    const be = new CpuBackend();
    const cfg = tinyLlama();
    const m = new LlamaForCausalLM(be, cfg, { seed: 1 });
    expect(m.param("model.layers.1.self_attn.k_proj.weight").shape).toEqual([6, 18]);
    expect(m.param("model.layers.0.mlp.down_proj.weight").shape).toEqual([18, 20]);
    expect(m.param("lm_head.weight").shape).toEqual([37, 18]);
    expect(m.units.units.map((u) => u.name)).toEqual(["embed", "layers.0", "layers.1", "head"]);
    const ids = tokens(B * S, cfg.vocab_size, "llama-ids");
    const out = await m.forward({ inputIds: ids, labels: ids, batch: B, seq: S, returnLogits: true });
    expect(out.logits!.shape).toEqual([B, S, 37]);
    expect(out.numTargets).toBe(B * (S - 1));
    const loss = await out.loss!.item();
    expect(Math.abs(loss - Math.log(37))).toBeLessThan(0.05);
    await backward(out.loss!);
  });

  test("SGD on a fixed batch lowers the loss; activation memory returns to zero and peaks stay flat", async () => {
    const be = new CpuBackend();
    const cfg = tinyLlama();
    const m = new LlamaForCausalLM(be, cfg, { seed: 2 });
    const ids = tokens(B * S, cfg.vocab_size, "sgd");
    const losses: number[] = [];
    const peaks: number[] = [];
    const totals: number[] = [];
    for (let step = 0; step < 6; step++) {
      be.resetPeak();
      const out = await m.forward({ inputIds: ids, labels: ids, batch: B, seq: S });
      losses.push(await out.loss!.item());
      await backward(out.loss!);
      sgdStep(be, m, 0.3);
      const mem = be.memory();
      expect(mem.current.activation).toBe(0);
      peaks.push(mem.peak.activation);
      totals.push(mem.current.param + mem.current.grad + mem.current.other + mem.current.gathered);
    }
    for (let i = 1; i < losses.length; i++) expect(losses[i]!).toBeLessThan(losses[i - 1]!);
    expect(losses[5]!).toBeLessThan(losses[0]! - 1);
    for (const p of peaks.slice(1)) expect(p).toBe(peaks[1]!);
    for (const t of totals) expect(t).toBe(totals[0]!);
  });

  test("noGrad forward frees intermediates per layer; outputs are the caller's", async () => {
    const be = new CpuBackend();
    const cfg = tinyLlama();
    const m = new LlamaForCausalLM(be, cfg);
    const ids = tokens(B * S, cfg.vocab_size, "nograd");
    be.resetPeak();
    const gradOut = await m.forward({ inputIds: ids, labels: ids, batch: B, seq: S });
    const gradLoss = await gradOut.loss!.item();
    const gradPeak = be.memory().peak.activation;
    await backward(gradOut.loss!);
    be.resetPeak();
    const out = await noGrad(() => m.forward({ inputIds: ids, labels: ids, batch: B, seq: S, returnLogits: true }));
    expect(await out.loss!.item()).toBeCloseTo(gradLoss, 6);
    const liveBytes = (B * S * cfg.vocab_size + 1) * 4;
    expect(be.memory().current.activation).toBe(liveBytes);
    expect(be.memory().peak.activation).toBeLessThan(gradPeak);
    out.logits!.dispose();
    out.loss!.dispose();
    expect(be.memory().current.activation).toBe(0);
  });

  test("noGrad forwards without any backward: device memory and the root arena stay bounded", async () => {
    const be = new CpuBackend();
    const cfg = tinyLlama({ num_hidden_layers: 1 });
    const m = new LlamaForCausalLM(be, cfg);
    const ids = tokens(5, cfg.vocab_size, "eval");
    for (let i = 0; i < 50; i++) {
      const out = await noGrad(() => m.forward({ inputIds: ids, batch: 1, seq: 5 }));
      out.logits!.dispose();
    }
    expect(be.memory().current.activation).toBe(0);
    // Tensors made at top level and disposed by their owner are pruned from the root arena.
    for (let i = 0; i < 5000; i++) fromArray(be, [i], [1]).dispose();
    expect(rootArena().tensors.length).toBeLessThan(2100);
  });

  test("tied embeddings: lm_head reads embed_tokens; embed gradReady fires last", async () => {
    const be = new CpuBackend();
    const cfg = tinyLlama({ tie_word_embeddings: true });
    const m = new LlamaForCausalLM(be, cfg);
    expect(m.units.has("lm_head.weight")).toBe(false);
    const events: string[] = [];
    m.units.hooks = recorder(events);
    const ids = tokens(B * S, cfg.vocab_size, "tied");
    const out = await m.forward({ inputIds: ids, labels: ids, batch: B, seq: S });
    await backward(out.loss!);
    expect(events).toEqual([
      "gather embed fwd", "release embed fwd",
      "gather layers.0 fwd", "release layers.0 fwd",
      "gather layers.1 fwd", "release layers.1 fwd",
      "gather head fwd", "gather embed fwd", "release embed fwd", "release head fwd",
      "gather head bwd", "gather embed bwd", "gradReady head", "release head bwd",
      "gather layers.1 bwd", "gradReady layers.1", "release layers.1 bwd",
      "gather layers.0 bwd", "gradReady layers.0", "release layers.0 bwd",
      "gradReady embed", "release embed bwd",
    ]);
  });
});

function recorder(events: string[]): UnitHooks {
  return {
    gather: (u, ph) => void events.push(`gather ${u.name} ${ph}`),
    release: (u, ph) => void events.push(`release ${u.name} ${ph}`),
    gradReady: (u) => void events.push(`gradReady ${u.name}`),
  };
}

describe("mixtral", () => {
  test("units, names, shapes; loss ≈ ln(vocab) + coef·aux at init; block statistics", async () => {
    const be = new CpuBackend();
    const cfg = tinyMixtral();
    const m = new MixtralForCausalLM(be, cfg, { seed: 3 });
    expect(m.units.units.map((u) => `${u.name}:${u.kind}`)).toEqual([
      "embed:embed",
      "layers.0:layer", ...[0, 1, 2, 3, 4].map((e) => `layers.0.experts.${e}:expert`),
      "layers.1:layer", ...[0, 1, 2, 3, 4].map((e) => `layers.1.experts.${e}:expert`),
      "head:head",
    ]);
    expect(m.param("model.layers.1.block_sparse_moe.gate.weight").shape).toEqual([5, 12]);
    expect(m.param("model.layers.0.block_sparse_moe.experts.4.w2.weight").shape).toEqual([12, 10]);
    const ids = tokens(B * S, cfg.vocab_size, "mix-ids");
    const out = await m.forward({ inputIds: ids, labels: ids, batch: B, seq: S, returnLogits: true });
    expect(out.logits!.shape).toEqual([B, S, 29]);
    const aux = await m.lastAuxLoss!.item();
    // Near-uniform router at init: aux ≈ k (HF's convention).
    expect(Math.abs(aux - 2)).toBeLessThan(0.05);
    expect(Math.abs((await out.loss!.item()) - (Math.log(29) + 0.05 * aux))).toBeLessThan(0.05);
    for (const b of m.lastBlocks) expect(b.expertCounts!.reduce((s, c) => s + c, 0)).toBe(2 * B * S);
    await backward(out.loss!);
  });

  test("SGD lowers the loss; memory stable; custom dispatcher is used", async () => {
    const be = new CpuBackend();
    const cfg = tinyMixtral();
    const m = new MixtralForCausalLM(be, cfg, { seed: 4 });
    let calls = 0;
    const inner = new LocalDispatcher();
    m.moe.dispatcher = { name: "counting", dispatch: (r: DispatchRequest) => (calls++, inner.dispatch(r)), combine: (d, y) => inner.combine(d, y) };
    const ids = tokens(B * S, cfg.vocab_size, "mix-sgd");
    const losses: number[] = [];
    const peaks: number[] = [];
    for (let step = 0; step < 6; step++) {
      be.resetPeak();
      const out = await m.forward({ inputIds: ids, labels: ids, batch: B, seq: S });
      losses.push(await out.loss!.item());
      await backward(out.loss!);
      sgdStep(be, m, 0.3);
      expect(be.memory().current.activation).toBe(0);
      peaks.push(be.memory().peak.activation);
    }
    expect(calls).toBe(6 * cfg.num_hidden_layers);
    expect(losses[5]!).toBeLessThan(losses[0]! - 1);
    // Routing changes between steps, so activation peaks may differ slightly; they must not grow.
    expect(Math.max(...peaks.slice(3))).toBeLessThanOrEqual(Math.max(...peaks.slice(0, 3)) * 1.2);
  });

  test("noGrad forward: only returned tensors survive (logits, loss, aux loss)", async () => {
    const be = new CpuBackend();
    const cfg = tinyMixtral();
    const m = new MixtralForCausalLM(be, cfg, { seed: 8 });
    const ids = tokens(B * S, cfg.vocab_size, "mix-nograd");
    const out = await noGrad(() => m.forward({ inputIds: ids, labels: ids, batch: B, seq: S, returnLogits: true }));
    expect(be.memory().current.activation).toBe((B * S * cfg.vocab_size + 2) * 4);
    expect(Math.abs((await out.auxLoss!.item()) - 2)).toBeLessThan(0.05);
    out.logits!.dispose();
    out.loss!.dispose();
    out.auxLoss!.dispose();
    expect(be.memory().current.activation).toBe(0);
  });

  test("hooks fire for every expert in order, including experts that received no tokens", async () => {
    const be = new CpuBackend();
    const cfg = tinyMixtral({ num_local_experts: 7, num_experts_per_tok: 1, num_hidden_layers: 1 });
    const m = new MixtralForCausalLM(be, cfg, { seed: 5 });
    const events: string[] = [];
    m.units.hooks = recorder(events);
    const ids = tokens(3, cfg.vocab_size, "few");
    const out = await m.forward({ inputIds: ids, labels: ids, batch: 1, seq: 3 });
    const counts = m.lastBlocks[0]!.expertCounts!;
    const idle = [...counts.keys()].filter((e) => counts[e] === 0);
    expect(idle.length).toBeGreaterThan(0);
    await backward(out.loss!);
    const ex = (e: number) => `layers.0.experts.${e}`;
    const fwd = events.slice(0, events.indexOf("release head fwd") + 1);
    expect(fwd).toEqual([
      "gather embed fwd", "release embed fwd", "gather layers.0 fwd",
      // the grouped experts hold every expert of the layer during the grouped products
      ...[0, 1, 2, 3, 4, 5, 6].map((e) => `gather ${ex(e)} fwd`),
      ...[0, 1, 2, 3, 4, 5, 6].map((e) => `release ${ex(e)} fwd`),
      "release layers.0 fwd", "gather head fwd", "release head fwd",
    ]);
    expect(events.slice(fwd.length)).toEqual([
      "gather head bwd", "gradReady head", "release head bwd",
      "gather layers.0 bwd",
      ...[6, 5, 4, 3, 2, 1, 0].map((e) => `gather ${ex(e)} bwd`),
      ...[6, 5, 4, 3, 2, 1, 0].flatMap((e) => [`gradReady ${ex(e)}`, `release ${ex(e)} bwd`]),
      "gradReady layers.0", "release layers.0 bwd",
      "gather embed bwd", "gradReady embed", "release embed bwd",
    ]);
    for (const e of idle) {
      const g = await readGrad(m.param(`model.layers.0.block_sparse_moe.experts.${e}.w1.weight`));
      expect(Array.from(g!.data).every((v) => v === 0)).toBe(true);
    }
  });

  test("ZeRO-3-like hooks (data freed after each region, re-gathered for backward) give identical loss and gradients", async () => {
    const cfg = tinyMixtral();
    const ids = tokens(B * S, cfg.vocab_size, "z3");
    const run = async (zero3: boolean) => {
      const be = new CpuBackend();
      const m = new MixtralForCausalLM(be, cfg, { seed: 6 });
      let grads: Map<string, Float32Array | Float64Array> | null = null;
      if (zero3) {
        grads = await zero3Like(be, m.units);
      }
      const out = await m.forward({ inputIds: ids, labels: ids, batch: B, seq: S });
      const loss = await out.loss!.item();
      await backward(out.loss!);
      const g = new Map<string, number[]>();
      for (const u of m.units.units) g.set(u.name, Array.from(grads ? grads.get(u.name)! : await be.read({ buf: u.grad!, off: 0 }, u.numel)));
      if (zero3) for (const u of m.units.units) expect(u.data).toBeNull();
      return { loss, g };
    };
    const a = await run(false);
    const b = await run(true);
    expect(b.loss).toBe(a.loss);
    for (const [k, v] of a.g) expect(b.g.get(k)).toEqual(v);
  });
});
