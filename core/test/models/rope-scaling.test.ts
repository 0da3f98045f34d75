/**
 * RoPE scaling (core/src/models/rope-scaling.ts) against a reference written here, in float64, from
 * Transformers' documented formulas (modeling_rope_utils.py: _compute_default_rope_parameters,
 * _compute_linear_scaling_rope_parameters, _compute_dynamic_ntk_parameters at seq_len ≤
 * max_position_embeddings, _compute_llama3_parameters; vectorised there with torch.where, written
 * here per frequency with the same three cases), to 1e-6 relative; the rope kernels (cpu, and the
 * KV cache's rotation matrix) rotate by the table; Llama-3.1-8B's real config.json loads unchanged
 * (rope_scaling llama3) and a shrunk copy trains; the export writes the scaling back in both
 * Transformers 4 and 5 forms.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CpuBackend } from "@zeromoe/kernels";
import { resolveModelConfig } from "../../src/config/index.ts";
import { ropeFreqOf, ropeInverseFrequencies } from "../../src/models/rope-scaling.ts";
import { ropeMatrix } from "../../src/models/kv-cache.ts";
import { formatHfConfigJson, hfConfigObject } from "../../src/checkpoint/hf-config.ts";

const ROOT = new URL("../../../", import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), "zm-rope-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Transformers' formulas, float64, one frequency at a time. */
function reference(D: number, base: number, sc: Record<string, number | string> | null): number[] {
  const inv: number[] = [];
  for (let j = 0; j < D; j += 2) inv.push(1 / base ** (j / D));
  if (sc === null || sc.rope_type === "dynamic") return inv; // dynamic: base·(factor·L/L − (factor−1))^… = base at L = max_position_embeddings
  const factor = sc.factor as number;
  if (sc.rope_type === "linear") return inv.map((f) => f / factor);
  const lowF = sc.low_freq_factor as number;
  const highF = sc.high_freq_factor as number;
  const old = sc.original_max_position_embeddings as number;
  return inv.map((f) => {
    const wavelen = (2 * Math.PI) / f;
    const scaled = wavelen > old / lowF ? f / factor : f;
    const medium = !(wavelen < old / highF) && !(wavelen > old / lowF);
    if (!medium) return scaled;
    const smooth = (old / wavelen - lowF) / (highF - lowF);
    return ((1 - smooth) * scaled) / factor + smooth * scaled;
  });
}

const LLAMA31 = { rope_type: "llama3", factor: 8.0, low_freq_factor: 1.0, high_freq_factor: 4.0, original_max_position_embeddings: 8192 };

/** Llama-3.1-8B's config.json as published (meta-llama/Llama-3.1-8B). */
const LLAMA31_CONFIG = {
  architectures: ["LlamaForCausalLM"], attention_bias: false, attention_dropout: 0.0, bos_token_id: 128000, eos_token_id: 128001, hidden_act: "silu", hidden_size: 4096,
  initializer_range: 0.02, intermediate_size: 14336, max_position_embeddings: 131072, mlp_bias: false, model_type: "llama", num_attention_heads: 32, num_hidden_layers: 32,
  num_key_value_heads: 8, pretraining_tp: 1, rms_norm_eps: 1e-5, rope_scaling: LLAMA31, rope_theta: 500000.0, tie_word_embeddings: false, torch_dtype: "bfloat16",
  transformers_version: "4.43.0.dev0", use_cache: true, vocab_size: 128256,
};

describe("RoPE scaling", () => {
  test("inverse frequencies match Transformers' formulas (float64) to 1e-6, at several head dims and bases", () => {
    const cases: [number, number, Record<string, number | string> | null][] = [
      [128, 500000, LLAMA31], [64, 10000, LLAMA31], [96, 1e6, { ...LLAMA31, factor: 32, original_max_position_embeddings: 8192 }],
      [128, 500000, { rope_type: "linear", factor: 4 }], [80, 10000, { rope_type: "linear", factor: 2.5 }],
      [128, 10000, { rope_type: "dynamic", factor: 2 }], [128, 500000, null], [6, 10000, LLAMA31],
    ];
    for (const [D, base, sc] of cases) {
      const ours = ropeInverseFrequencies(D, base, sc as never);
      const ref = reference(D, base, sc);
      expect(ours.length).toBe(D / 2);
      for (let i = 0; i < D / 2; i++) expect(Math.abs(ours[i]! - ref[i]!) / ref[i]!).toBeLessThan(1e-6);
    }
    // llama3 at Llama 3.1's settings: the three regimes all occur (high kept, low ÷ 8, medium between)
    const f = ropeInverseFrequencies(128, 500000, LLAMA31 as never);
    const base = ropeInverseFrequencies(128, 500000, null);
    expect(f[0]).toBe(base[0]!);
    expect(f[63]! / base[63]!).toBeCloseTo(1 / 8, 12);
    expect([...f].some((x, i) => x / base[i]! > 1 / 8 + 1e-9 && x / base[i]! < 1 - 1e-9)).toBe(true);
  });

  test("the cpu rope kernel and the KV cache's rotation rotate by the table", async () => {
    const be = new CpuBackend();
    const [B, S, H, D] = [2, 7, 3, 10];
    const freq = ropeInverseFrequencies(D, 10000, { rope_type: "llama3", factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 16 });
    const x = Float32Array.from({ length: B * S * H * D }, (_, i) => Math.sin(i * 1.7 + 0.3));
    const xb = be.alloc("f32", x.length, "other");
    const yb = be.alloc("f32", x.length, "other");
    be.write({ buf: xb, off: 0 }, x);
    be.rope({ buf: xb, off: 0 }, { buf: yb, off: 0 }, B, S, H, D, freq, false);
    const y = (await be.read({ buf: yb, off: 0 }, x.length)) as Float32Array;
    let worst = 0;
    for (let b = 0; b < B; b++) for (let s = 0; s < S; s++) for (let h = 0; h < H; h++) {
      const o = ((b * S + s) * H + h) * D;
      const R = ropeMatrix(s, D, freq);
      for (let j = 0; j < D; j++) {
        let want = 0;
        for (let i = 0; i < D; i++) want += x[o + i]! * R[i * D + j]!;
        const ang = s * freq[j % (D / 2)]!;
        const half = D / 2;
        const direct = j < half ? x[o + j]! * Math.cos(ang) - x[o + j + half]! * Math.sin(ang) : x[o + j]! * Math.cos(ang) + x[o + j - half]! * Math.sin(ang);
        worst = Math.max(worst, Math.abs(y[o + j]! - want), Math.abs(y[o + j]! - direct));
      }
    }
    expect(worst).toBeLessThan(1e-5); // f32 outputs of O(1) values
  });

  test("Llama-3.1-8B's config.json loads unchanged; the export writes the scaling in both forms", () => {
    const { config: c } = resolveModelConfig(LLAMA31_CONFIG, "config.json");
    expect(c.rope_scaling).toEqual(LLAMA31 as never);
    expect(c.rope_theta).toBe(500000);
    expect(ropeFreqOf(c)).toBeInstanceOf(Float64Array);
    const out = JSON.parse(formatHfConfigJson(hfConfigObject(c, "bf16")));
    expect(out.rope_parameters).toEqual({ ...LLAMA31, rope_theta: 500000 });
    expect(out.rope_scaling).toEqual(LLAMA31);
    expect(resolveModelConfig(out, "export").config.rope_scaling).toEqual(LLAMA31 as never);
    // Transformers 5's form alone reads the same
    const { rope_scaling: _r, ...v5 } = LLAMA31_CONFIG;
    expect(resolveModelConfig({ ...v5, rope_parameters: { ...LLAMA31, rope_theta: 500000 } }, "config.json").config.rope_scaling).toEqual(LLAMA31 as never);
  });

  test("a shrunk copy of Llama-3.1-8B's config (its rope_scaling unchanged) trains: bun run train --world-size 2 --steps 2", async () => {
    const model = { ...LLAMA31_CONFIG, hidden_size: 64, intermediate_size: 96, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 256, max_position_embeddings: 256, bos_token_id: 1, eos_token_id: 2 };
    const job = join(dir, "job.json");
    writeFileSync(job, JSON.stringify({ model, data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 32 }, steps: 2, train_micro_batch_size_per_gpu: 2, zero_optimization: { stage: 3 } }));
    const summary = join(dir, "s.json");
    const p = Bun.spawn(["bun", "run", "train", "--config", job, "--backend", "cpu", "--world-size", "2", "--summary", summary], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
    const [o, e] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text()]);
    expect({ code: await p.exited, out: o + e }).toMatchObject({ code: 0 });
    const s = JSON.parse(readFileSync(summary, "utf8"));
    expect(s.losses.length).toBe(2);
    expect(s.losses.every((l: number) => Number.isFinite(l))).toBe(true);
  }, 300_000);
});
