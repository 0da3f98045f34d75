/** Test helper: tiny Llama/Mixtral configs at awkward sizes and a plain SGD step over units. */
import type { Backend } from "@zeromoe/kernels";
import type { Unit, UnitHooks, UnitSet } from "../src/nn/unit.ts";
import { llamaConfig, mixtralConfig, type LlamaConfig, type MixtralConfig } from "../src/models/config.ts";
import type { CausalDecoder } from "../src/models/llama.ts";
import { randint, streamKey } from "../src/tensor/index.ts";

/** vocab 37, hidden 18 (3 heads of 6, 1 kv head), intermediate 20, 2 layers. */
export function tinyLlama(over: Record<string, unknown> = {}): LlamaConfig {
  return llamaConfig({ vocab_size: 37, hidden_size: 18, intermediate_size: 20, num_hidden_layers: 2, num_attention_heads: 3, num_key_value_heads: 1, max_position_embeddings: 64, ...over });
}

/** vocab 29, hidden 12 (2 heads of 6, 1 kv head), intermediate 10, 2 layers, 5 experts top-2. */
export function tinyMixtral(over: Record<string, unknown> = {}): MixtralConfig {
  return mixtralConfig({
    vocab_size: 29,
    hidden_size: 12,
    intermediate_size: 10,
    num_hidden_layers: 2,
    num_attention_heads: 2,
    num_key_value_heads: 1,
    num_local_experts: 5,
    num_experts_per_tok: 2,
    max_position_embeddings: 64,
    output_router_logits: true,
    router_aux_loss_coef: 0.05,
    ...over,
  });
}

/** Random token ids (deterministic per name). */
export function tokens(n: number, vocab: number, name: string): Int32Array {
  return randint(n, vocab, streamKey(3, name));
}

/** param -= lr · grad for every f32 unit, then zero the gradients. */
export function sgdStep(be: Backend, model: CausalDecoder, lr: number): void {
  for (const u of model.units.units) {
    if (!u.grad || !u.data) continue;
    if (u.dtype !== "f32") throw new Error("sgdStep: f32 units only");
    be.axpy(-lr, { buf: u.grad, off: 0 }, { buf: u.data, off: 0 }, u.numel);
  }
  model.zeroGrad();
}

/** Installs hooks that behave like ZeRO-3 on `set`: a unit's data exists only between gather and
 * release (restored from a host copy, as an all_gather would; every unit's data is freed here),
 * gradients are moved out at gradReady into the returned map (unit name → gradient). */
export async function zero3Like(be: Backend, set: UnitSet): Promise<Map<string, Float32Array | Float64Array>> {
  const units = set.units;
  const host = new Map<Unit, Float32Array | Float64Array>();
  const grads = new Map<string, Float32Array | Float64Array>();
  for (const u of units) host.set(u, (await be.read({ buf: u.data!, off: 0 }, u.numel)) as Float32Array);
  const hooks: UnitHooks = {
    gather: async (u) => {
      if (u.data) return;
      const buf = be.alloc("f32", u.numel, "gathered");
      be.write({ buf, off: 0 }, host.get(u)!);
      u.data = buf;
    },
    release: (u) => {
      if (u.data) be.free(u.data);
      u.data = null;
    },
    gradReady: async (u) => {
      grads.set(u.name, (await be.read({ buf: u.grad!, off: 0 }, u.numel)) as Float32Array);
      be.free(u.grad!);
      u.grad = null;
    },
  };
  for (const u of units) {
    be.free(u.data!);
    u.data = null;
  }
  set.hooks = hooks;
  return grads;
}

