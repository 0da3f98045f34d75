/**
 * Issue 16's "what must be shown", as a small job: world size 2, ZeRO-3 + MoE ep_size 2 on the cpu
 * backend with wall_clock_breakdown, comms_logger, flops_profiler, csv_monitor and tensorboard all
 * enabled. Checks the log lines, the summary's history (phase times sum to the step time within
 * 5 %, expert counts per window sum to tokens × k per layer), that the comms logger's bytes equal
 * the summary's comm bytes per op, the CSV files as DeepSpeed writes them, and the TensorBoard
 * event file read back by the Python `tensorboard` package when it is installed (else by the
 * TFRecord framing check of tensorboard-writer.test.ts's reader).
 */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readTfRecords } from "./tfrecord-reader.ts";

const ROOT = new URL("../../../", import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), "zeromoe-observe-"));
const STEPS = 7;
const JOB = {
  world_size: 2, steps: STEPS, steps_per_print: 3, eval_interval: 3, eval_batches: 2, backend: "cpu", seed: 5,
  model: {
    model_type: "mixtral", vocab_size: 256, hidden_size: 24, intermediate_size: 40, num_hidden_layers: 2,
    num_attention_heads: 3, num_key_value_heads: 1, num_local_experts: 4, num_experts_per_tok: 2,
    max_position_embeddings: 64, output_router_logits: true,
  },
  moe: { ep_size: 2 },
  data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 13 },
  train_micro_batch_size_per_gpu: 3, gradient_accumulation_steps: 2,
  wall_clock_breakdown: true,
  comms_logger: { enabled: true },
  flops_profiler: { enabled: true, profile_step: 2, module_depth: 2, top_modules: 2, output_file: join(dir, "flops.txt") },
  csv_monitor: { enabled: true, output_path: join(dir, "csv"), job_name: "obs" },
  tensorboard: { enabled: true, output_path: join(dir, "tb"), job_name: "obs" },
  zero_optimization: { stage: 3, allgather_bucket_size: 1000 },
};
const TOKENS_PER_STEP = 3 * 2 * 2 * 13;

function hasPythonTensorboard(): boolean {
  return Bun.spawnSync(["python3", "-c", "import tensorboard.backend.event_processing.event_file_loader"]).exitCode === 0;
}

describe("an observed ZeRO-3 + MoE ep 2 job at world size 2", async () => {
  writeFileSync(join(dir, "job.json"), JSON.stringify(JOB));
  const p = Bun.spawnSync(["bun", "core/src/cli/train.ts", "--config", join(dir, "job.json"), "--summary", join(dir, "s.json"), "--plots", join(dir, "plots")], { cwd: ROOT, env: { ...process.env, CI: "1" } });
  const log = p.stdout.toString() + p.stderr.toString();
  test("runs", () => {
    if (p.exitCode !== 0) console.error(log);
    expect(p.exitCode).toBe(0);
  });
  const s = p.exitCode === 0 ? JSON.parse(readFileSync(join(dir, "s.json"), "utf8")) : null;

  test("log lines: the no-effect warning, per-rank breakdowns, the comms table, the profile file", () => {
    expect(log).toContain("warning: zero_optimization.allgather_bucket_size: accepted but has no effect here");
    for (const step of [3, 6, 7]) for (const r of [0, 1]) expect(log).toMatch(new RegExp(`time rank ${r} step ${step} \\| step [\\d.]+ ms \\| forward [\\d.]+ \\([\\d.]+%\\)`));
    expect(log).toContain("comms summary (rank 0)");
    expect(log).toContain("all_to_all_v");
    const prof = readFileSync(join(dir, "flops.txt"), "utf8");
    expect(prof).toContain("Profile Summary at step 2");
    expect(prof).toMatch(/MFU \(achieved \/ peak\):\s+[\d.]+ %/);
    expect(prof).toContain("layers.0.experts.0");
    expect(prof).not.toContain("layers.0.experts.0.w1"); // module_depth 2
  });

  test("history: phases sum to the step time within 5 %, expert counts sum to tokens × k per layer", () => {
    expect(s.history.map((h: { step: number }) => h.step)).toEqual([3, 6, 7]);
    const windows = [3, 3, 1];
    s.history.forEach((h: any, i: number) => {
      const sum = Object.values(h.phases_ms as Record<string, number>).reduce((a, b) => a + b, 0);
      expect(Math.abs(sum - h.step_ms) / h.step_ms).toBeLessThan(0.05);
      expect(h.expert_counts.length).toBe(2);
      for (const row of h.expert_counts) expect(row.reduce((a: number, b: number) => a + b, 0)).toBe(windows[i]! * TOKENS_PER_STEP * 2);
      expect(h.comm_ms.all_to_all_v).toBeGreaterThan(0);
      expect(h.comm_share).toBeGreaterThan(0);
      expect(h.comm_share).toBeLessThan(1);
      expect(h.memory.param).toBeGreaterThan(0);
    });
    // the windows add up to the run's expert counts
    for (let l = 0; l < 2; l++) for (let e = 0; e < 4; e++) expect(s.history.reduce((a: number, h: any) => a + h.expert_counts[l][e], 0)).toBe(s.moe.expert_counts[l][e]);
    expect(s.eval_history.map((e: { step: number }) => e.step)).toEqual([3, 6, 7]);
    expect(s.history[1].val_loss).toBe(s.eval_history[1].val_loss);
    expect(s.wall_clock.per_rank.length).toBe(2);
  });

  test("comms logger bytes equal the summary's comm bytes, per rank and op", () => {
    const names: Record<string, string> = { all_gather: "all_gather", reduce_scatter: "reduce_scatter", all_reduce: "all_reduce", all_to_all_v: "all_to_all", broadcast: "broadcast" };
    for (const r of [0, 1]) {
      const ops = s.comms.per_rank[r].ops as { op: string; bytes: number; count: number; algbw: number }[];
      for (const [op, key] of Object.entries(names)) {
        const logged = ops.filter((o) => o.op === op).reduce((a, o) => a + o.bytes, 0);
        expect(logged).toBeCloseTo(s.comm.per_rank[r][key], 6);
      }
      expect(ops.every((o) => o.count > 0 && o.algbw >= 0)).toBe(true);
    }
  });

  test("flops profile: modules, totals, MFU", () => {
    const f = s.flops_profile;
    expect(f.step).toBe(2);
    expect(f.modules[0].name).toBe("model");
    expect(f.modules[0].params).toBe(s.num_parameters);
    expect(f.forward_flops).toBeGreaterThan(0);
    expect(f.step_flops).toBeGreaterThan(2 * f.forward_flops); // backward ≈ 2 × forward
    expect(f.mfu).toBeGreaterThan(0);
  });

  test("csv files as DeepSpeed writes them", () => {
    const d = join(dir, "csv", "obs");
    const loss = readFileSync(join(d, "Train_Samples_train_loss.csv"), "utf8").trim().split(/\r?\n/);
    expect(loss[0]).toBe("step,train_loss");
    expect(loss.length).toBe(STEPS + 1);
    loss.slice(1).forEach((row, i) => {
      const [step, v] = row.split(",");
      expect(Number(step)).toBe((i + 1) * 12);
      expect(Number(v)).toBeCloseTo(s.losses[i], 10);
    });
    expect(readdirSync(d)).toContain("Train_Samples_elapsed_time_ms_forward.csv");
    // MoE figures every step: the aux loss and each layer's load (cv from the step's counts)
    const rows = (f: string) => readFileSync(join(d, f), "utf8").trim().split(/\r?\n/);
    const aux = rows("Train_Samples_moe_aux_loss.csv");
    expect(aux[0]).toBe("step,moe_aux_loss");
    expect(aux.length).toBe(STEPS + 1);
    for (let l = 0; l < 2; l++) {
      const cv = rows(`Train_Samples_moe_layer_${l}_load_cv.csv`);
      expect(cv[0]).toBe(`step,moe_layer_${l}_load_cv`);
      expect(cv.length).toBe(STEPS + 1);
      const share = rows(`Train_Samples_moe_layer_${l}_max_share.csv`).slice(1).map((r) => Number(r.split(",")[1]));
      expect(share.every((v) => v >= 1 / 4 && v <= 1)).toBe(true);
    }
  });

  test("lrs: the learning rate of every step, in the summary and its plot", () => {
    expect(s.lrs.length).toBe(STEPS);
    s.history.forEach((h: { step: number; lr: number }) => expect(s.lrs[h.step - 1]).toBe(h.lr));
  });

  test("tensorboard event file", () => {
    const tbDir = join(dir, "tb", "obs");
    const [file] = readdirSync(tbDir);
    expect(file).toMatch(/^events\.out\.tfevents\.\d+\./);
    const path = join(tbDir, file!);
    const recs = readTfRecords(readFileSync(path));
    expect(recs.length).toBeGreaterThan(STEPS * 3);
    if (!hasPythonTensorboard()) return;
    const py = Bun.spawnSync(["python3", "-c", `
import sys, json
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
from tensorboard.util import tensor_util
out = {}
for e in EventFileLoader(sys.argv[1]).Load():
    for v in e.summary.value:
        out.setdefault(v.tag, []).append([e.step, float(tensor_util.make_ndarray(v.tensor))])
print(json.dumps(out))`, path]);
    expect(py.exitCode).toBe(0);
    const got = JSON.parse(py.stdout.toString());
    const loss = got["Train/Samples/train_loss"] as [number, number][];
    expect(loss.length).toBe(STEPS);
    loss.forEach(([step, v], i) => {
      expect(step).toBe((i + 1) * 12);
      expect(v).toBeCloseTo(s.losses[i], 5);
    });
    expect(got["Eval/Samples/val_loss"].length).toBe(3);
    expect(got["Train/Samples/moe_aux_loss"].length).toBe(STEPS);
    expect(got["Train/Samples/moe_layer_1_load_cv"].length).toBe(STEPS);
  });

  test("plots exist", () => {
    const files = readdirSync(join(dir, "plots"));
    for (const n of ["loss", "lr", "tokens-per-second", "expert-load", "comm-share"]) {
      expect(files).toContain(`${n}.svg`);
      expect(files).toContain(`${n}.png`);
    }
  });
});
