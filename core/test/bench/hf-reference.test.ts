/**
 * core/bench/hf_reference.py: Transformers trained on ZeroMoE's dumped batches from its step-0
 * weights (`--dump-batches`, `--save-init`) must give ZeroMoE's losses.
 *
 * Pure-Python parts (always, with python3): the learning-rate schedule against ZeroMoE's own
 * scheduler (core/src/optim/schedulers.ts, an independent implementation of DeepSpeed's), the
 * refusal of job settings Transformers cannot reproduce, and `--reference --compare --tolerance`.
 * End to end (when the Python named by ZEROMOE_TORCH_PYTHON, default python3, imports torch,
 * transformers and safetensors; skipped otherwise): tiny llama, mixtral and qwen3_moe jobs at
 * awkward sizes (vocab 263, seq 17, micro-batch 3, accumulation 2, clipping, weight decay, a
 * warm-up + cosine schedule) trained 4 steps on the cpu backend, then by the script on the CPU:
 * fp32 losses within 1e-5 relative (observed ~1e-7: the same arithmetic up to f32 summation
 * order), identical per-step expert counts at step 1; bf16 (ZeroMoE's bf16 parameters with f32
 * compute against torch.autocast) within 1e-3 (observed ~5e-5).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createScheduler } from "../../src/optim/schedulers.ts";
import { resolveJobConfig } from "../../src/config/resolve.ts";
import type { TrainSummary } from "../../src/train/summary.ts";

const ROOT = resolve(import.meta.dir, "../../..");
const SCRIPT = join(ROOT, "core/bench/hf_reference.py");
const CLI = join(ROOT, "core/src/cli/train.ts");
const PY = process.env.ZEROMOE_TORCH_PYTHON ?? "python3";
const dir = mkdtempSync(join(tmpdir(), "zeromoe-hfref-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function run(cmd: string[]): { code: number; stdout: string; stderr: string } {
  const p = Bun.spawnSync(cmd, { cwd: ROOT, env: { ...process.env, CI: "1" } });
  return { code: p.exitCode ?? -1, stdout: p.stdout.toString(), stderr: p.stderr.toString() };
}

const hasPython = run([PY, "-c", "import json"]).code === 0;
const hasTorch = hasPython && run([PY, "-c", "import torch, transformers, safetensors"]).code === 0;

/** Run `code` with hf_reference importable as `h`; returns its stdout parsed as JSON. */
function py(code: string): unknown {
  const r = run([PY, "-c", `import sys, json; sys.path.insert(0, ${JSON.stringify(join(ROOT, "core/bench"))}); import hf_reference as h\n${code}`]);
  if (r.code !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout);
}

function baseJob(model: Record<string, unknown>, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    model: { vocab_size: 263, hidden_size: 32, intermediate_size: 44, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 64, ...model },
    data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 17 },
    backend: "cpu", steps: 4, eval_interval: 0, train_micro_batch_size_per_gpu: 3, gradient_accumulation_steps: 2,
    optimizer: { type: "AdamW", params: { lr: 3e-3, betas: [0.9, 0.95], weight_decay: 0.1 } },
    scheduler: { type: "WarmupCosineLR", params: { warmup_num_steps: 2, cos_min_ratio: 0.1 } },
    gradient_clipping: 0.5,
    ...extra,
  };
}

describe.skipIf(!hasPython)("hf_reference.py without torch", () => {
  test("the lr of every step equals ZeroMoE's scheduler (DeepSpeed's step convention) for each schedule", () => {
    const schedules = [
      null,
      { type: "WarmupLR", params: { warmup_min_lr: 1e-5, warmup_max_lr: 3e-3, warmup_num_steps: 7, warmup_type: "linear" } },
      { type: "WarmupLR", params: { warmup_min_lr: 0, warmup_max_lr: 2e-3, warmup_num_steps: 5, warmup_type: "log" } },
      { type: "WarmupDecayLR", params: { warmup_min_lr: 1e-5, warmup_max_lr: 3e-3, warmup_num_steps: 4, warmup_type: "linear", total_num_steps: 23 } },
      { type: "WarmupCosineLR", params: { warmup_num_steps: 6, warmup_type: "linear", warmup_min_ratio: 0.05, cos_min_ratio: 0.1, total_num_steps: 29 } },
      { type: "WarmupCosineLR", params: { warmup_num_steps: 3, warmup_type: "log", warmup_min_ratio: 0, cos_min_ratio: 0, total_num_steps: 11 } },
    ];
    const jobs = schedules.map((sc) => resolveJobConfig(baseJob({ model_type: "llama" }, { steps: 31, scheduler: sc ?? undefined })).config);
    const got = py(`jobs = json.loads(${JSON.stringify(JSON.stringify(jobs))}); print(json.dumps([[h.lr_at(job, s) for s in range(1, 32)] for job in jobs]))`) as number[][];
    jobs.forEach((job, j) => {
      const s = createScheduler(job.scheduler, job.optimizer.params.lr);
      for (let step = 1; step <= 31; step++) {
        const want = s.getLr();
        expect(Math.abs(got[j]![step - 1]! - want)).toBeLessThanOrEqual(1e-15 + 1e-12 * Math.abs(want));
        s.step();
      }
    });
  }, 300_000);

  test("settings Transformers cannot reproduce are refused, each named", () => {
    const moe = { model_type: "mixtral", num_local_experts: 4, num_experts_per_tok: 2, output_router_logits: true };
    const cases: [Record<string, unknown>, RegExp][] = [
      [baseJob({ model_type: "llama" }, { fp16: { enabled: true } }), /^fp16\.enabled/],
      [baseJob({ model_type: "llama" }, { optimizer: { type: "Lamb", params: { lr: 1e-3 } } }), /^optimizer: Lamb/],
      [baseJob({ model_type: "llama" }, { scheduler: { type: "OneCycle", params: { cycle_min_lr: 1e-4, cycle_max_lr: 1e-3 } } }), /^scheduler\.type: OneCycle/],
      [baseJob(moe, { moe: { z_loss_coef: 0.01 } }), /^moe\.z_loss_coef/],
      [baseJob(moe, { moe: { aux_loss: "switch", drop_tokens: false } }), /^moe\.aux_loss: 'switch'/],
      [baseJob(moe, { moe: { drop_tokens: true } }), /^moe\.drop_tokens/],
      [baseJob(moe, { moe: { noisy_gate_policy: "Jitter" } }), /^moe\.noisy_gate_policy/],
    ];
    const jobs = cases.map(([raw]) => resolveJobConfig(raw).config);
    const all = py(`print(json.dumps([h.check_job(j, "eager") for j in json.loads(${JSON.stringify(JSON.stringify(jobs))})]))`) as string[][];
    cases.forEach(([, re], i) => {
      expect(all[i]!.length, JSON.stringify(all[i])).toBe(1);
      expect(all[i]![0]).toMatch(re);
    });
    const ok = resolveJobConfig(baseJob(moe)).config;
    expect(py(`print(json.dumps(h.check_job(json.loads(${JSON.stringify(JSON.stringify(ok))}), "eager")))`)).toEqual([]);
  }, 300_000);

  test("--reference --compare: per-step relative differences, routing differences, --tolerance sets the exit status", () => {
    const ref = { losses: [10, 8, 4], start_step: 0, step_expert_counts: [[[3, 1], [2, 2]], [[2, 2], [4, 0]], [[1, 3], [0, 4]]] };
    const zs = { losses: [10.1, 8, 4.4], start_step: 0, moe: { step_expert_counts: [[[3, 1], [2, 2]], [[1, 3], [4, 0]], [[1, 3], [1, 3]]] } };
    const refPath = join(dir, "ref.json");
    const sumPath = join(dir, "zs.json");
    writeFileSync(refPath, JSON.stringify(ref));
    writeFileSync(sumPath, JSON.stringify(zs));
    const r = run([PY, SCRIPT, "--reference", refPath, "--compare", sumPath]);
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split("\n").map((l) => JSON.parse(l));
    expect(lines[0]).toMatchObject({ compare_step: 1, rel_diff: expect.closeTo(0.01, 12), routing_diff: [0, 0] });
    expect(lines[1].routing_diff).toEqual([0.25, 0]);
    expect(lines[2]).toMatchObject({ rel_diff: expect.closeTo(0.1, 12), routing_diff: [0, 0.25] });
    expect(lines[3].compare).toMatchObject({ steps: 3, max_rel_diff: expect.closeTo(0.1, 12), worst_step: 3, max_routing_diff: 0.25 });
    expect(run([PY, SCRIPT, "--reference", refPath, "--compare", sumPath, "--tolerance", "0.2"]).code).toBe(0);
    const bad = run([PY, SCRIPT, "--reference", refPath, "--compare", sumPath, "--tolerance", "0.05"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/largest relative loss difference 0\.1 \(step 3\) exceeds --tolerance 0\.05/);
    const missing = run([PY, SCRIPT, "--batches", join(dir, "nowhere"), "--weights", dir]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/batches\.json: not found/);
  }, 300_000);
});

/** Train `job` with ZeroMoE (dump + step-0 weights), then with the script; returns the comparison. */
function parity(name: string, job: Record<string, unknown>): { compare: { max_rel_diff: number; max_routing_diff: number | null }; lines: { routing_diff?: number[] }[] } {
  const jobPath = join(dir, `${name}.json`);
  writeFileSync(jobPath, JSON.stringify(job));
  const dump = join(dir, `${name}-batches`);
  const init = join(dir, `${name}-init`);
  const sum = join(dir, `${name}-summary.json`);
  const z = run(["bun", CLI, "--config", jobPath, "--dump-batches", dump, "--save-init", init, "--summary", sum]);
  expect(z.stderr).toBe("");
  expect(z.code).toBe(0);
  const log = join(dir, `${name}-steps.jsonl`);
  const r = run([PY, SCRIPT, "--batches", dump, "--weights", init, "--device", "cpu", "--attn", "eager", "--compare", sum, "--log", log]);
  if (r.code !== 0) throw new Error(r.stderr);
  const out = r.stdout.trim().split("\n").map((l) => JSON.parse(l));
  const steps = readFileSync(log, "utf8").trim().split("\n").map((l) => JSON.parse(l));
  expect(steps.filter((l) => "step" in l).length).toBe((JSON.parse(readFileSync(sum, "utf8")) as TrainSummary).steps);
  return { compare: out.find((l) => "compare" in l).compare, lines: steps.filter((l) => "compare_step" in l) };
}

describe.skipIf(!hasTorch)("hf_reference.py against ZeroMoE (torch on the CPU)", () => {
  for (const [name, model] of [
    ["llama", { model_type: "llama" }],
    ["mixtral", { model_type: "mixtral", num_local_experts: 5, num_experts_per_tok: 2, output_router_logits: true, router_aux_loss_coef: 0.02 }],
    ["qwen3_moe", { model_type: "qwen3_moe", num_local_experts: 6, num_experts_per_tok: 3, moe_intermediate_size: 20, head_dim: 12, output_router_logits: true, router_aux_loss_coef: 0.01, mlp_only_layers: [1], norm_topk_prob: true }],
  ] as [string, Record<string, unknown>][]) {
    test(`${name}: fp32 losses within 1e-5 of ZeroMoE's, bf16 within 1e-3`, () => {
      const f = parity(`${name}-fp32`, baseJob(model));
      expect(f.compare.max_rel_diff).toBeLessThan(1e-5);
      if (model.model_type !== "llama") {
        expect(f.lines[0]!.routing_diff!.every((d) => d === 0)).toBe(true);
        expect(f.compare.max_routing_diff!).toBeLessThan(0.05);
      }
      const b = parity(`${name}-bf16`, baseJob(model, { bf16: { enabled: true } }));
      expect(b.compare.max_rel_diff).toBeLessThan(1e-3);
    }, 300_000);
  }
});
