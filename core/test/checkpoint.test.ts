import { describe, expect, test } from "bun:test";
import { CpuBackend } from "@zeromoe/kernels";
import { LlamaForCausalLM, type CausalDecoder } from "../src/models/llama.ts";
import { MixtralForCausalLM } from "../src/models/mixtral.ts";
import type { UnitHooks } from "../src/nn/unit.ts";
import * as T from "../src/tensor/index.ts";
import { randn } from "./gradcheck.ts";
import { tinyLlama, tinyMixtral, tokens, zero3Like } from "./tiny-models.ts";

describe("activation checkpointing", () => {
  test("a checkpointed region with two outputs gives the same gradients as the plain one", async () => {
    const be = new CpuBackend({ precision: "f64" });
    const run = async (ckpt: boolean) => {
      const x = new T.Variable(be, randn(5 * 7, "x"), [5, 7]);
      const w = new T.Variable(be, randn(3 * 7, "w"), [3, 7]);
      const region = async (a: T.Tensor) => {
        const h = T.silu(T.linear(a, w.tensor));
        return [T.add(h, T.scale(T.reshape(T.sum(h, -1, true), [5, 1]), 0.5)), T.mean(T.mul(h, h))];
      };
      const xin = T.scale(x.tensor, 1.3); // a non-leaf input
      const [y, aux] = ckpt ? await T.checkpoint(region, [xin]) : await region(xin);
      const loss = T.add(T.sum(T.mul(y!, y!)), T.scale(aux!, 3));
      const value = await loss.item();
      await T.backward(loss);
      const out = { value, gx: Array.from(await x.grad()), gw: Array.from(await w.grad()) };
      x.dispose();
      w.dispose();
      return out;
    };
    const a = await run(false);
    const b = await run(true);
    expect(b.value).toBe(a.value);
    expect(b.gx).toEqual(a.gx);
    expect(b.gw).toEqual(a.gw);
    expect(a.gx.some((v) => v !== 0)).toBe(true);
    expect(be.memory().current.activation).toBe(0);
  });

  test("mixtral with ZeRO-3-like hooks and checkpointing: same gradients as the plain run", async () => {
    const cfg = tinyMixtral();
    const ids = tokens(12, cfg.vocab_size, "z3-ckpt");
    const run = async (zero3: boolean) => {
      const be = new CpuBackend();
      const m = new MixtralForCausalLM(be, cfg, { seed: 23 });
      m.gradientCheckpointing = zero3;
      let moved: Map<string, Float32Array | Float64Array> | null = null;
      if (zero3) {
        moved = await zero3Like(be, m.units);
      }
      const out = await m.forward({ inputIds: ids, labels: ids, batch: 2, seq: 6 });
      const loss = await out.loss!.item();
      await T.backward(out.loss!);
      const g: number[][] = [];
      for (const u of m.units.units) g.push(Array.from(moved ? moved.get(u.name)! : await be.read({ buf: u.grad!, off: 0 }, u.numel)));
      return { loss, g };
    };
    const a = await run(false);
    const b = await run(true);
    expect(b.loss).toBe(a.loss);
    b.g.forEach((g, i) => expect(g).toEqual(a.g[i]!));
  });

  const cases: [string, (be: CpuBackend) => CausalDecoder, number][] = [
    ["llama", (be) => new LlamaForCausalLM(be, tinyLlama({ num_hidden_layers: 3 }), { seed: 21 }), 37],
    ["mixtral", (be) => new MixtralForCausalLM(be, tinyMixtral({ num_hidden_layers: 3 }), { seed: 22 }), 29],
  ];
  for (const [name, make, vocab] of cases) {
    test(`${name}: same loss and bit-identical gradients with gradientCheckpointing, lower activation peak`, async () => {
      const ids = tokens(2 * 9, vocab, `ckpt-${name}`);
      const run = async (ckpt: boolean) => {
        const be = new CpuBackend();
        const m = make(be);
        m.gradientCheckpointing = ckpt;
        const events: string[] = [];
        const hooks: UnitHooks = { gather: (u, p) => void events.push(`g ${u.name} ${p}`), release: () => {}, gradReady: (u) => void events.push(`r ${u.name}`) };
        m.units.hooks = hooks;
        be.resetPeak();
        const out = await m.forward({ inputIds: ids, labels: ids, batch: 2, seq: 9 });
        const loss = await out.loss!.item();
        await T.backward(out.loss!);
        const grads = await Promise.all(m.units.units.map(async (u) => Array.from(await be.read({ buf: u.grad!, off: 0 }, u.numel))));
        expect(be.memory().current.activation).toBe(0);
        return { loss, grads, peak: be.memory().peak.activation, events };
      };
      const a = await run(false);
      const b = await run(true);
      expect(b.loss).toBe(a.loss);
      b.grads.forEach((g, i) => expect(g).toEqual(a.grads[i]!));
      expect(b.peak).toBeLessThan(a.peak);
      // Every unit reports its gradients exactly once, in the same order.
      expect(b.events.filter((e) => e.startsWith("r "))).toEqual(a.events.filter((e) => e.startsWith("r ")));
    });
  }
});
