/**
 * Per-kernel GPU time of forward + backward passes of a fixed benchmark model (core/bench/train.ts's
 * BENCH_MODELS: llama-small, mixtral-small, mixtral-med, …) on the WebGPU backend.
 *
 *   bun core/bench/step-profile.ts [--model mixtral-med] [--steps 2] [--top 30] [--configs before,after]
 *
 * One backend is created with `profile: true` (every dispatch in its own timestamped compute pass,
 * kernels/src/webgpu/profiler.ts) and the model is built once on it (building mixtral-med's 579M
 * parameters takes tens of seconds). For each config — `before`: the older tiled attention kernels
 * (split-K off); `after`: the backend's defaults (fused attention kernels, split-K as the tile rules choose) — one
 * warm-up pass runs, then `steps` passes are timed: wall ms per pass (inflated by the per-dispatch
 * passes of the profiler: the unprofiled step time is `bun run bench train`'s), GPU kernel ms per pass,
 * and one line per kernel label (ms per pass, share of the GPU total, dispatches per pass).
 * Parameters are not updated (gradients accumulate), so every pass routes the same way. Throws when
 * no WebGPU adapter is available.
 */
import { createBackend, type WebGpuBackend } from "@zeromoe/kernels";
import { backward, randint, streamKey } from "../src/tensor/index.ts";
import { llamaConfig, mixtralConfig } from "../src/models/config.ts";
import { LlamaForCausalLM, type CausalDecoder } from "../src/models/llama.ts";
import { MixtralForCausalLM } from "../src/models/mixtral.ts";
import { BENCH_MODELS } from "./train.ts";

function arg(name: string, def: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1]! : def;
}

const CONFIGS = {
  before: { attention: "tiled", matmulSplitK: false },
  after: { attention: "auto" },
} as const;

const name = arg("model", "mixtral-med");
const m = BENCH_MODELS[name];
if (!m) {
  console.error(`step-profile: unknown --model "${name}"; known: ${Object.keys(BENCH_MODELS).join(", ")}`);
  process.exit(2);
}
const configs = arg("configs", "before,after").split(",") as (keyof typeof CONFIGS)[];
for (const c of configs) {
  if (!(c in CONFIGS)) {
    console.error(`step-profile: unknown --configs entry "${c}"; known: ${Object.keys(CONFIGS).join(", ")}`);
    process.exit(2);
  }
}
const steps = Number(arg("steps", "2"));
const top = Number(arg("top", "30"));

const be = (await createBackend("webgpu", { profile: true })).backend as WebGpuBackend;
const cfg: Record<string, unknown> = { ...m.model, max_position_embeddings: Math.max(m.seqLen, m.model.max_position_embeddings as number) };
const t0 = performance.now();
const model: CausalDecoder = cfg.model_type === "mixtral" ? new MixtralForCausalLM(be, mixtralConfig(cfg), { seed: 1 }) : new LlamaForCausalLM(be, llamaConfig(cfg), { seed: 1 });
console.log(`adapter: ${be.info.adapter}; model ${name} (${model.numParameters.toLocaleString("en-US")} parameters, built in ${((performance.now() - t0) / 1000).toFixed(1)} s), micro ${m.micro} × seq ${m.seqLen}`);
const ids = randint(m.micro * m.seqLen, cfg.vocab_size as number, streamKey(1, "profile"));

async function pass(): Promise<number> {
  const t = performance.now();
  const out = await model.forward({ inputIds: ids, labels: ids, batch: m!.micro, seq: m!.seqLen });
  await backward(out.loss!.retain());
  await out.loss!.item();
  out.loss!.dispose();
  await be.flush();
  return performance.now() - t;
}

for (const c of configs) {
  be.setKernelOptions(CONFIGS[c]);
  await pass();
  await be.profile();
  be.resetProfile();
  let wall = 0;
  for (let s = 0; s < steps; s++) wall += await pass();
  const rows = await be.profile();
  be.resetProfile();
  const totalNs = rows.reduce((a, r) => a + r.ns, 0);
  console.log(`\n### ${c} (${JSON.stringify(CONFIGS[c])})\nprofiled wall ms per forward+backward: ${(wall / steps).toFixed(1)}; GPU kernel ms: ${(totalNs / 1e6 / steps).toFixed(1)} (${rows.reduce((a, r) => a + r.dispatches, 0) / steps} dispatches)`);
  console.log("| kernel | ms/pass | share | dispatches/pass |\n| --- | ---: | ---: | ---: |");
  for (const r of rows.slice(0, top)) console.log(`| ${r.label} | ${(r.ns / 1e6 / steps).toFixed(2)} | ${((100 * r.ns) / totalNs).toFixed(1)}% | ${r.dispatches / steps} |`);
}
model.destroy();
be.destroy();
