/**
 * Parameter initialisation is pinned: any change to the initial parameters of a seed — and with it
 * to the default run's losses — fails here. Hash = FNV-1a over the f32 bit patterns of every
 * parameter, in unit order. The values are those of the integer Box–Muller transform
 * (kernels/src/numerics/philox-transform.ts, since device initialisation); each parameter is also
 * checked against the float64 Box–Muller of the same Philox words (`normalFill`, the definition
 * before): every element within 1 ulp, under 1 % of them differing at all.
 */
import { describe, expect, test } from "bun:test";
import { createBackend, type Backend } from "@zeromoe/kernels";
import { DEFAULT_JOB } from "../../src/config/default-job.ts";
import { llamaConfig, mixtralConfig } from "../../src/models/config.ts";
import { LlamaForCausalLM, type CausalDecoder } from "../../src/models/llama.ts";
import { MixtralForCausalLM } from "../../src/models/mixtral.ts";
import { initUnitValues } from "../../src/nn/init.ts";
import { initUnitRange } from "../../src/nn/init.ts";
import { normalFill, streamKey } from "../../src/tensor/random.ts";

const be: Backend = (await createBackend("cpu")).backend;

function fnv(h: number, bits: Uint32Array): number {
  for (let i = 0; i < bits.length; i++) h = Math.imul(h ^ bits[i]!, 0x01000193) >>> 0;
  return h;
}

async function paramBits(model: CausalDecoder, name: string): Promise<Uint32Array> {
  const p = model.units.param(name);
  const v = (await be.read({ buf: p.unit.data!, off: p.offset }, p.numel)) as Float32Array;
  return new Uint32Array(v.buffer, v.byteOffset, v.length);
}

async function modelHash(model: CausalDecoder): Promise<number> {
  let h = 0x811c9dc5;
  for (const u of model.units.units) {
    const v = (await be.read({ buf: u.data!, off: 0 }, u.numel)) as Float32Array;
    h = fnv(h, new Uint32Array(v.buffer, v.byteOffset, v.length));
  }
  return h;
}

/** Elements of every normal parameter that differ from the float64 Box–Muller of the same words
 * (asserting each within 1 ulp), and the number of elements compared. */
async function differFromF64(model: CausalDecoder, seed: number): Promise<[number, number]> {
  let differ = 0;
  let total = 0;
  for (const u of model.units.units) {
    for (const p of u.params) {
      if (p.init.kind !== "normal") continue;
      const got = await paramBits(model, p.name);
      const ref = new Float32Array(p.numel);
      normalFill(ref, streamKey(seed, p.name), 0, p.init.std);
      const rb = new Uint32Array(ref.buffer);
      for (let i = 0; i < p.numel; i++) {
        const d = Math.abs((got[i]! | 0) - (rb[i]! | 0));
        if (d > 1) throw new Error(`${p.name}[${i}]: ${d} ulp from the f64 definition`);
        differ += d;
      }
      total += p.numel;
    }
  }
  return [differ, total];
}

const hex = (a: Uint32Array, idx: number[]) => idx.map((i) => "0x" + a[i]!.toString(16));

describe("initial parameters are pinned", () => {
  test("the default run's Mixtral (seed 1234, 262,976 parameters)", async () => {
    const model = new MixtralForCausalLM(be, mixtralConfig(DEFAULT_JOB.model as Record<string, unknown>), { seed: 1234 });
    expect(model.numParameters).toBe(262976);
    const emb = await paramBits(model, "model.embed_tokens.weight");
    expect(hex(emb, [0, 1, 2, emb.length - 1])).toEqual(["0xbb9bdff8", "0x3c52fdb4", "0x3d098560", "0x3cc4889d"]);
    const w2 = await paramBits(model, "model.layers.1.block_sparse_moe.experts.3.w2.weight");
    expect(hex(w2, [0, 1, 2, w2.length - 1])).toEqual(["0x3cd83d48", "0x3c9ac6e1", "0xbcf8e5f3", "0xbc22957b"]);
    const head = await paramBits(model, "lm_head.weight");
    expect(hex(head, [0, 1, 2, head.length - 1])).toEqual(["0x3d1ab4a3", "0x3aa65c3b", "0xbc8e81e0", "0xbc5ab8f8"]);
    expect((await modelHash(model)).toString(16)).toBe("4d213dc7");
    const [differ, total] = await differFromF64(model, 1234);
    expect(differ / total).toBeLessThan(0.01);
  }, 300_000);

  test("a Llama with a 1M-element layer unit (seed 7, 1,014,016 parameters)", async () => {
    const cfg = llamaConfig({ vocab_size: 97, hidden_size: 256, intermediate_size: 1031, num_hidden_layers: 1, num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 64, tie_word_embeddings: true });
    const model = new LlamaForCausalLM(be, cfg, { seed: 7 });
    expect(model.numParameters).toBe(1014016);
    const down = await paramBits(model, "model.layers.0.mlp.down_proj.weight");
    expect(hex(down, [0, 1, 2, down.length - 1])).toEqual(["0xbc616fe1", "0xbc8f76d3", "0xbc240318", "0xbca28673"]);
    expect((await modelHash(model)).toString(16)).toBe("47930cea");

    // any element range of a unit (a ZeRO shard) gives the same values as the whole unit
    const unit = model.layerUnits[0]!;
    const whole = initUnitValues(unit, 7, 0, unit.numel);
    for (const [start, count] of [[0, 1], [196607, 3], [131071, 700001], [unit.numel - 5, 5], [unit.numel + 3, 0]] as const) {
      const part = initUnitValues(unit, 7, start, count);
      expect(part.length).toBe(count);
      let same = true;
      for (let k = 0; k < count; k++) if (!Object.is(part[k], whole[start + k])) same = false;
      expect(same).toBe(true);
    }
    // initUnitRange writes a shard, also cast to bf16
    const shard = be.alloc("bf16", 1001, "other");
    initUnitRange(be, unit, 7, 196600, 1000, shard);
    const got = (await be.read({ buf: shard, off: 0 }, 1001)) as Uint16Array;
    const ref = be.alloc("f32", 1000, "other");
    be.write({ buf: ref, off: 0 }, whole.subarray(196600, 197600));
    const want = be.alloc("bf16", 1000, "other");
    be.cast({ buf: ref, off: 0 }, { buf: want, off: 0 }, 1000);
    expect(Array.from(got.subarray(0, 1000))).toEqual(Array.from((await be.read({ buf: want, off: 0 }, 1000)) as Uint16Array));
    expect(got[1000]).toBe(0);
    for (const b of [shard, ref, want]) be.free(b);
    expect(() => initUnitValues(unit, 7, unit.numel - 1, 2)).toThrow(/outside the unit/);
  }, 300_000);
});
