/**
 * Per-kernel GPU time of one forward + backward of a fixed benchmark model (core/bench/train.ts's
 * BENCH_MODELS: llama-small, mixtral-small, mixtral-med, …) on the WebGPU backend, against the
 * step's wall time.
 *
 *   bun core/bench/step-profile.ts [--model mixtral-med] [--steps 2] [--top 25] [--attention auto|rows]
 *
 * Two backends are opened on the same adapter: a plain one times `steps` forward + backward passes
 * (wall ms, after one warm-up pass), and one created with `profile: true` (every dispatch in its own
 * timestamped compute pass, kernels/src/webgpu/profiler.ts) sums GPU time per kernel label over the
 * same number of passes. Printed: the adapter, wall ms per pass, profiled GPU ms per pass, and one
 * line per kernel label (ms per pass, share of the GPU total, dispatches per pass). Parameters are
 * not updated (gradients accumulate), so every pass routes the same way. Throws when no WebGPU
 * adapter is available.
 */
import { createBackend } from "../../kernels/src/select.ts";
import type { WebGpuBackend } from "../../kernels/src/webgpu/backend.ts";
import { backward, randint, streamKey } from "../src/tensor/index.ts";
import { llamaConfig, mixtralConfig } from "../src/models/config.ts";
import { LlamaForCausalLM, type CausalDecoder } from "../src/models/llama.ts";
import { MixtralForCausalLM } from "../src/models/mixtral.ts";
import { BENCH_MODELS } from "./train.ts";

function arg(name: string, def: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1]! : def;
}

const name = arg("model", "mixtral-med");
const m = BENCH_MODELS[name];
if (!m) {
  console.error(`step-profile: unknown --model "${name}"; known: ${Object.keys(BENCH_MODELS).join(", ")}`);
  process.exit(2);
}
const steps = Number(arg("steps", "2"));
const top = Number(arg("top", "25"));
const attention = arg("attention", "auto") as "auto" | "rows";

async function passes(be: WebGpuBackend, n: number): Promise<number[]> {
  const cfg: Record<string, unknown> = { ...m!.model, max_position_embeddings: Math.max(m!.seqLen, m!.model.max_position_embeddings as number) };
  const model: CausalDecoder = cfg.model_type === "mixtral" ? new MixtralForCausalLM(be, mixtralConfig(cfg), { seed: 1 }) : new LlamaForCausalLM(be, llamaConfig(cfg), { seed: 1 });
  const ids = randint(m!.micro * m!.seqLen, cfg.vocab_size as number, streamKey(1, "profile"));
  const times: number[] = [];
  for (let s = 0; s < n; s++) {
    const t0 = performance.now();
    const out = await model.forward({ inputIds: ids, labels: ids, batch: m!.micro, seq: m!.seqLen });
    await backward(out.loss!.retain());
    await out.loss!.item();
    out.loss!.dispose();
    await be.flush();
    times.push(performance.now() - t0);
  }
  model.destroy();
  return times;
}

const plain = (await createBackend("webgpu", { attention })).backend as WebGpuBackend;
console.log(`adapter: ${plain.info.adapter}; model ${name}, micro ${m.micro} × seq ${m.seqLen}`);
const wall = (await passes(plain, steps + 1)).slice(1);
plain.destroy();
const wallMs = wall.reduce((a, b) => a + b, 0) / wall.length;

const prof = (await createBackend("webgpu", { attention, profile: true })).backend as WebGpuBackend;
await passes(prof, 1);
await prof.profile();
prof.resetProfile();
const profWall = await passes(prof, steps);
const rows = await prof.profile();
prof.destroy();
const totalNs = rows.reduce((a, r) => a + r.ns, 0);
console.log(`wall ms per forward+backward (unprofiled): ${wallMs.toFixed(1)}; profiled run wall ${(profWall.reduce((a, b) => a + b, 0) / steps).toFixed(1)}; GPU kernel ms: ${(totalNs / 1e6 / steps).toFixed(1)} (${rows.reduce((a, r) => a + r.dispatches, 0) / steps} dispatches)`);
console.log("| kernel | ms/pass | share | dispatches/pass |\n| --- | ---: | ---: | ---: |");
for (const r of rows.slice(0, top)) console.log(`| ${r.label} | ${(r.ns / 1e6 / steps).toFixed(2)} | ${((100 * r.ns) / totalNs).toFixed(1)}% | ${r.dispatches / steps} |`);
