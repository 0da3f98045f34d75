/**
 * Builds the inputs of the DeepSpeed cross-check (check.py, run where DeepSpeed is installed):
 *
 *   bun core/bench/deepspeed-config-check/make.ts [OUT (out/deepspeed-config-check)]
 *
 * writes OUT/cases.json: one case per DeepSpeed 0.19 key at its default
 * (core/test/config/deepspeed-0.19-keys.ts; keys whose default is None are skipped) and one per
 * missing feature turned on (FEATURE_ON, ZERO_FEATURE_ON at ZeRO stage 3), each
 * {name, kind: "default" | "feature-on", config, ours: "accepted" | "refused", message}, where
 * `config` is the DeepSpeed config as DeepSpeed will read it (with train_micro_batch_size_per_gpu 2
 * and gradient_accumulation_steps 1, as a real file has) and `ours` is ZeroMoE's verdict on the
 * same file laid over the default job at world size 1.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { ConfigError, DEFAULT_JOB, resolveJobConfig } from "../../src/config/index.ts";
import { DEEPSPEED_019_KEYS, FEATURE_ON, ZERO_FEATURE_ON } from "../../test/config/deepspeed-0.19-keys.ts";

const OUT = resolve(process.argv[2] ?? join(import.meta.dirname, "../../../out/deepspeed-config-check"));

function nest(path: string, v: unknown): Record<string, unknown> {
  const ks = path.split(".");
  let o: unknown = v;
  for (let i = ks.length - 1; i >= 0; i--) o = { [ks[i]!]: o };
  return o as Record<string, unknown>;
}

function merge(a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const out = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const x = out[k];
    out[k] = x && typeof x === "object" && !Array.isArray(x) && v && typeof v === "object" && !Array.isArray(v) ? merge(x as Record<string, unknown>, v as Record<string, unknown>) : v;
  }
  return out;
}

const BATCH = { train_micro_batch_size_per_gpu: 2, gradient_accumulation_steps: 1 };
const cases: { name: string; kind: string; config: Record<string, unknown>; ours: string; message: string }[] = [];
function add(name: string, kind: string, ds: Record<string, unknown>): void {
  const config = merge(BATCH, ds);
  let ours = "accepted";
  let message = "";
  try {
    resolveJobConfig({ ...DEFAULT_JOB, train_micro_batch_size_per_gpu: 2 }, { deepspeed: { raw: config, source: "ds.json" }, overrides: { world_size: 1 } });
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    ours = "refused";
    message = e.issues.map((i) => `${i.path}: ${i.message}`).join("; ");
  }
  cases.push({ name, kind, config, ours, message });
}
for (const [k, v] of Object.entries(DEEPSPEED_019_KEYS)) if (v !== undefined && !k.startsWith("train_micro") && !k.startsWith("gradient_accumulation")) add(k, "default", nest(k, v));
for (const [k, v] of Object.entries(FEATURE_ON)) add(`${k} on`, "feature-on", { [k]: v });
for (const [k, v] of Object.entries(ZERO_FEATURE_ON)) add(`zero_optimization.${k} on`, "feature-on", { zero_optimization: { stage: 3, [k]: v } });
mkdirSync(OUT, { recursive: true });
writeFileSync(join(OUT, "cases.json"), JSON.stringify(cases, null, 1));
console.log(`${cases.length} cases (${cases.filter((c) => c.ours === "refused").length} refused by ZeroMoE) → ${join(OUT, "cases.json")}`);
