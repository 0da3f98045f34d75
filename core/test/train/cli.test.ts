/**
 * `bun run train` end to end, as a user runs it: a child process of core/src/cli/train.ts.
 * Independent references: the parameter count of the Hugging Face layout (countParameters), the
 * ZeRO paper's per-rank model-state bytes and communication volumes (docs/domain.md §1–2), routing
 * choices = tokens·k, and the data-parallel equivalence (world 2 × accumulation 1 trains exactly
 * like world 1 × accumulation 2 on the same global batches).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { countParameters, DEFAULT_JOB, type ModelConfig } from "../../src/config/index.ts";
import { resolveJobConfig } from "../../src/config/resolve.ts";
import { checkSummary, type TrainSummary } from "../../src/train/summary.ts";

const CLI = resolve(import.meta.dir, "../../src/cli/train.ts");
const dir = mkdtempSync(join(tmpdir(), "zeromoe-train-test-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Run the train CLI with `args`; CI=1 so no progress bar is drawn. */
async function train(args: string[]): Promise<Run> {
  const p = Bun.spawn(["bun", CLI, ...args], { stdout: "pipe", stderr: "pipe", env: { ...process.env, CI: "1" } });
  const [stdout, stderr, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, stdout, stderr };
}

let fileNo = 0;
/** Write `value` as JSON into the test folder; returns its path. */
function jsonFile(value: unknown): string {
  const path = join(dir, `f${fileNo++}.json`);
  writeFileSync(path, JSON.stringify(value));
  return path;
}

function readSummary(path: string): TrainSummary {
  const s = JSON.parse(readFileSync(path, "utf8")) as TrainSummary;
  expect(checkSummary(s)).toEqual([]);
  return s;
}

/** A stack trace line such as "    at trainRank (/x/rank.ts:12:3)". */
const STACK = /^\s+at .*(:\d+:\d+\)?|native)$/m;

/** A small mixtral job at awkward sizes: 3 experts, seq 13, micro-batch 3, accumulation 2. */
const SMALL_JOB = {
  model: {
    model_type: "mixtral", vocab_size: 256, hidden_size: 24, intermediate_size: 40, num_hidden_layers: 2,
    num_attention_heads: 3, num_key_value_heads: 1, num_local_experts: 3, num_experts_per_tok: 2,
    max_position_embeddings: 64, output_router_logits: true,
  },
  data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 13 },
  steps: 3,
  seed: 11,
  backend: "cpu",
  train_micro_batch_size_per_gpu: 3,
  gradient_accumulation_steps: 2,
  eval_interval: 2,
  eval_batches: 2,
  steps_per_print: 1,
  optimizer: { type: "AdamW", params: { lr: 0.01 } },
};

describe("bun run train", () => {
  test("default job, world size 1: logs, summary schema, parameter and memory figures", async () => {
    const out = join(dir, "default.json");
    const r = await train(["--steps", "3", "--summary", out]);
    expect(r.stderr).not.toMatch(STACK);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^backend +(cpu|webgpu) on ".+" \(.+\)$/m);
    expect(r.stdout).toMatch(/^step 3\/3 \| loss \d+\.\d{4} \| lr \S+ \| \d+ tok\/s \| scale 1 \| grad_norm \S+ \| mem MiB param 1\.00 grad 1\.00 optim 2\.01( other \d+\.\d\d)? \| peak MiB \d+\.\d\d$/m);
    expect(r.stdout).toMatch(/^ +moe L0 \d+\/\d+ cv\d\.\d\d dead\d \| L1 \d+\/\d+ cv\d\.\d\d dead\d \| drop 0 aux \d\.\d{4}$/m);
    expect(r.stdout).toMatch(/^eval step 3 \| val_loss \d+\.\d{4}/m);
    expect(r.stdout).toMatch(/^done +3 steps in/m);
    const s = readSummary(out);
    const { config } = resolveJobConfig(DEFAULT_JOB);
    const psi = countParameters(config.model as ModelConfig).total;
    expect(s.world_size).toBe(1);
    expect(s.num_parameters).toBe(psi);
    // fresh model on 256 byte values: loss ≈ ln 256; it falls within 3 steps
    expect(Math.abs(s.losses[0]! - Math.log(256))).toBeLessThan(0.1);
    expect(s.final_loss!).toBeLessThan(s.losses[0]!);
    // fp32 data parallel: 4 bytes params + 4 grads + 8 moments per parameter (docs/domain.md §1)
    const m = s.memory.per_rank[0]!;
    expect([m.params, m.grads, m.optim, m.padding]).toEqual([4 * psi, 4 * psi, 8 * psi, 0]);
    expect(m.peak_total).toBeGreaterThan(16 * psi);
    expect(Object.values(s.comm.per_rank[0]!).every((v) => v === 0)).toBe(true);
    // every token of every step chooses k = 2 experts in each layer
    const tokens = 3 * config.train_batch_size * config.data.seq_len;
    expect(s.moe!.expert_counts.length).toBe(config.model.num_hidden_layers);
    for (const row of s.moe!.expert_counts) expect(row.reduce((a, b) => a + b, 0)).toBe(tokens * 2);
    // HF load-balancing loss E·Σ_e f_e·P_e with f summing to k: k = 2 for uniform routing; a fresh
    // router is close to uniform
    expect(s.moe!.aux_loss!).toBeGreaterThan(1.8);
    expect(s.moe!.aux_loss!).toBeLessThan(2.5);
    expect(s.moe!.dropped_tokens).toBe(0);
  }, 300_000);

  test("world size 2 trains exactly like world size 1 with twice the accumulation (ZeRO 0, 2, 3); activation checkpointing changes only the peak", async () => {
    const one = join(dir, "w1.json");
    const r1 = await train(["--config", jsonFile(SMALL_JOB), "--summary", one]);
    expect(r1.code).toBe(0);
    expect(r1.stdout).toMatch(/^eval step 2 \|/m);
    const s1 = readSummary(one);
    const psi = s1.num_parameters;
    const steps = SMALL_JOB.steps;
    // activation checkpointing (DeepSpeed section) recomputes layers in backward: same numbers, lower peak
    const ckpt = join(dir, "ckpt.json");
    const rc = await train(["--config", jsonFile({ ...SMALL_JOB, activation_checkpointing: { partition_activations: false } }), "--summary", ckpt]);
    expect(rc.code).toBe(0);
    const sc = readSummary(ckpt);
    expect(sc.losses).toEqual(s1.losses);
    expect(sc.moe!.expert_counts).toEqual(s1.moe!.expert_counts);
    expect(sc.memory.per_rank[0]!.peak_total).toBeLessThan(s1.memory.per_rank[0]!.peak_total);

    for (const stage of [0, 2, 3]) {
      const ds = jsonFile({ gradient_accumulation_steps: 1, zero_optimization: { stage, stage3_param_persistence_threshold: 0, stage3_max_reuse_distance: 0 } });
      const two = join(dir, `w2-${stage}.json`);
      // no evaluation: its forwards would add to the communication counted below
      const job = jsonFile({ ...SMALL_JOB, eval_interval: 0 });
      const r2 = await train(["--config", job, "--deepspeed", ds, "--world-size", "2", "--summary", two]);
      expect(r2.stderr).not.toMatch(STACK);
      expect(r2.code).toBe(0);
      const s2 = readSummary(two);
      expect(s2.world_size).toBe(2);
      expect(s2.losses).toEqual(s1.losses);
      expect(s2.moe!.expert_counts).toEqual(s1.moe!.expert_counts);
      for (const rank of [0, 1]) {
        const m = s2.memory.per_rank[rank]!;
        const c = s2.comm.per_rank[rank]!;
        const pad = m.padding;
        // docs/domain.md §1 (fp32): stage 0 16Ψ, stage 2 4Ψ + 12Ψ/N, stage 3 16Ψ/N (padding reported apart)
        const want = stage === 0 ? [4 * psi, 4 * psi, 8 * psi] : stage === 2 ? [4 * psi, 2 * psi, 4 * psi] : [2 * psi, 2 * psi, 4 * psi];
        expect(Math.abs(m.params - want[0]!)).toBeLessThanOrEqual(pad);
        expect(Math.abs(m.grads - want[1]!)).toBeLessThanOrEqual(pad);
        expect(Math.abs(m.optim - want[2]!)).toBeLessThanOrEqual(pad);
        // docs/domain.md §2 at N = 2: all_reduce moves 2Ψ(N−1)/N = Ψ elements per step (4Ψ bytes);
        // stage 2: reduce_scatter + all_gather, Ψ/2 elements each; stage 3 with nothing persistent
        // or reused gathers every unit in forward and again in backward: 3Ψ(N−1)/N = 1.5× stage 0
        const perStep = (b: number) => b / steps / (4 * psi);
        if (stage === 0) {
          expect(perStep(c.all_reduce)).toBeCloseTo(1, 2);
          expect(c.reduce_scatter + c.all_gather).toBe(0);
        } else {
          expect(perStep(c.reduce_scatter)).toBeCloseTo(0.5, 2);
          expect(perStep(c.all_gather)).toBeGreaterThanOrEqual(stage === 2 ? 0.499 : 0.999);
          expect(perStep(c.all_gather)).toBeLessThanOrEqual(stage === 2 ? 0.501 : 1.001);
        }
      }
    }
  }, 300_000);

  test("a dense model has no moe section; capacity drops are counted", async () => {
    const dense = join(dir, "dense.json");
    const llama = { ...SMALL_JOB, model: { model_type: "llama", vocab_size: 256, hidden_size: 20, intermediate_size: 36, num_hidden_layers: 1, num_attention_heads: 5, num_key_value_heads: 1, max_position_embeddings: 64 }, steps: 2 };
    const r = await train(["--config", jsonFile(llama), "--summary", dense]);
    expect(r.code).toBe(0);
    expect(r.stdout).not.toMatch(/^ +moe /m);
    const s = readSummary(dense);
    expect(s.moe).toBeNull();
    expect(s.num_parameters).toBe(countParameters(resolveJobConfig(llama).config.model).total);
    // capacity ceil(0.5 · 39 tokens / 3 experts) = 7 < 39·2/3 picks per expert on average: drops
    const dropping = join(dir, "drop.json");
    const d = await train(["--config", jsonFile({ ...SMALL_JOB, steps: 2, eval_interval: 0, moe: { drop_tokens: true, capacity_factor: 0.5, min_capacity: 1 } }), "--summary", dropping]);
    expect(d.code).toBe(0);
    const sd = readSummary(dropping);
    expect(sd.moe!.dropped_tokens).toBeGreaterThan(0);
    expect(r.stderr + d.stderr).not.toMatch(STACK);
    // counts are taken before drops: still tokens·k per layer
    for (const row of sd.moe!.expert_counts) expect(row.reduce((a, b) => a + b, 0)).toBe(2 * 6 * 13 * 2);
  }, 300_000);

  test("checkpoints every save_interval steps and at the end; --resume continues exactly, also at world size 2", async () => {
    const ck = join(dir, "ckpt");
    const job = { ...SMALL_JOB, eval_interval: 0, checkpoint: { dir: ck, save_interval: 2, keep_last: 0 } };
    const full = join(dir, "full.json");
    const r = await train(["--config", jsonFile(job), "--summary", full]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^checkpoint .*global_step2 \| [\d.]+ MiB written by rank 0/m);
    const s = readSummary(full);
    expect(s.start_step).toBe(0);
    expect(s.checkpoints).toEqual([join(ck, "global_step2"), join(ck, "global_step3")]);
    const resumed = { ...job, checkpoint: { dir: null } };
    const one = join(dir, "resumed1.json");
    const r1 = await train(["--config", jsonFile(resumed), "--resume", join(ck, "global_step2"), "--summary", one]);
    expect(r1.code).toBe(0);
    expect(r1.stdout).toMatch(/^resume +.*global_step2: after step 2;/m);
    expect(r1.stdout).toMatch(/^done +1 step \(3–3 of 3\) in /m);
    // a checkpoint already at or past the steps asked for: a user error before any work
    const past = await train(["--config", jsonFile(resumed), "--resume", ck, "--steps", "2"]);
    expect(past.code).toBe(2);
    expect(past.stderr).toBe(`error: --resume: checkpoint ${join(ck, "global_step3")} is at step 3, --steps 2 leaves nothing to train (give --steps above 3)\n`);
    expect(past.stdout).toBe("");
    const equal = await train(["--config", jsonFile(resumed), "--resume", join(ck, "global_step3")]);
    expect(equal.code).toBe(2);
    expect(equal.stderr).toContain("is at step 3, steps 3 leaves nothing to train");
    const s1 = readSummary(one);
    expect([s1.start_step, s1.steps]).toEqual([2, 1]);
    expect(s1.losses).toEqual([s.losses[2]!]);
    // world 2 × accumulation 1 sees the same global batches: the same step 3 from the resharded state
    const two = join(dir, "resumed2.json");
    const r2 = await train(["--config", jsonFile(resumed), "--deepspeed", jsonFile({ gradient_accumulation_steps: 1, zero_optimization: { stage: 2 } }), "--world-size", "2", "--resume", join(ck, "global_step2"), "--summary", two]);
    expect(r2.stderr).not.toMatch(STACK);
    expect(r2.code).toBe(0);
    expect(r2.stdout).toMatch(/resharded from world size 1/);
    expect(readSummary(two).losses).toEqual([s.losses[2]!]);
    // a checkpoint that is not there: a user error naming the path
    const bad = await train(["--config", jsonFile(resumed), "--resume", join(dir, "no-such-ckpt")]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^error: .*no-such-ckpt/m);
    expect(bad.stderr).not.toMatch(/rank \d|CheckpointError/);
    expect(bad.stderr).not.toMatch(STACK);
    expect(bad.stdout).not.toMatch(/^(backend|data) /m); // refused before choosing a backend or loading data
  }, 300_000);

  test("--init-from the fp32 consolidation of a checkpoint starts from exactly the trained weights", async () => {
    const ck = join(dir, "ckpt-init");
    const job = { ...SMALL_JOB, steps: 2, eval_interval: 2, checkpoint: { dir: ck, save_interval: 0 } };
    const trained = join(dir, "trained.json");
    const r = await train(["--config", jsonFile(job), "--summary", trained]);
    expect(r.code).toBe(0);
    const st = join(dir, "trained.safetensors");
    const z = Bun.spawnSync(["bun", resolve(import.meta.dir, "../../src/cli/zero-to-fp32.ts"), ck, st]);
    expect(z.exitCode).toBe(0);
    // 0 steps: only the final evaluation, on the same validation batches as the trained run's
    const fresh = { ...job, checkpoint: { dir: null } };
    const init = join(dir, "init.json");
    const ri = await train(["--config", jsonFile(fresh), "--init-from", st, "--steps", "0", "--summary", init]);
    expect(ri.code).toBe(0);
    expect(ri.stdout).toMatch(/^init-from  .*trained\.safetensors: \d+ parameter elements read by rank 0/m);
    expect(readSummary(init).val_loss).toBe(readSummary(trained).val_loss);
    const both = await train(["--config", jsonFile(fresh), "--init-from", st, "--resume", ck]);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain("--init-from and --resume: give one");
    const missing = await train(["--config", jsonFile(fresh), "--init-from", join(dir, "absent.safetensors")]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/^error: --init-from: file not found: .*absent\.safetensors/m);
    expect(missing.stderr).not.toMatch(STACK);
  }, 300_000);

  const bad: [string, Record<string, unknown>, RegExp][] = [
    ["unknown key with did-you-mean", { ...DEFAULT_JOB, stepz: 3 }, /stepz: unknown key; did you mean "steps"\?/],
    ["wrong type", { ...DEFAULT_JOB, optimizer: { type: "AdamW", params: { lr: "fast" } } }, /optimizer\.params\.lr: .*number/],
    ["batch rule", { ...DEFAULT_JOB, train_batch_size: 10, train_micro_batch_size_per_gpu: 4, gradient_accumulation_steps: 1 }, /train_batch_size: inconsistent batch sizes.*4 × 1 × 1 = 4/],
  ];
  for (const [what, job, re] of bad) {
    test(`bad config (${what}): exit 2, the field named, no stack trace`, async () => {
      const r = await train(["--config", jsonFile(job)]);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(re);
      expect(r.stderr).not.toMatch(STACK);
      expect(r.stdout).not.toMatch(/^step /m);
    });
  }

  test("user errors from the command line and from inside a rank: exit 2, no stack trace", async () => {
    for (const [flag, value, range] of [["--world-size", "-1", "[1, 65536]"], ["--steps", "-5", "[0, 2147483647]"]] as const) {
      const n = await train([flag, value]);
      expect(n.code).toBe(2);
      expect(n.stderr).toContain(`error: ${flag}: expected an integer in ${range}, got ${value}`);
      expect(n.stderr).not.toContain("ambiguous");
      expect(n.stderr).not.toMatch(STACK);
    }
    const u = await train(["--stepz", "3"]);
    expect(u.code).toBe(2);
    expect(u.stderr).toContain("unknown option \"--stepz\"; did you mean --steps?");
    const missing = join(dir, "no-such-corpus.txt");
    const d = await train(["--config", jsonFile({ ...SMALL_JOB, data: { ...SMALL_JOB.data, dataset: missing } })]);
    expect(d.code).toBe(2);
    expect(d.stderr).toMatch(/^error: data\.dataset: file not found: .*no-such-corpus\.txt$/m);
    // every rank throws the same: printed once, no rank named
    const d2 = await train(["--config", jsonFile({ ...SMALL_JOB, world_size: 2, data: { ...SMALL_JOB.data, dataset: missing } })]);
    expect(d2.code).toBe(2);
    expect(d2.stderr).toBe(`error: data.dataset: file not found: ${missing}\n`);
    expect(d.stderr).not.toMatch(STACK);
  }, 300_000);
});
