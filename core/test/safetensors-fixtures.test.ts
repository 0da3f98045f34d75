/**
 * Reads the Hugging Face fixtures (written by Python's `safetensors`, an independent writer) and
 * checks their documented contents and relations (core/test/fixtures/README.md) in TypeScript.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { loadStateDict, type LoadedTensor } from "../src/checkpoint/hf-load.ts";
import { SafetensorsReader } from "../src/checkpoint/safetensors.ts";

const FIX = join(import.meta.dir, "fixtures");

interface Cfg {
  vocab_size: number;
  hidden_size: number;
  intermediate_size: number;
  num_hidden_layers: number;
  num_attention_heads: number;
  num_key_value_heads: number;
  num_local_experts?: number;
  num_experts_per_tok?: number;
  router_aux_loss_coef?: number;
}

function load(model: string) {
  const cfg = JSON.parse(readFileSync(join(FIX, model, "config.json"), "utf8")) as Cfg;
  const inputs = JSON.parse(readFileSync(join(FIX, model, "inputs.json"), "utf8")) as { input_ids: number[][]; labels: number[][] };
  return { cfg, inputs, weights: loadStateDict(join(FIX, model, "model.safetensors")), expected: loadStateDict(join(FIX, model, "expected.safetensors")) };
}

/** Parameter names and shapes of the Hub layout, derived from the config alone. */
function expectedParams(cfg: Cfg, moe: boolean): Map<string, number[]> {
  const H = cfg.hidden_size;
  const I = cfg.intermediate_size;
  const hd = H / cfg.num_attention_heads;
  const kv = cfg.num_key_value_heads * hd;
  const m = new Map<string, number[]>([
    ["model.embed_tokens.weight", [cfg.vocab_size, H]],
    ["lm_head.weight", [cfg.vocab_size, H]],
    ["model.norm.weight", [H]],
  ]);
  for (let l = 0; l < cfg.num_hidden_layers; l++) {
    const p = `model.layers.${l}.`;
    m.set(p + "self_attn.q_proj.weight", [H, H]);
    m.set(p + "self_attn.k_proj.weight", [kv, H]);
    m.set(p + "self_attn.v_proj.weight", [kv, H]);
    m.set(p + "self_attn.o_proj.weight", [H, H]);
    m.set(p + "input_layernorm.weight", [H]);
    m.set(p + "post_attention_layernorm.weight", [H]);
    if (moe) {
      m.set(p + "block_sparse_moe.gate.weight", [cfg.num_local_experts!, H]);
      for (let e = 0; e < cfg.num_local_experts!; e++) {
        m.set(p + `block_sparse_moe.experts.${e}.w1.weight`, [I, H]);
        m.set(p + `block_sparse_moe.experts.${e}.w3.weight`, [I, H]);
        m.set(p + `block_sparse_moe.experts.${e}.w2.weight`, [H, I]);
      }
    } else {
      m.set(p + "mlp.gate_proj.weight", [I, H]);
      m.set(p + "mlp.up_proj.weight", [I, H]);
      m.set(p + "mlp.down_proj.weight", [H, I]);
    }
  }
  return m;
}

function get(m: Map<string, LoadedTensor>, name: string): LoadedTensor {
  const t = m.get(name);
  if (t === undefined) throw new Error(`fixture tensor ${name} missing`);
  return t;
}

/** Mean cross-entropy of shifted labels (HF causal-LM loss), in float64. */
function causalLmLoss(logits: LoadedTensor, labels: number[][]): number {
  const [B, S, V] = logits.shape;
  let sum = 0;
  let count = 0;
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < S - 1; t++) {
      const target = labels[b][t + 1];
      if (target === -100) continue;
      const row = logits.data.subarray((b * S + t) * V, (b * S + t + 1) * V);
      let max = -Infinity;
      for (const v of row) max = Math.max(max, v);
      let z = 0;
      for (const v of row) z += Math.exp(v - max);
      sum += max + Math.log(z) - row[target];
      count++;
    }
  }
  return sum / count;
}

/** max |a − b| over two equal-length arrays. */
function maxDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let d = 0;
  for (let i = 0; i < a.length; i++) d = Math.max(d, Math.abs(a[i] - b[i]));
  return d;
}

/** logits = norm_out · lm_headᵀ (checks the [out, in] weight convention). */
function headLogits(normOut: LoadedTensor, head: LoadedTensor): Float64Array {
  const H = normOut.shape[2];
  const V = head.shape[0];
  const T = normOut.data.length / H;
  const out = new Float64Array(T * V);
  for (let t = 0; t < T; t++) {
    for (let v = 0; v < V; v++) {
      let s = 0;
      for (let h = 0; h < H; h++) s += normOut.data[t * H + h] * head.data[v * H + h];
      out[t * V + v] = s;
    }
  }
  return out;
}

for (const model of ["llama", "mixtral"] as const) {
  describe(`${model} fixture`, () => {
    const { cfg, inputs, weights, expected } = load(model);
    const moe = model === "mixtral";

    test("model.safetensors holds exactly the Hub-layout parameters the config implies", () => {
      const want = expectedParams(cfg, moe);
      expect([...weights.keys()].sort()).toEqual([...want.keys()].sort());
      for (const [name, shape] of want) {
        const t = get(weights, name);
        expect(t.shape).toEqual(shape);
        expect(t.dtype).toBe("f32");
        expect(t.sourceDtype).toBe("F32");
      }
    });

    test("expected.safetensors has a gradient of every parameter's shape, and activations of the documented shapes", () => {
      for (const [name, t] of weights) {
        const g = get(expected, "grad." + name);
        expect(g.shape).toEqual(t.shape);
        expect(g.data.some((v) => v !== 0)).toBe(true);
      }
      const [B, S] = [inputs.input_ids.length, inputs.input_ids[0].length];
      expect(get(expected, "logits").shape).toEqual([B, S, cfg.vocab_size]);
      expect(get(expected, "loss").shape).toEqual([]);
      for (const n of ["embed_out", "norm_out", ...Array.from({ length: cfg.num_hidden_layers }, (_, l) => `layer_out.${l}`)]) {
        expect(get(expected, n).shape).toEqual([B, S, cfg.hidden_size]);
      }
    });

    test("the loss is the causal-LM cross-entropy of the stored logits", () => {
      const ce = causalLmLoss(get(expected, "logits"), inputs.labels);
      const loss = get(expected, "loss").data[0];
      if (moe) {
        expect(Math.abs(ce - get(expected, "lm_loss").data[0])).toBeLessThan(2e-6);
        expect(Math.abs(ce + cfg.router_aux_loss_coef! * get(expected, "aux_loss").data[0] - loss)).toBeLessThan(2e-6);
      } else {
        expect(Math.abs(ce - loss)).toBeLessThan(2e-6);
      }
    });

    test("logits = norm_out · lm_headᵀ", () => {
      expect(maxDiff(headLogits(get(expected, "norm_out"), get(weights, "lm_head.weight")), get(expected, "logits").data)).toBeLessThan(2e-5);
    });

    test("loading the directory finds model.safetensors", () => {
      const dirLoad = loadStateDict(join(FIX, model));
      expect([...dirLoad.keys()]).toEqual([...weights.keys()]);
    });
  });
}

describe("mixtral router and layouts", () => {
  const { cfg, expected, weights } = load("mixtral");
  const E = cfg.num_local_experts!;
  const k = cfg.num_experts_per_tok!;
  const L = cfg.num_hidden_layers;

  function softmaxRows(x: ArrayLike<number>, cols: number): Float64Array {
    const out = new Float64Array(x.length);
    for (let r = 0; r < x.length / cols; r++) {
      let max = -Infinity;
      for (let c = 0; c < cols; c++) max = Math.max(max, x[r * cols + c]);
      let z = 0;
      for (let c = 0; c < cols; c++) z += Math.exp(x[r * cols + c] - max);
      for (let c = 0; c < cols; c++) out[r * cols + c] = Math.exp(x[r * cols + c] - max) / z;
    }
    return out;
  }

  test("top-k experts and renormalised weights follow from router_logits", () => {
    for (let l = 0; l < L; l++) {
      const p = softmaxRows(get(expected, `router_logits.${l}`).data, E);
      const ids = get(expected, `topk_experts.${l}`).data;
      const w = get(expected, `topk_weights.${l}`).data;
      for (let t = 0; t < p.length / E; t++) {
        const order = Array.from({ length: E }, (_, e) => e).sort((a, b) => p[t * E + b] - p[t * E + a]);
        const top = order.slice(0, k);
        expect(Array.from(ids.subarray(t * k, t * k + k))).toEqual(top);
        const s = top.reduce((acc, e) => acc + p[t * E + e], 0);
        for (let j = 0; j < k; j++) expect(Math.abs(w[t * k + j] - p[t * E + top[j]] / s)).toBeLessThan(1e-6);
      }
      expect(maxDiff(get(expected, `router_logits.${l}`).data, get(expected, `hf_router_logits.${l}`).data)).toBeLessThan(1e-5);
    }
  });

  test("aux_loss = E · Σ_e (top-k picks of e / tokens) · mean prob of e, over all layers' tokens", () => {
    const counts = new Float64Array(E);
    const probSum = new Float64Array(E);
    let tokens = 0;
    for (let l = 0; l < L; l++) {
      const p = softmaxRows(get(expected, `router_logits.${l}`).data, E);
      const ids = get(expected, `topk_experts.${l}`).data;
      for (const e of ids) counts[e]++;
      for (let i = 0; i < p.length; i++) probSum[i % E] += p[i];
      tokens += p.length / E;
    }
    let aux = 0;
    for (let e = 0; e < E; e++) aux += (counts[e] / tokens) * (probSum[e] / tokens);
    aux *= E;
    expect(Math.abs(aux - get(expected, "aux_loss").data[0])).toBeLessThan(1e-5);
  });

  test("state_dict.safetensors is the fused view of model.safetensors (weights and gradients)", () => {
    const sd = loadStateDict(join(FIX, "mixtral", "state_dict.safetensors"));
    const H = cfg.hidden_size;
    const I = cfg.intermediate_size;
    for (const [name, t] of sd) {
      const m = /^model\.layers\.(\d+)\.mlp\.(.+)$/.exec(name);
      if (m === null) {
        expect(Array.from(t.data)).toEqual(Array.from(get(weights, name).data));
        continue;
      }
      const hub = `model.layers.${m[1]}.block_sparse_moe.`;
      for (const [src, gradPrefix, hubPrefix] of [
        [t, null, ""],
        [get(expected, "grad_state_dict." + name), "grad.", "grad."],
      ] as const) {
        const tensors = gradPrefix === null ? weights : expected;
        const part = (n: string) => get(tensors, hubPrefix + hub + n).data;
        if (m[2] === "gate.weight") {
          expect(Array.from(src.data)).toEqual(Array.from(part("gate.weight")));
        } else if (m[2] === "experts.gate_up_proj") {
          expect(src.shape).toEqual([E, 2 * I, H]);
          for (let e = 0; e < E; e++) {
            expect(Array.from(src.data.subarray(e * 2 * I * H, e * 2 * I * H + I * H))).toEqual(Array.from(part(`experts.${e}.w1.weight`)));
            expect(Array.from(src.data.subarray(e * 2 * I * H + I * H, (e + 1) * 2 * I * H))).toEqual(Array.from(part(`experts.${e}.w3.weight`)));
          }
        } else if (m[2] === "experts.down_proj") {
          expect(src.shape).toEqual([E, H, I]);
          for (let e = 0; e < E; e++) expect(Array.from(src.data.subarray(e * H * I, (e + 1) * H * I))).toEqual(Array.from(part(`experts.${e}.w2.weight`)));
        } else {
          throw new Error(`unexpected fused name ${name}`);
        }
      }
    }
  });

  test("expected.safetensors metadata names the versions", () => {
    const r = SafetensorsReader.open(join(FIX, "mixtral", "expected.safetensors"));
    expect(r.header.metadata?.transformers).toBe("5.17.0");
    expect(r.header.metadata?.unused_parameters).toBe("[]");
    expect(r.header.metadata?.zero_grad_parameters).toBe("[]");
    r.close();
  });
});
