/**
 * Builds the inputs of the Hugging Face export check (check_hf.py, run on the GPU machine):
 *
 *   bun core/test/checkpoint/hf-export/make-export.ts <out-dir>
 *
 * 1. trains a tiny mixtral (4 experts, top-2) 3 steps at world size 2 with ZeRO-3, ep_size 2, fp32,
 *    `stage3_gather_16bit_weights_on_model_save: true`, saves a sharded checkpoint and exports
 *    `<out>/save16/model.safetensors` with `engine.save16bitModel`;
 * 2. consolidates the checkpoint with zero-to-fp32 into `<out>/fp32/model.safetensors`;
 * 3. initialises a world-1 engine from the export (`--init-from`'s loader) and records its logits
 *    on fixed input ids (`<out>/inputs.json`, `<out>/logits.json`, [batch, seq, vocab] flattened);
 * 4. config.json: save16bitModel writes its own; the fp32 folder gets the same (checkpoint/hf-config.ts).
 * check_hf.py then loads both folders with `AutoModelForCausalLM.from_pretrained` and compares
 * Transformers' logits with ours.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { CpuBackend } from "@zeromoe/kernels";
import { zeroToFp32 } from "../../../src/checkpoint/consolidate.ts";
import { writeHfConfig } from "../../../src/checkpoint/hf-config.ts";
import { initFromSafetensors } from "../../../src/checkpoint/init-from.ts";
import { createSoloCommunicator } from "../../../src/comm/solo.ts";
import { resolveJobConfig } from "../../../src/config/index.ts";
import { Engine } from "../../../src/engine/engine.ts";
import { pluginsForJob } from "../../../src/engine/plugin-loader.ts";
import { launch } from "../../../src/launch/index.ts";
import { noGrad } from "../../../src/tensor/index.ts";
import { tinyJob } from "../../engine/fixtures.ts";
import { CKPT_ENTRY, type RunOut } from "../fixture.ts";

const MODEL = {
  model_type: "mixtral", vocab_size: 256, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2,
  num_attention_heads: 4, num_key_value_heads: 2, num_local_experts: 4, num_experts_per_tok: 2,
  max_position_embeddings: 64, rms_norm_eps: 1e-5, rope_theta: 1e6, router_aux_loss_coef: 0.02,
  output_router_logits: true, tie_word_embeddings: false, initializer_range: 0.3,
};

const out = resolve(process.argv[2] ?? "out/hf-export");
mkdirSync(out, { recursive: true });
const job = tinyJob({
  model: MODEL,
  moe: { ep_size: 2 },
  zero_optimization: { stage: 3, stage3_param_persistence_threshold: 0, stage3_gather_16bit_weights_on_model_save: true },
  optimizer: { type: "AdamW", params: { lr: 3e-2, weight_decay: 0.0 } },
});
await launch<RunOut[]>({
  worldSize: 2, entry: CKPT_ENTRY, timeoutS: 120,
  args: { runs: [{ job, ops: [{ op: "train", steps: 3 }, { op: "save", dir: join(out, "ckpt"), tag: "t" }, { op: "save16", dir: join(out, "save16") }] }] },
});
mkdirSync(join(out, "fp32"), { recursive: true });
zeroToFp32(join(out, "ckpt"), join(out, "fp32", "model.safetensors"));
// save16bitModel wrote save16/config.json itself; the fp32 consolidation gets the same config
writeHfConfig(join(out, "fp32"), resolveJobConfig({ ...job, world_size: 2 }).config.model, "f32");

// our logits from an engine initialised from the export
const { config } = resolveJobConfig({ ...job, world_size: 1, moe: { ep_size: 1 }, zero_optimization: { stage: 0 } });
const be = new CpuBackend();
const engine = await Engine.create({ config, comm: createSoloCommunicator(), backend: be, plugins: await pluginsForJob(config), log: () => {} });
await initFromSafetensors(engine, join(out, "save16", "model.safetensors"));
const B = 2;
const S = 11;
const ids = Int32Array.from({ length: B * S }, (_, i) => (i * 37 + 11) % MODEL.vocab_size);
const logits = await noGrad(async () => {
  const o = await engine.model.forward({ inputIds: ids, batch: B, seq: S });
  const v = await be.read(o.logits!.view, B * S * MODEL.vocab_size);
  o.logits!.dispose();
  o.auxLoss?.dispose();
  return Array.from(v);
});
writeFileSync(join(out, "inputs.json"), JSON.stringify({ input_ids: Array.from({ length: B }, (_, b) => Array.from(ids.subarray(b * S, (b + 1) * S))) }));
writeFileSync(join(out, "logits.json"), JSON.stringify({ shape: [B, S, MODEL.vocab_size], logits }));
engine.destroy();
console.log(`wrote ${out}: ckpt/, save16/, fp32/ (model.safetensors + config.json), inputs.json, logits.json`);
