/**
 * Measure forward + backward of a Llama or Mixtral model on a backend: tokens per second, and
 * peak activation memory (with and without activation checkpointing). Parameters are not updated
 * (gradients accumulate), so every step routes the same way.
 *
 *   bun core/bench/step-bench.ts [--model llama|mixtral] [--backend auto|cpu|webgpu]
 *       [--hidden 128] [--layers 2] [--heads 4] [--kv-heads 2] [--inter 344] [--vocab 512]
 *       [--experts 4] [--topk 2] [--batch 2] [--seq 64] [--steps 3] [--ckpt]
 *
 * Prints one JSON line per configuration.
 */
import { createBackend, type BackendKind } from "@zeromoe/kernels";
import { backward, randint, streamKey } from "../src/tensor/index.ts";
import { llamaConfig, mixtralConfig } from "../src/models/config.ts";
import { LlamaForCausalLM, type CausalDecoder } from "../src/models/llama.ts";
import { MixtralForCausalLM } from "../src/models/mixtral.ts";

function arg(name: string, def: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1]! : def;
}

const kind = arg("model", "llama");
const hidden = Number(arg("hidden", "128"));
const cfgJson = {
  vocab_size: Number(arg("vocab", "512")),
  hidden_size: hidden,
  intermediate_size: Number(arg("inter", String(Math.round((hidden * 8) / 3)))),
  num_hidden_layers: Number(arg("layers", "2")),
  num_attention_heads: Number(arg("heads", "4")),
  num_key_value_heads: Number(arg("kv-heads", "2")),
  max_position_embeddings: 4096,
  num_local_experts: Number(arg("experts", "4")),
  num_experts_per_tok: Number(arg("topk", "2")),
  output_router_logits: true,
};
const B = Number(arg("batch", "2"));
const S = Number(arg("seq", "64"));
const steps = Number(arg("steps", "3"));
const { backend: be, reason } = await createBackend(arg("backend", "auto") as BackendKind);
console.error(reason);

for (const ckpt of process.argv.includes("--ckpt") ? [false, true] : [false]) {
  const model: CausalDecoder =
    kind === "mixtral"
      ? new MixtralForCausalLM(be, mixtralConfig({ ...cfgJson }), { seed: 1 })
      : new LlamaForCausalLM(be, llamaConfig({ vocab_size: cfgJson.vocab_size, hidden_size: hidden, intermediate_size: cfgJson.intermediate_size, num_hidden_layers: cfgJson.num_hidden_layers, num_attention_heads: cfgJson.num_attention_heads, num_key_value_heads: cfgJson.num_key_value_heads, max_position_embeddings: 4096 }), { seed: 1 });
  model.gradientCheckpointing = ckpt;
  const ids = randint(B * S, cfgJson.vocab_size, streamKey(1, "bench"));
  const times: number[] = [];
  let loss = 0;
  for (let s = 0; s < steps + 1; s++) {
    be.resetPeak();
    const t0 = performance.now();
    const out = await model.forward({ inputIds: ids, labels: ids, batch: B, seq: S });
    await backward(out.loss!.retain());
    loss = await out.loss!.item();
    out.loss!.dispose();
    await be.flush();
    if (s > 0) times.push(performance.now() - t0); // step 0 warms pipelines and pools
  }
  const ms = times.reduce((a, b) => a + b, 0) / times.length;
  const mem = be.memory();
  console.log(JSON.stringify({ model: kind, backend: be.info.name, adapter: be.info.adapter, params: model.numParameters, batch: B, seq: S, ckpt, ms_per_step: +ms.toFixed(1), tokens_per_s: Math.round((B * S) / (ms / 1000)), peak_activation_mb: +(mem.peak.activation / 2 ** 20).toFixed(2), loss: +loss.toFixed(4) }));
  model.destroy();
}
