/**
 * "auto" values (core/src/config/auto-values.ts; issue 17): the Hugging Face Trainer's ZeRO-2 and
 * ZeRO-3 example DeepSpeed configs (transformers docs "DeepSpeed", the complete ZeRO-2/ZeRO-3
 * examples, "auto" everywhere the Trainer fills) resolve against a job with the Trainer's rules —
 * hidden² / int(0.9·hidden²) / 10·hidden for the bucket sizes, the job's batch, optimizer and
 * clipping values, warmup_min_lr 0, warmup_max_lr = lr, total_num_steps = steps — print what was
 * filled, and train unchanged through `bun run train --deepspeed` at 2 ranks. Also: the batch-size
 * mismatch caused by `--world-size` says the value came from the command line.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { ConfigError, DEFAULT_JOB, resolveJobConfig } from "../src/config/index.ts";

const ROOT = resolve(import.meta.dir, "../..");
const dir = mkdtempSync(join(tmpdir(), "auto-values-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const FP16_AUTO = { enabled: "auto", loss_scale: 0, loss_scale_window: 1000, initial_scale_power: 16, hysteresis: 2, min_loss_scale: 1 };
const OPT_AUTO = { type: "AdamW", params: { lr: "auto", betas: "auto", eps: "auto", weight_decay: "auto" } };
const SCHED_AUTO = { type: "WarmupLR", params: { warmup_min_lr: "auto", warmup_max_lr: "auto", warmup_num_steps: "auto" } };
const TAIL = { gradient_accumulation_steps: "auto", gradient_clipping: "auto", steps_per_print: 2000, train_batch_size: "auto", train_micro_batch_size_per_gpu: "auto", wall_clock_breakdown: false };

/** The Trainer docs' ZeRO-2 example (with "auto"). */
const HF_ZERO2 = {
  fp16: FP16_AUTO, optimizer: OPT_AUTO, scheduler: SCHED_AUTO,
  zero_optimization: { stage: 2, offload_optimizer: { device: "cpu", pin_memory: true }, allgather_partitions: true, allgather_bucket_size: 2e8, overlap_comm: true, reduce_scatter: true, reduce_bucket_size: 2e8, contiguous_gradients: true },
  ...TAIL,
};
/** The Trainer docs' ZeRO-3 example (with "auto"). */
const HF_ZERO3 = {
  fp16: FP16_AUTO, optimizer: OPT_AUTO, scheduler: SCHED_AUTO,
  zero_optimization: {
    stage: 3, offload_optimizer: { device: "cpu", pin_memory: true }, offload_param: { device: "cpu", pin_memory: true }, overlap_comm: true, contiguous_gradients: true,
    sub_group_size: 1e9, reduce_bucket_size: "auto", stage3_prefetch_bucket_size: "auto", stage3_param_persistence_threshold: "auto",
    stage3_max_live_parameters: 1e9, stage3_max_reuse_distance: 1e9, stage3_gather_16bit_weights_on_model_save: true,
  },
  ...TAIL,
};

const JOB = { ...DEFAULT_JOB, train_micro_batch_size_per_gpu: 3, gradient_accumulation_steps: 2, gradient_clipping: 0.5, steps: 37, optimizer: { type: "AdamW", params: { lr: 3e-3, betas: [0.8, 0.95], eps: 1e-6, weight_decay: 0.05 } } };
const resolveWith = (ds: unknown, job: Record<string, unknown> = JOB, ws = 2) => resolveJobConfig(job, { deepspeed: { raw: ds, source: "ds.json" }, overrides: { world_size: ws } });

describe("auto values", () => {
  test("ZeRO-3 example: every auto filled from the job as the Trainer does", () => {
    const { config: c, warnings } = resolveWith(HF_ZERO3);
    const h = 64; // DEFAULT_JOB hidden_size
    expect(c.train_micro_batch_size_per_gpu).toBe(3);
    expect(c.gradient_accumulation_steps).toBe(2);
    expect(c.train_batch_size).toBe(3 * 2 * 2);
    expect(c.gradient_clipping).toBe(0.5);
    expect(c.optimizer.params).toMatchObject({ lr: 3e-3, betas: [0.8, 0.95], eps: 1e-6, weight_decay: 0.05 });
    expect(c.scheduler).toEqual({ type: "WarmupLR", params: { warmup_min_lr: 0, warmup_max_lr: 3e-3, warmup_num_steps: 30, warmup_type: "log" } }); // DEFAULT_JOB's scheduler warmup
    expect(c.fp16.enabled).toBe(false);
    expect(c.zero_optimization.reduce_bucket_size).toBe(h * h);
    expect(c.zero_optimization.stage3_prefetch_bucket_size).toBe(Math.trunc(0.9 * h * h));
    expect(c.zero_optimization.stage3_param_persistence_threshold).toBe(10 * h);
    const line = warnings.find((w) => w.startsWith('DeepSpeed "auto" values filled'))!;
    expect(line).toContain("zero_optimization.reduce_bucket_size = 4096 (hidden_size² = 64²)");
    expect(line).toContain("zero_optimization.stage3_prefetch_bucket_size = 3686 (0.9 · hidden_size² = 0.9 · 64²)");
    expect(line).toContain("zero_optimization.stage3_param_persistence_threshold = 640 (10 · hidden_size = 10 · 64)");
    expect(line).toContain("optimizer.params.lr = 0.003 (the job's value)");
    expect(line).toContain('scheduler.params.warmup_min_lr = 0');
  });

  test("ZeRO-2 example: the job's values, its defaults where the job gives none", () => {
    const job = { ...DEFAULT_JOB, steps: 11 } as Record<string, unknown>;
    delete job.gradient_accumulation_steps;
    const { config: c } = resolveWith(HF_ZERO2, job, 1);
    expect(c.train_micro_batch_size_per_gpu).toBe(8);
    expect(c.gradient_accumulation_steps).toBe(1);
    expect(c.train_batch_size).toBe(8);
    expect(c.zero_optimization.reduce_bucket_size).toBe(2e8); // given, not auto
    const d = resolveJobConfig(DEFAULT_JOB).config;
    expect(c.optimizer.params).toEqual(d.optimizer.params);
    expect(c.gradient_clipping).toBe(d.gradient_clipping);
  });

  test("below stage 3 the stage-3 keys keep their defaults (the Trainer fills them at stage 3 only)", () => {
    const { config: c, warnings } = resolveWith({ zero_optimization: { stage: 2, reduce_bucket_size: "auto", stage3_prefetch_bucket_size: "auto", stage3_param_persistence_threshold: "auto" } });
    expect(c.zero_optimization.reduce_bucket_size).toBe(4096);
    expect(c.zero_optimization.stage3_prefetch_bucket_size).toBe(5e7);
    expect(c.zero_optimization.stage3_param_persistence_threshold).toBe(1e5);
    expect(warnings.join("\n")).toContain("(the default: the Trainer fills it at stage 3 only)");
  });

  test("total_num_steps is the job's steps; warmup_num_steps the job's scheduler value", () => {
    const job = { ...JOB, scheduler: { type: "WarmupDecayLR", params: { warmup_num_steps: 5 } } };
    const { config: c } = resolveWith({ scheduler: { type: "WarmupDecayLR", params: { warmup_min_lr: "auto", warmup_max_lr: "auto", warmup_num_steps: "auto", total_num_steps: "auto" } } }, job);
    expect(c.scheduler!.params).toMatchObject({ total_num_steps: 37, warmup_num_steps: 5, warmup_min_lr: 0, warmup_max_lr: 3e-3 });
  });

  test("an auto the Trainer does not fill is refused, naming the key, outside DeepSpeed's pydantic sections", () => {
    let err: unknown;
    try {
      resolveWith({ steps_per_print: "auto" });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toContain('steps_per_print: "auto" is not filled for this key');
    // inside zero_optimization DeepSpeed's config model drops "auto": the default, named with its value
    const { config: c, warnings } = resolveWith({ zero_optimization: { stage: 3, stage3_max_live_parameters: "auto", stage3_gather_16bit_weights_on_model_save: "auto" } });
    expect(c.zero_optimization.stage3_max_live_parameters).toBe(1e9);
    expect(c.zero_optimization.stage3_gather_16bit_weights_on_model_save).toBe(false);
    expect(warnings.join("\n")).toContain("zero_optimization.stage3_gather_16bit_weights_on_model_save = false (the default");
  });

  test("the fill line prints resolved values; gradient_clipping auto is 1.0 when the job gives none", () => {
    const job = { ...JOB } as Record<string, unknown>;
    delete job.gradient_clipping;
    const { config: c, warnings } = resolveWith({ gradient_clipping: "auto", train_batch_size: "auto", scheduler: { type: "WarmupLR", params: { warmup_max_lr: "auto" } } }, job);
    expect(c.gradient_clipping).toBe(1.0);
    const line = warnings.find((w) => w.startsWith('DeepSpeed "auto" values filled'))!;
    expect(line).toContain("gradient_clipping = 1 (the Trainer's max_grad_norm default)");
    expect(line).toContain("train_batch_size = 12 (micro-batch × gradient_accumulation_steps × world_size, calculated)");
    expect(line).toContain("scheduler.params.warmup_max_lr = 0.003 (the optimizer's lr)");
    expect(line).not.toContain("= default");
  });

  test("an auto micro-batch needs one in the job", () => {
    const job = { ...JOB } as Record<string, unknown>;
    delete job.train_micro_batch_size_per_gpu;
    expect(() => resolveWith({ train_micro_batch_size_per_gpu: "auto" }, job)).toThrow(/train_micro_batch_size_per_gpu: "auto" takes the job's train_micro_batch_size_per_gpu/);
  });
});

describe("batch-size mismatch from --world-size", () => {
  test("the message says the world size came from the command line", () => {
    const job = { ...DEFAULT_JOB, train_batch_size: 16, train_micro_batch_size_per_gpu: 8, gradient_accumulation_steps: 2 };
    expect(() => resolveJobConfig(job)).not.toThrow();
    expect(() => resolveJobConfig(job, { overrides: { world_size: 3 } })).toThrow(/dp world size=3 from --world-size on the command line/);
    // from the job file: no such words
    try {
      resolveJobConfig({ ...job, world_size: 3 });
    } catch (e) {
      expect((e as Error).message).not.toContain("command line");
    }
  });
});

describe("the Trainer's example configs train unchanged", () => {
  for (const [name, ds] of Object.entries({ zero2: HF_ZERO2, zero3: HF_ZERO3 })) {
    test(`${name}: bun run train --deepspeed, 2 ranks`, async () => {
      const file = join(dir, `hf-${name}.json`);
      writeFileSync(file, JSON.stringify(ds, null, 2));
      const summary = join(dir, `${name}.summary.json`);
      const p = Bun.spawn(["bun", "run", "train", "--deepspeed", file, "--backend", "cpu", "--world-size", "2", "--steps", "2", "--summary", summary], { cwd: ROOT, stdout: "pipe", stderr: "pipe", env: { ...process.env, CI: "1" } });
      const [o, e] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text()]);
      expect({ code: await p.exited, out: o + e }).toMatchObject({ code: 0 });
      expect(o + e).toContain('DeepSpeed "auto" values filled from the job');
      const s = JSON.parse(readFileSync(summary, "utf8"));
      expect(s.losses.length).toBe(2);
      expect(s.losses.every((l: number) => Number.isFinite(l))).toBe(true);
    }, 300_000);
  }
});
