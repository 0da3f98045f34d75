/**
 * Device initialisation equals host initialisation bit for bit: models built on the webgpu backend
 * (lavapipe here; their parameters made on the device by `randomFill`/`fill`, nn/init.ts) hold the
 * same bits as the same models on the cpu backend and as the host reference `initUnitValues` —
 * f32 and bf16/f16 units (16-bit: the f32 values rounded as a cast does), the default run's Mixtral
 * and a Llama with a prime-sized MLP, and ZeRO shard ranges (`initUnitRange`) at awkward starts and
 * lengths written at an offset of a larger buffer; units held in several bindings (a backend with
 * maxBindingBytes lowered to 64 KiB).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { createBackend, createGPU, WebGpuBackend, type Backend, type Buf, type DType } from "@zeromoe/kernels";
import { DEFAULT_JOB } from "../../src/config/default-job.ts";
import { llamaConfig, mixtralConfig } from "../../src/models/config.ts";
import { LlamaForCausalLM, type CausalDecoder } from "../../src/models/llama.ts";
import { MixtralForCausalLM } from "../../src/models/mixtral.ts";
import { initUnitRange, initUnitValues } from "../../src/nn/init.ts";
import type { Unit } from "../../src/nn/unit.ts";

const cpu: Backend = (await createBackend("cpu")).backend;
const gpu: Backend = (await createBackend("webgpu")).backend;
afterAll(() => (gpu as { destroy?: () => void }).destroy?.());

async function bitsOf(be: Backend, buf: Buf, off: number, n: number): Promise<number[]> {
  const v = await be.read({ buf, off }, n);
  return Array.from(v instanceof Float32Array ? new Uint32Array(v.buffer, v.byteOffset, v.length) : (v as Uint16Array));
}

/** The host reference of a unit range in `dtype` bits (f32 values cast on the cpu backend). */
async function hostBits(unit: Unit, seed: number, start: number, count: number, dtype: DType): Promise<number[]> {
  const vals = initUnitValues(unit, seed, start, count);
  if (dtype === "f32") return Array.from(new Uint32Array(vals.buffer));
  const f = cpu.alloc("f32", count, "other");
  const h = cpu.alloc(dtype, count, "other");
  cpu.write({ buf: f, off: 0 }, vals);
  cpu.cast({ buf: f, off: 0 }, { buf: h, off: 0 }, count);
  const out = await bitsOf(cpu, h, 0, count);
  cpu.free(f);
  cpu.free(h);
  return out;
}

async function compareModels(make: (be: Backend) => CausalDecoder, seed: number, on: Backend = gpu): Promise<number> {
  const onGpu = make(on);
  const onCpu = make(cpu);
  let n = 0;
  for (let i = 0; i < onGpu.units.units.length; i++) {
    const ug = onGpu.units.units[i]!;
    const uc = onCpu.units.units[i]!;
    const g = await bitsOf(on, ug.data!, 0, ug.numel);
    expect(g).toEqual(await bitsOf(cpu, uc.data!, 0, uc.numel));
    expect(g).toEqual(await hostBits(uc, seed, 0, uc.numel, uc.dtype));
    n += ug.numel;
  }
  return n;
}

describe("device initialisation equals host initialisation", () => {
  test("the default run's Mixtral, f32 and bf16", async () => {
    const cfg = mixtralConfig(DEFAULT_JOB.model as Record<string, unknown>);
    for (const dtype of ["f32", "bf16"] as const) {
      expect(await compareModels((be) => new MixtralForCausalLM(be, cfg, { seed: 1234, dtype }), 1234)).toBe(262976);
    }
  }, 300_000);

  test("a Llama with prime sizes, f16 layers and f32 embed/head", async () => {
    const cfg = llamaConfig({ vocab_size: 97, hidden_size: 64, intermediate_size: 211, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 32 });
    const n = await compareModels((be) => new LlamaForCausalLM(be, cfg, { seed: 77, dtype: ({ kind }) => (kind === "layer" ? "f16" : "f32") }), 77);
    expect(n).toBeGreaterThan(100000);
  }, 300_000);

  test("units held in several bindings (maxBindingBytes 64 KiB), bf16 and f32", async () => {
    const seg = await WebGpuBackend.create(createGPU(), { maxBindingBytes: 65536 });
    try {
      const cfg = llamaConfig({ vocab_size: 97, hidden_size: 64, intermediate_size: 211, num_hidden_layers: 1, num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 32 });
      for (const dtype of ["bf16", "f32"] as const) expect(await compareModels((be) => new LlamaForCausalLM(be, cfg, { seed: 3, dtype }), 3, seg)).toBeGreaterThan(50000);
    } finally {
      seg.destroy();
    }
  }, 300_000);

  test("shard ranges at awkward starts and lengths, at an offset of a larger buffer, f32 and bf16", async () => {
    const cfg = llamaConfig({ vocab_size: 97, hidden_size: 64, intermediate_size: 211, num_hidden_layers: 1, num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 32 });
    const model = new LlamaForCausalLM(cpu, cfg, { seed: 5 });
    const unit = model.layerUnits[0]!;
    for (const dtype of ["f32", "bf16"] as const) {
      for (const [start, count, off] of [[0, unit.numel, 0], [1, 4097, 3], [4095, 64, 1], [unit.numel - 7, 7, 2], [12289, 20000, 5]] as const) {
        const dst = gpu.alloc(dtype, off + count + 4, "other");
        gpu.fill({ buf: dst, off: 0 }, 3, off + count + 4);
        initUnitRange(gpu, unit, 5, start, count, dst, off);
        const got = await bitsOf(gpu, dst, 0, off + count + 4);
        const three = dtype === "f32" ? 0x40400000 : 0x4040;
        expect(got.slice(0, off).every((b) => b === three)).toBe(true);
        expect(got.slice(off + count).every((b) => b === three)).toBe(true);
        expect(got.slice(off, off + count)).toEqual(await hostBits(unit, 5, start, count, dtype));
        gpu.free(dst);
      }
    }
    expect(() => initUnitRange(gpu, unit, 5, unit.numel - 1, 2, gpu.alloc("f32", 2, "other"))).toThrow(/outside the unit/);
  }, 300_000);
});
