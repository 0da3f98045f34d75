import { describe, expect, test } from "bun:test";
import { CpuBackend } from "@zeromoe/kernels";
import { LlamaForCausalLM } from "../src/models/llama.ts";
import { MixtralForCausalLM } from "../src/models/mixtral.ts";
import { initValues } from "../src/nn/init.ts";
import { readGrad, readParam } from "../src/nn/state-dict.ts";
import { UnitSet, enterUnit, leaveUnit } from "../src/nn/unit.ts";
import { backward, linear, sum } from "../src/tensor/index.ts";
import { tinyLlama, tinyMixtral, tokens } from "./tiny-models.ts";

describe("units", () => {
  test("flat layout: parameters are contiguous views in declaration order", () => {
    const be = new CpuBackend();
    const set = new UnitSet(be);
    const u = set.add({ name: "u", kind: "layer", params: [
      { name: "a", shape: [3, 5], init: { kind: "normal", std: 1 } },
      { name: "b", shape: [7], init: { kind: "ones" } },
      { name: "c", shape: [2, 1, 3], init: { kind: "zeros" } },
    ] });
    expect(u.params.map((p) => p.offset)).toEqual([0, 15, 22]);
    expect(u.numel).toBe(28);
    expect(u.data!.length).toBe(28);
    expect(u.data!.tag).toBe("param");
    expect(() => set.add({ name: "v", kind: "layer", params: [{ name: "a", shape: [1], init: { kind: "ones" } }] })).toThrow(/duplicate parameter name a/);
  });

  test("data is resolved at use time: a replaced buffer is used, a released one is an error naming the parameter", async () => {
    const be = new CpuBackend();
    const set = new UnitSet(be);
    const u = set.add({ name: "lin", kind: "layer", params: [{ name: "w", shape: [2, 3], init: { kind: "ones" } }] });
    const w = set.param("w").tensor;
    const x = (await import("../src/tensor/index.ts")).fromArray(be, [1, 2, 3], [1, 3]);
    const old = u.data!;
    u.data = null;
    expect(() => linear(x, w)).toThrow(/parameter w of unit lin used while the unit is not gathered/);
    const fresh = be.alloc("f32", 6, "gathered");
    be.write({ buf: fresh, off: 0 }, Float32Array.of(1, 0, 0, 0, 0, 2));
    u.data = fresh;
    const y = linear(x, w);
    expect(Array.from(await y.toArray())).toEqual([1, 6]);
    await backward(sum(y));
    expect(Array.from(await be.read({ buf: u.grad!, off: 0 }, 6))).toEqual([1, 2, 3, 1, 2, 3]);
    be.free(old);
  });

  test("bf16 units: f32 working copy at gather, bf16 grads by casting, close to the f32 model", async () => {
    const cfg = tinyMixtral();
    const ids = tokens(10, cfg.vocab_size, "bf16");
    const run = async (dtype: "f32" | "bf16") => {
      const be = new CpuBackend();
      const m = new MixtralForCausalLM(be, cfg, { seed: 9, dtype });
      const out = await m.forward({ inputIds: ids, labels: ids, batch: 2, seq: 5 });
      const loss = await out.loss!.item();
      await backward(out.loss!);
      const mem = be.memory().current;
      expect(mem.gathered).toBe(0);
      expect(mem.activation).toBe(0);
      const p = m.param("model.layers.1.self_attn.q_proj.weight");
      expect(p.unit.grad!.dtype).toBe(dtype);
      const g = await readGrad(p);
      const w = await readParam(p);
      return { loss, g: g!, w };
    };
    const a = await run("f32");
    const b = await run("bf16");
    expect(b.w.dtype).toBe("bf16");
    expect(b.w.data).toBeInstanceOf(Uint16Array);
    expect(Math.abs(a.loss - b.loss)).toBeLessThan(1e-2);
    // bf16 grads decode to ≈ the f32 grads (bf16 has 8 significant bits).
    const f32 = new Float32Array(new Uint32Array(Array.from(b.g.data as Uint16Array, (v) => v << 16)).buffer);
    let num = 0;
    let den = 0;
    for (let i = 0; i < f32.length; i++) {
      num = Math.max(num, Math.abs(f32[i]! - Number(a.g.data[i])));
      den = Math.max(den, Math.abs(Number(a.g.data[i])));
    }
    expect(num / den).toBeLessThan(0.05);
  });

  test("per-unit dtype: f32 embed/head, bf16 layers, f16 experts — trains and matches the f32 loss closely", async () => {
    const cfg = tinyMixtral();
    const ids = tokens(10, cfg.vocab_size, "mixed");
    const be = new CpuBackend();
    const m = new MixtralForCausalLM(be, cfg, { seed: 9, dtype: ({ kind }) => (kind === "layer" ? "bf16" : kind === "expert" ? "f16" : "f32") });
    expect(m.units.units.map((u) => u.dtype).join(",")).toBe(["f32", "bf16", ...Array(5).fill("f16"), "bf16", ...Array(5).fill("f16"), "f32"].join(","));
    const ref = new MixtralForCausalLM(new CpuBackend(), cfg, { seed: 9 });
    // One forward/backward at a time: the tape is per process.
    const b = await ref.forward({ inputIds: ids, labels: ids, batch: 2, seq: 5 });
    const lb = await b.loss!.item();
    await backward(b.loss!);
    const a = await m.forward({ inputIds: ids, labels: ids, batch: 2, seq: 5 });
    expect(Math.abs((await a.loss!.item()) - lb)).toBeLessThan(1e-2);
    await backward(a.loss!);
    expect(m.units.unit("layers.0.experts.2").grad!.dtype).toBe("f16");
    expect(be.memory().current.gathered).toBe(0);
  });

  test("a frozen unit (trainable = false) gets no gradient and no gradReady", async () => {
    const be = new CpuBackend();
    const cfg = tinyLlama();
    const m = new LlamaForCausalLM(be, cfg);
    m.embedUnit.trainable = false;
    const ready: string[] = [];
    m.units.hooks = { gather: () => {}, release: () => {}, gradReady: (u) => void ready.push(u.name) };
    const ids = tokens(6, cfg.vocab_size, "frozen");
    const out = await m.forward({ inputIds: ids, labels: ids, batch: 1, seq: 6 });
    await backward(out.loss!);
    expect(ready).toEqual(["head", "layers.1", "layers.0"]);
    expect(m.embedUnit.grad).toBeNull();
    expect(m.layerUnits[0]!.grad).not.toBeNull();
    expect(() => {
      m.param("model.norm.weight").tensor.requiresGrad = false;
    }).toThrow(/trainable/);
  });

  test("enterUnit/leaveUnit outside grad mode still fire gather/release", async () => {
    const be = new CpuBackend();
    const set = new UnitSet(be);
    const u = set.add({ name: "x", kind: "embed", params: [{ name: "e", shape: [2], init: { kind: "ones" } }] });
    const ev: string[] = [];
    set.hooks = { gather: (v, ph) => void ev.push(`g ${v.name} ${ph}`), release: (v, ph) => void ev.push(`r ${v.name} ${ph}`), gradReady: () => {} };
    await enterUnit(u);
    await leaveUnit(u);
    expect(ev).toEqual(["g x fwd", "r x fwd"]);
  });

  test("initialisation is HF-like and reproducible by name and slice", async () => {
    const be = new CpuBackend();
    const cfg = tinyLlama({ initializer_range: 0.02 });
    const a = new LlamaForCausalLM(be, cfg, { seed: 42 });
    const b = new LlamaForCausalLM(be, cfg, { seed: 42 });
    const c = new LlamaForCausalLM(be, cfg, { seed: 43 });
    const p = "model.layers.1.mlp.up_proj.weight";
    const va = Array.from((await readParam(a.param(p))).data);
    expect(Array.from((await readParam(b.param(p))).data)).toEqual(va);
    expect(Array.from((await readParam(c.param(p))).data)).not.toEqual(va);
    const mean = va.reduce((s, v) => s + v, 0) / va.length;
    const std = Math.sqrt(va.reduce((s, v) => s + (v - mean) ** 2, 0) / va.length);
    expect(Math.abs(mean)).toBeLessThan(0.004);
    expect(Math.abs(std - 0.02)).toBeLessThan(0.003);
    expect(Array.from((await readParam(a.param("model.norm.weight"))).data).every((v) => v === 1)).toBe(true);
    // A slice generated on its own equals the same elements of the whole.
    const slice = new Float32Array(17);
    initValues(a.param(p), 42, 101, slice);
    expect(Array.from(slice)).toEqual(va.slice(101, 118));
  });
});
