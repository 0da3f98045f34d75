/**
 * Builds the inputs of the Transformers export check (check.py, run on the H200):
 *
 *   bun scripts/hf-export-check/make.ts [OUT (out/hf-export-check)] [--families llama,mixtral,…]
 *
 * For each family (llama, mixtral, qwen3_moe, qwen2_moe, deepseek_v3, deepseek_v2; the tiny configs
 * of core/test/fixtures/<family>/config.json with `vocab_size` 256 for byte tokens):
 * 1. `bun run train --backend cpu --world-size 2` with ZeRO-3 (fp32, AdamW lr 1e-2, 3 steps of 4×16
 *    Moby Dick byte tokens per rank) saving a sharded checkpoint to `out/hf-export-work/<family>/ckpt`;
 * 2. `bun run zero-to-fp32 CKPT OUT/<family>/hub --max-shard-size 64KiB`: config.json, several
 *    `model-0000k-of-0000n.safetensors` shards and `model.safetensors.index.json`;
 * 3. OUR logits from those exported files through the public API only: config.json →
 *    `resolveModelConfig` (@zeromoe/core/config), `createModel` (@zeromoe/core) on the CPU backend
 *    (@zeromoe/kernels), every shard of the index read with `readSafetensors`
 *    (@zeromoe/core/testing) into one state dict, `loadStateDict` strict (every tensor used), one
 *    forward under `noGrad` on fixed ids [2, 13] (ids[i] = (37·i + 11) mod 256) →
 *    `OUT/<family>/ours.json` = {input_ids: [[…],[…]], shape: [2, 13, 256], logits: flat f32}.
 * check.py loads each `hub` with AutoModelForCausalLM.from_pretrained and compares its logits.
 * Exit status: 0, or 1 when a step fails (its output is printed).
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { createModel } from "@zeromoe/core";
import { resolveModelConfig } from "@zeromoe/core/config";
import { noGrad } from "@zeromoe/core/tensor";
import { readSafetensors } from "@zeromoe/core/testing";
import { CpuBackend } from "@zeromoe/kernels";

const FAMILIES = ["llama", "mixtral", "qwen3_moe", "qwen2_moe", "deepseek_v3", "deepseek_v2"] as const;
const ROOT = resolve(import.meta.dir, "../..");
const BATCH = 2;
const SEQ = 13;
const VOCAB = 256;

const args = process.argv.slice(2);
const famIdx = args.indexOf("--families");
const families = famIdx >= 0 ? args[famIdx + 1]!.split(",") : [...FAMILIES];
const positional = args.filter((a, i) => !a.startsWith("--") && (famIdx < 0 || i !== famIdx + 1));
const out = resolve(positional[0] ?? join(ROOT, "out/hf-export-check"));
const work = join(ROOT, "out/hf-export-work");

/** Run a command in the repository root; throws with its output when it fails. */
function sh(cmd: string[]): void {
  const r = Bun.spawnSync(cmd, { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`${cmd.join(" ")} exited ${r.exitCode}\n${r.stdout.toString()}\n${r.stderr.toString()}`);
}

/** The job of one family: its fixture config with byte vocabulary, ZeRO-3 at world 2, 3 steps. */
function jobFor(family: string, ckpt: string): Record<string, unknown> {
  const model = JSON.parse(readFileSync(join(ROOT, "core/test/fixtures", family, "config.json"), "utf8")) as Record<string, unknown>;
  for (const k of ["architectures", "transformers_version", "dtype", "use_cache", "bos_token_id", "eos_token_id", "pad_token_id"]) delete model[k];
  model.vocab_size = VOCAB;
  model.initializer_range = 0.2; // logits of order 1, so a relative tolerance means something
  return {
    model,
    data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 16, validation_fraction: 0 },
    seed: 7,
    steps: 3,
    eval_interval: 0,
    train_micro_batch_size_per_gpu: 4,
    gradient_accumulation_steps: 1,
    optimizer: { type: "AdamW", params: { lr: 1e-2, weight_decay: 0.0 } },
    zero_optimization: { stage: 3, stage3_param_persistence_threshold: 0 },
    checkpoint: { dir: ckpt, save_interval: 0 },
  };
}

/** Our logits from the exported Hub directory (public API only), [BATCH·SEQ·VOCAB] row-major. */
async function ourLogits(hub: string, ids: Int32Array): Promise<Float32Array> {
  const raw = JSON.parse(readFileSync(join(hub, "config.json"), "utf8")) as Record<string, unknown>;
  const { config } = resolveModelConfig(raw);
  const indexPath = join(hub, "model.safetensors.index.json");
  const files = existsSync(indexPath)
    ? [...new Set(Object.values((JSON.parse(readFileSync(indexPath, "utf8")) as { weight_map: Record<string, string> }).weight_map))]
    : ["model.safetensors"];
  const sd = new Map<string, { dtype: "f32"; shape: number[]; data: Float32Array }>();
  for (const f of files) {
    for (const [name, t] of readSafetensors(join(hub, f))) {
      if (t.dtype !== "f32") throw new Error(`${f}: ${name} is ${t.dtype}, expected a float tensor`);
      sd.set(name, { dtype: "f32", shape: t.shape, data: t.data as Float32Array });
    }
  }
  const be = new CpuBackend();
  const model = createModel(be, config, { dtype: "f32" });
  model.loadStateDict(sd, { strict: true });
  return await noGrad(async () => {
    const o = await model.forward({ inputIds: ids, batch: BATCH, seq: SEQ });
    const v = Float32Array.from(await be.read(o.logits!.view, BATCH * SEQ * VOCAB));
    o.logits!.dispose();
    o.auxLoss?.dispose();
    return v;
  });
}

let failed = 0;
const ids = Int32Array.from({ length: BATCH * SEQ }, (_, i) => (i * 37 + 11) % VOCAB);
for (const family of families) {
  const fw = join(work, family);
  const ckpt = join(fw, "ckpt");
  const hub = join(out, family, "hub");
  try {
    rmSync(fw, { recursive: true, force: true });
    rmSync(join(out, family), { recursive: true, force: true });
    mkdirSync(fw, { recursive: true });
    mkdirSync(join(out, family), { recursive: true });
    const jobPath = join(fw, "job.json");
    writeFileSync(jobPath, JSON.stringify(jobFor(family, ckpt), null, 1));
    sh(["bun", "run", "train", "--backend", "cpu", "--world-size", "2", "--config", jobPath, "--summary", join(fw, "summary.json")]);
    sh(["bun", "run", "zero-to-fp32", ckpt, hub, "--max-shard-size", "64KiB"]);
    const logits = await ourLogits(hub, ids);
    const losses = (JSON.parse(readFileSync(join(fw, "summary.json"), "utf8")) as { losses?: number[] }).losses;
    writeFileSync(join(out, family, "ours.json"), JSON.stringify({
      family,
      train_losses: losses,
      input_ids: Array.from({ length: BATCH }, (_, b) => Array.from(ids.subarray(b * SEQ, (b + 1) * SEQ))),
      shape: [BATCH, SEQ, VOCAB],
      logits: Array.from(logits),
    }));
    let scale = 0;
    for (const v of logits) scale = Math.max(scale, Math.abs(v));
    console.log(`${family}: trained (losses ${losses?.map((l) => l.toFixed(4)).join(", ")}), exported ${hub}, logit scale ${scale.toFixed(4)}`);
  } catch (e) {
    failed++;
    console.error(`${family}: FAILED\n${(e as Error).message}`);
  }
}
process.exit(failed > 0 ? 1 : 0);
