/**
 * Time to construct one of the fixed benchmark models (core/bench/train.ts's BENCH_MODELS) on a
 * backend: allocation plus parameter initialisation (nn/init.ts), wall seconds and the process's
 * CPU seconds (all threads), and the parameters per wall second.
 *
 *   bun core/bench/build-time.ts [--model mixtral-small] [--backend cpu|webgpu] [--seed 1]
 *
 * Parameters are initialised on the backend itself (nn/init.ts: one `randomFill` per parameter
 * piece; on webgpu only keys and scales cross the bus). Unknown model or backend: one line, exit 2.
 */
import { createBackend } from "@zeromoe/kernels";
import { llamaConfig, mixtralConfig } from "../src/models/config.ts";
import { LlamaForCausalLM } from "../src/models/llama.ts";
import { MixtralForCausalLM } from "../src/models/mixtral.ts";
import { BENCH_MODELS } from "./train.ts";

function arg(name: string, def: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1]! : def;
}

const name = arg("model", "mixtral-small");
const m = BENCH_MODELS[name];
if (!m) {
  console.error(`build-time: unknown --model "${name}"; known: ${Object.keys(BENCH_MODELS).join(", ")}`);
  process.exit(2);
}
const kind = arg("backend", "cpu");
if (kind !== "cpu" && kind !== "webgpu") {
  console.error(`build-time: --backend must be cpu or webgpu, got "${kind}"`);
  process.exit(2);
}
const seed = Number(arg("seed", "1"));
const be = (await createBackend(kind)).backend;
const cfg: Record<string, unknown> = { ...m.model, max_position_embeddings: Math.max(m.seqLen, m.model.max_position_embeddings as number) };
const cpuSeconds = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};
const c0 = cpuSeconds();
const t0 = performance.now();
const model = cfg.model_type === "mixtral" ? new MixtralForCausalLM(be, mixtralConfig(cfg), { seed }) : new LlamaForCausalLM(be, llamaConfig(cfg), { seed });
await be.flush();
const wall = (performance.now() - t0) / 1000;
console.log(`${name} on ${be.info.name} (${be.info.adapter}): ${model.numParameters.toLocaleString("en-US")} parameters built in ${wall.toFixed(2)} s wall, ${(cpuSeconds() - c0).toFixed(2)} s process CPU, ${(model.numParameters / wall / 1e6).toFixed(1)} M parameters/s`);
