// Job config: every error kind (unknown key with suggestion, wrong type, out of range, batch rule,
// MoE constraints, precision, offload), defaults, merging a DeepSpeed file, overrides.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError, DEFAULT_JOB, editDistance, loadJobConfig, resolveJobConfig, suggest, type ConfigIssue } from "../src/config/index.ts";

const dir = mkdtempSync(join(tmpdir(), "zeromoe-config-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const tinyLlama = { model_type: "llama", vocab_size: 300, hidden_size: 48, intermediate_size: 97, num_hidden_layers: 3, num_attention_heads: 6, max_position_embeddings: 128 };
const job = (extra: Record<string, unknown> = {}) => ({ model: tinyLlama, train_micro_batch_size_per_gpu: 3, ...extra });

/** Issues of a failing resolve (fails the test if it resolves). */
function issuesOf(raw: unknown, opts: Parameters<typeof resolveJobConfig>[1] = {}): ConfigIssue[] {
  try {
    resolveJobConfig(raw, opts);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return [...(e as ConfigError).issues];
  }
  throw new Error("expected a ConfigError");
}
const at = (issues: ConfigIssue[], path: string) => issues.filter((i) => i.path === path).map((i) => i.message);

describe("suggestions", () => {
  test("edit distance", () => {
    expect(editDistance("kitten", "sitting")).toBe(3);
    expect(editDistance("", "abc")).toBe(3);
    expect(editDistance("stage", "stage")).toBe(0);
  });
  test("suggest picks the closest, or nothing when far", () => {
    expect(suggest("reduce_bucket_sise", ["allgather_bucket_size", "reduce_bucket_size"])).toBe("reduce_bucket_size");
    expect(suggest("zzzz", ["stage", "overlap_comm"])).toBeNull();
  });
});

describe("errors", () => {
  test("unknown keys at every level, each with a did-you-mean", () => {
    const issues = issuesOf(job({ optimzer: {}, zero_optimization: { stgae: 2, offload_optimizer: { devce: "cpu" } }, model: { ...tinyLlama, hiden_size: 4 } }));
    expect(at(issues, "optimzer")[0]).toMatch(/unknown key; did you mean "optimizer"\?/);
    expect(at(issues, "zero_optimization.stgae")[0]).toMatch(/did you mean "stage"\?/);
    expect(at(issues, "zero_optimization.offload_optimizer.devce")[0]).toMatch(/did you mean "device"\?/);
    expect(at(issues, "model.hiden_size")[0]).toMatch(/did you mean "hidden_size"\?/);
    expect(issues.length).toBe(4); // all collected in one throw
  });
  test("wrong types name the path, the expected type and what was given", () => {
    const issues = issuesOf(job({ steps: "10", fp16: { enabled: 1 }, optimizer: { type: "AdamW", params: { betas: [0.9] } }, plugins: "x" }));
    expect(at(issues, "steps")[0]).toMatch(/expected integer >= 0, got string "10"/);
    expect(at(issues, "fp16.enabled")[0]).toMatch(/expected boolean, got number 1/);
    expect(at(issues, "optimizer.params.betas")[0]).toMatch(/exactly 2 items, got 1/);
    expect(at(issues, "plugins")[0]).toMatch(/expected array of string/);
  });
  test("out of range names the range", () => {
    const issues = issuesOf(job({ zero_optimization: { stage: 4 }, data: { validation_fraction: 0.9 }, optimizer: { params: { betas: [0.9, 1] } }, world_size: 0 }));
    expect(at(issues, "zero_optimization.stage")[0]).toMatch(/expected integer in \[0, 3\], got 4/);
    expect(at(issues, "data.validation_fraction")[0]).toMatch(/\[0, 0\.5\], got 0\.9/);
    expect(at(issues, "optimizer.params.betas[1]")[0]).toMatch(/\[0, 1\), got 1/);
    expect(at(issues, "world_size")[0]).toMatch(/>= 1, got 0/);
  });
  test("integers beyond Number.MAX_SAFE_INTEGER are refused at every integer key, naming the path", () => {
    const issues = issuesOf(job({ steps: 1e20, seed: 2 ** 53 + 2, zero_optimization: { stage: 2, reduce_bucket_size: 2 ** 60 }, model: { ...tinyLlama, vocab_size: 9007199254740994 }, data: { seq_len: 1e300 } }));
    for (const path of ["steps", "zero_optimization.reduce_bucket_size", "model.vocab_size", "data.seq_len"]) {
      expect(at(issues, path)[0]).toMatch(/out of range: expected integer (?:>= \d+|in \[\d+, \d+\]) within ±Number\.MAX_SAFE_INTEGER \(9007199254740991\), got \d/);
    }
    expect(at(issues, "seed")[0]).toMatch(/out of range: expected integer in \[0, 4294967295\]/);
    // the largest safe integer itself is accepted
    expect(resolveJobConfig(job({ steps: Number.MAX_SAFE_INTEGER })).config.steps).toBe(Number.MAX_SAFE_INTEGER);
  });
  test("enum values get a suggestion; HF \"auto\" the Trainer does not fill is explained", () => {
    // the "auto" values the Trainer fills are filled (core/test/auto-values.test.ts)
    const issues = issuesOf(job({ backend: "webgpus", steps_per_print: "auto" }));
    expect(at(issues, "backend")[0]).toMatch(/did you mean "webgpu"\?/);
    expect(at(issues, "steps_per_print")[0]).toMatch(/"auto" is not filled for this key: the Hugging Face Trainer fills only/);
    // inside DeepSpeed's pydantic sections "auto" is dropped: the key takes its default, and the line says so
    const r = resolveJobConfig(job({ zero_optimization: { stage: 3, stage3_max_live_parameters: "auto" } }));
    expect(r.config.zero_optimization.stage3_max_live_parameters).toBe(1e9);
    expect(r.warnings.join("\n")).toContain(`zero_optimization.stage3_max_live_parameters = 1000000000 (the default: DeepSpeed's config models drop "auto")`);
  });
  test("batch rule: three inconsistent values name all three and the dp world size", () => {
    const issues = issuesOf({ model: tinyLlama, world_size: 3, train_batch_size: 20, train_micro_batch_size_per_gpu: 2, gradient_accumulation_steps: 3 });
    const m = at(issues, "train_batch_size")[0];
    expect(m).toMatch(/2 × 3 × 3 = 18/);
    expect(m).toMatch(/train_batch_size=20, train_micro_batch_size_per_gpu=2, gradient_accumulation_steps=3, dp world size=3/);
  });
  test("batch rule: two determine the third; indivisible and missing are errors", () => {
    const r = (b: Record<string, number>, ws = 2) => resolveJobConfig({ model: tinyLlama, world_size: ws, ...b }).config;
    expect(r({ train_batch_size: 42, train_micro_batch_size_per_gpu: 3 }).gradient_accumulation_steps).toBe(7);
    expect(r({ train_batch_size: 42, gradient_accumulation_steps: 7 }).train_micro_batch_size_per_gpu).toBe(3);
    expect(r({ train_micro_batch_size_per_gpu: 5, gradient_accumulation_steps: 3 }).train_batch_size).toBe(30);
    const only = r({ train_batch_size: 26 });
    expect([only.train_micro_batch_size_per_gpu, only.gradient_accumulation_steps]).toEqual([13, 1]);
    expect(at(issuesOf({ model: tinyLlama, world_size: 2, train_batch_size: 43, train_micro_batch_size_per_gpu: 3 }), "train_batch_size")[0]).toMatch(/multiple of train_micro_batch_size_per_gpu × dp world size = 6/);
    expect(at(issuesOf({ model: tinyLlama, gradient_accumulation_steps: 3 }), "train_batch_size")[0]).toMatch(/give train_batch_size or train_micro_batch_size_per_gpu/);
  });
  test("MoE constraints name the numbers", () => {
    const mixtral = { ...tinyLlama, model_type: "mixtral", num_local_experts: 6, num_experts_per_tok: 2, num_key_value_heads: 3 };
    const issues = issuesOf({ model: mixtral, world_size: 10, train_micro_batch_size_per_gpu: 1, moe: { ep_size: 4 } });
    expect(at(issues, "moe.ep_size")).toEqual(["num_local_experts 6 is not divisible by ep_size 4", "world_size 10 is not divisible by ep_size 4"]);
    const dense = issuesOf(job({ moe: { ep_size: 1 } }));
    expect(at(dense, "moe")[0]).toMatch(/needs a model with experts/);
    const k = issuesOf({ model: { ...mixtral, num_experts_per_tok: 7 }, train_micro_batch_size_per_gpu: 1 });
    expect(at(k, "model.num_experts_per_tok")[0]).toMatch(/7 exceeds num_local_experts 6/);
    const ep = issuesOf({ model: mixtral, world_size: 3, train_micro_batch_size_per_gpu: 1, expert_parallel: { enabled: true, autoep_size: 4 } });
    expect(at(ep, "expert_parallel.autoep_size")).toEqual(["num_local_experts 6 is not divisible by autoep_size 4", "world_size 3 is not divisible by autoep_size 4 (to run at world_size 3, e.g. to resume an autoep_size-4 checkpoint, which reshards: --set expert_parallel.autoep_size=3)"]);
  });
  test("fp16 and bf16 together; offload without the right stage; nvme without a path", () => {
    const issues = issuesOf(job({ fp16: { enabled: true }, bfloat16: { enabled: true }, zero_optimization: { stage: 2, offload_param: { device: "cpu" }, offload_optimizer: { device: "nvme" } } }));
    expect(at(issues, "fp16.enabled")[0]).toMatch(/both true/);
    expect(at(issues, "zero_optimization.offload_param.device")[0]).toMatch(/needs zero_optimization.stage 3, got stage 2/);
    expect(at(issues, "zero_optimization.offload_optimizer.nvme_path")[0]).toMatch(/needs nvme_path/);
  });
  test("model checks: llama-only keys, GQA divisibility, vocab vs tokenizer, seq_len vs positions", () => {
    const a = issuesOf(job({ model: { ...tinyLlama, num_local_experts: 4 } }));
    expect(at(a, "model.num_local_experts")[0]).toMatch(/only for model_type "mixtral"/);
    const b = issuesOf(job({ model: { ...tinyLlama, vocab_size: 1000, num_key_value_heads: 4 }, data: { tokenizer: "gpt2", seq_len: 200 } }));
    expect(at(b, "model.num_key_value_heads")[0]).toMatch(/6 must be a multiple of num_key_value_heads 4/);
    expect(at(b, "model.vocab_size")[0]).toMatch(/1000 is smaller than the "gpt2" tokenizer's vocabulary 50257/);
    expect(at(b, "data.seq_len")[0]).toMatch(/200 exceeds model.max_position_embeddings 128/);
    expect(at(issuesOf({ train_micro_batch_size_per_gpu: 1 }), "model")[0]).toMatch(/required/);
    expect(at(issuesOf(job({ model: { ...tinyLlama, rope_scaling: { type: "ntk", factor: 4 } } })), "model.rope_scaling.type")[0]).toMatch(/"ntk" is not supported: static NTK scaling is not implemented/);
    expect(at(issuesOf(job({ model: { ...tinyLlama, rope_scaling: { type: "linear" } } })), "model.rope_scaling.factor")[0]).toMatch(/required for rope_type "linear"/);
  });
  test("old and new name together is an error; old name alone is accepted", () => {
    const z = { stage: 3, stage3_gather_fp16_weights_on_model_save: true };
    expect(resolveJobConfig(job({ zero_optimization: z })).config.zero_optimization.stage3_gather_16bit_weights_on_model_save).toBe(true);
    const issues = issuesOf(job({ zero_optimization: { ...z, stage3_gather_16bit_weights_on_model_save: false } }));
    expect(at(issues, "zero_optimization.stage3_gather_fp16_weights_on_model_save")[0]).toMatch(/keep only/);
  });
  test("schema errors and cross-section errors come in one throw; rules on invalid parts are skipped", () => {
    const issues = issuesOf({ model: tinyLlama, world_size: 2, train_batch_size: 7, train_micro_batch_size_per_gpu: 2, fp16: { enabled: true }, bf16: { enabled: true }, zero_optimization: { stagee: 1 }, data: { seq_len: "x" } });
    expect(issues.map((i) => i.path).sort()).toEqual(["data.seq_len", "fp16.enabled", "train_batch_size", "zero_optimization.stagee"]);
  });
  test("ConfigError message lists every issue with its path", () => {
    try {
      resolveJobConfig(job({ steps: -1, seed: 1.5 }), { source: "job.json" });
      throw new Error("unreachable");
    } catch (e) {
      expect((e as Error).message).toMatch(/^invalid job job\.json: 2 errors\n  - seed: .*\n  - steps: /);
    }
  });
});

describe("resolution", () => {
  test("defaults: DeepSpeed (docs/domain.md §3) and Hugging Face", () => {
    const c = resolveJobConfig(job()).config;
    expect(c.zero_optimization).toMatchObject({ stage: 0, reduce_bucket_size: 5e8, allgather_bucket_size: 5e8, stage3_prefetch_bucket_size: 5e7, stage3_param_persistence_threshold: 1e5, stage3_max_live_parameters: 1e9, stage3_max_reuse_distance: 1e9, sub_group_size: 1e9, reduce_scatter: true, overlap_comm: false, contiguous_gradients: true, stage3_gather_16bit_weights_on_model_save: false });
    expect(c.fp16).toEqual({ enabled: false, loss_scale: 0, initial_scale_power: 16, loss_scale_window: 1000, hysteresis: 2, consecutive_hysteresis: false, min_loss_scale: 1 });
    expect(c.optimizer).toEqual({ type: "AdamW", params: { lr: 1e-3, betas: [0.9, 0.999], eps: 1e-8, weight_decay: 0, adam_w_mode: true } });
    expect([c.gradient_clipping, c.steps_per_print, c.scheduler, c.moe, c.activation_checkpointing.enabled]).toEqual([0, 10, null, null, false]);
    expect(c.model).toMatchObject({ num_key_value_heads: 6, head_dim: 8, rms_norm_eps: 1e-6, rope_theta: 10000, tie_word_embeddings: false, initializer_range: 0.02 });
    expect(c.data).toEqual({ dataset: "moby-dick", tokenizer: "byte", seq_len: 64, validation_fraction: 0.05, format: "auto", chat_template: null, train_on_prompt: false, packing: false });
    expect([c.train_batch_size, c.gradient_accumulation_steps]).toEqual([3, 1]);
  });
  test("mixtral: HF defaults and MoE defaults derived from the model", () => {
    const c = resolveJobConfig({ model: { model_type: "mixtral", vocab_size: 256, hidden_size: 32, num_attention_heads: 4, num_key_value_heads: 2 }, train_batch_size: 4 }).config;
    expect(c.model).toMatchObject({ num_local_experts: 8, num_experts_per_tok: 2, router_aux_loss_coef: 0.001, rope_theta: 1e6, rms_norm_eps: 1e-5, head_dim: 8 });
    expect(c.moe).toMatchObject({ k: 2, aux_loss: "mixtral", aux_loss_coef: 0.001, drop_tokens: false, ep_size: 1, capacity_factor: 1, min_capacity: 4 });
  });
  test("scheduler defaults from optimizer lr and steps; type selects its params", () => {
    const c = resolveJobConfig(job({ steps: 77, optimizer: { type: "adam", params: { lr: 0.02 } }, scheduler: { type: "WarmupDecayLR", params: { warmup_num_steps: 5 } } })).config;
    expect(c.optimizer.type).toBe("Adam");
    expect(c.scheduler).toEqual({ type: "WarmupDecayLR", params: { total_num_steps: 77, warmup_min_lr: 0, warmup_max_lr: 0.02, warmup_num_steps: 5, warmup_type: "log" } });
    const bad = issuesOf(job({ scheduler: { type: "WarmupLR", params: { cos_min_ratio: 0.1 } } }));
    expect(at(bad, "scheduler.params.cos_min_ratio")[0]).toMatch(/unknown key/);
    // OneCycle and LRRangeTest exist (core/test/cyclic-schedulers.test.ts); a name DeepSpeed lacks is refused
    expect(at(issuesOf(job({ scheduler: { type: "CosineAnnealing" } })), "scheduler.type")[0]).toMatch(/one of "WarmupLR"/);
  });
  test("the default job resolves and is a small mixtral on Moby Dick with byte tokens", () => {
    const { config, warnings } = resolveJobConfig(DEFAULT_JOB);
    expect(warnings).toEqual([]);
    expect(config.model.model_type).toBe("mixtral");
    expect(config.data).toMatchObject({ dataset: "moby-dick", tokenizer: "byte" });
    expect(config.moe?.k).toBe(2);
    expect(() => ((DEFAULT_JOB.model as Record<string, unknown>).hidden_size = 1)).toThrow();
  });
  test("ignored DeepSpeed/HF keys are accepted with a warning", () => {
    const { warnings } = resolveJobConfig(job({ zero_optimization: { allgather_partitions: true }, model: { ...tinyLlama, torch_dtype: "bfloat16" }, wandb: { enabled: false } }));
    // wandb off asks for nothing (on, it is refused with the reason: deepspeed-keys.test.ts)
    expect(warnings.length).toBe(2);
    expect(warnings.some((w) => w.startsWith("zero_optimization.allgather_partitions: ignored"))).toBe(true);
  });
});

describe("Hugging Face config.json files (transformers 5.17 fixtures)", () => {
  for (const name of ["llama", "mixtral"]) {
    test(`${name}: accepted as the model section; rope_parameters sets rope_theta`, async () => {
      const model = await Bun.file(new URL(`./fixtures/${name}/config.json`, import.meta.url).pathname).json();
      // The fixture's vocabulary (64) is smaller than the byte tokenizer's: the only complaint.
      const issues = issuesOf({ model, train_micro_batch_size_per_gpu: 2, data: { seq_len: 16 } });
      expect(issues.map((i) => i.path)).toEqual(["model.vocab_size"]);
      const { config, warnings } = resolveJobConfig({ model: { ...model, vocab_size: 256 }, train_micro_batch_size_per_gpu: 2, data: { seq_len: 16 } });
      expect(config.model.rope_theta).toBe(model.rope_parameters.rope_theta);
      expect(config.model.head_dim).toBe(8);
      expect(warnings.map((w) => w.split(":")[0]).sort()).toEqual(["model.architectures", "model.dtype", "model.pretraining_tp", "model.transformers_version", "model.use_cache"].filter((k) => k.slice(6) in model));
    });
  }
  test("rope_parameters with a rope_type lacking its keys, or a conflicting rope_theta, is an error", () => {
    const a = issuesOf(job({ model: { ...tinyLlama, rope_parameters: { rope_type: "llama3", rope_theta: 5e5 } } }));
    expect(at(a, "model.rope_parameters.low_freq_factor")[0]).toMatch(/required for rope_type "llama3"/);
    expect(at(issuesOf(job({ model: { ...tinyLlama, rope_parameters: { rope_type: "longrope", rope_theta: 5e5 } } })), "model.rope_parameters.short_factor")[0]).toMatch(/required for rope_type "longrope"/);
    const b = issuesOf(job({ model: { ...tinyLlama, rope_theta: 1e4, rope_parameters: { rope_theta: 5e5 } } }));
    expect(at(b, "model.rope_parameters.rope_theta")[0]).toMatch(/differs from rope_theta 10000/);
  });
});

describe("files, --deepspeed merge and overrides", () => {
  test("a DeepSpeed file overrides DeepSpeed keys; its errors name that file; non-DeepSpeed keys are refused", async () => {
    const jobPath = join(dir, "job.json");
    writeFileSync(jobPath, JSON.stringify(job({ zero_optimization: { stage: 1, reduce_bucket_size: 1000 } })));
    const dsPath = join(dir, "ds.json");
    writeFileSync(dsPath, JSON.stringify({ zero_optimization: { stage: 2 }, gradient_clipping: 1.5 }));
    const { config } = await loadJobConfig({ configPath: jobPath, deepspeedPath: dsPath, overrides: { world_size: 2, steps: 9 } });
    expect([config.zero_optimization.stage, config.zero_optimization.reduce_bucket_size, config.gradient_clipping]).toEqual([2, 1000, 1.5]);
    expect([config.world_size, config.steps, config.train_batch_size]).toEqual([2, 9, 6]);

    writeFileSync(dsPath, JSON.stringify({ model: {}, zero_optimization: { stage: 7 } }));
    try {
      await loadJobConfig({ configPath: jobPath, deepspeedPath: dsPath });
      throw new Error("unreachable");
    } catch (e) {
      const issues = (e as ConfigError).issues;
      expect(issues.find((i) => i.path === "model")).toMatchObject({ source: dsPath });
      expect(issues.find((i) => i.path === "model")?.message).toMatch(/ZeroMoE job key/);
    }
    writeFileSync(dsPath, JSON.stringify({ zero_optimization: { stage: 7 } }));
    const e2 = (await loadJobConfig({ configPath: jobPath, deepspeedPath: dsPath }).catch((e: unknown) => e)) as ConfigError;
    expect(e2.issues[0]).toMatchObject({ path: "zero_optimization.stage", source: dsPath });
  });
  test("a dataset-name typo is a config error with did-you-mean, among the others, before any backend starts", async () => {
    const jobPath = join(dir, "typo.json");
    writeFileSync(jobPath, JSON.stringify({ ...DEFAULT_JOB, data: { ...(DEFAULT_JOB.data as object), dataset: "moby_dick" }, steps: -1 }));
    const e = (await loadJobConfig({ configPath: jobPath }).catch((x: unknown) => x)) as ConfigError;
    expect(e).toBeInstanceOf(ConfigError);
    expect(e.issues.map((i) => i.path).sort()).toEqual(["data.dataset", "steps"]);
    expect(e.issues.find((i) => i.path === "data.dataset")!.message).toBe(`"moby_dick" is not a built-in dataset ("moby-dick", "sotu") nor a file path (.txt, .jsonl, .parquet, .bin); did you mean "moby-dick"?`);
    // the CLI: exit 2 from the config check (no backend line, no stack)
    const p = Bun.spawnSync(["bun", "core/src/cli/train.ts", "--config", jobPath], { stdout: "pipe", stderr: "pipe" });
    expect(p.exitCode).toBe(2);
    const out = p.stdout.toString() + p.stderr.toString();
    expect(out).toContain('did you mean "moby-dick"?');
    expect(out).not.toContain("backend    ");
  });
  test("gradient_clipping follows DeepSpeed: a DeepSpeed config without it over the built-in job is off (0), with a warning naming the change", async () => {
    const dsPath = join(dir, "ds-noclip.json");
    writeFileSync(dsPath, JSON.stringify({ zero_optimization: { stage: 2 } }));
    const r = await loadJobConfig({ deepspeedPath: dsPath });
    expect(r.config.gradient_clipping).toBe(0);
    expect(r.warnings.find((w) => w.startsWith("gradient_clipping: off (0, DeepSpeed's default)"))).toContain(`the built-in job alone clips at 1`);
    // set in the DeepSpeed file, or on the built-in job without --deepspeed: kept, no warning
    writeFileSync(dsPath, JSON.stringify({ zero_optimization: { stage: 2 }, gradient_clipping: 0.5 }));
    const kept = await loadJobConfig({ deepspeedPath: dsPath });
    expect(kept.config.gradient_clipping).toBe(0.5);
    expect(kept.warnings.some((w) => w.startsWith("gradient_clipping:"))).toBe(false);
    expect((await loadJobConfig({})).config.gradient_clipping).toBe(1);
    // a job file that leaves it out is off, as in DeepSpeed
    const jobPath = join(dir, "job-noclip.json");
    writeFileSync(jobPath, JSON.stringify(job({})));
    expect((await loadJobConfig({ configPath: jobPath })).config.gradient_clipping).toBe(0);
  });
  test("a typical DeepSpeed ZeRO-3 offload config (DeepSpeed/HF examples, values filled in): merges cleanly; the offload plugin refuses what it cannot run, naming the field", async () => {
    const ds = {
      fp16: { enabled: true, auto_cast: false, loss_scale: 0, initial_scale_power: 32, loss_scale_window: 1000, hysteresis: 2, consecutive_hysteresis: false, min_loss_scale: 1 },
      optimizer: { type: "AdamW", params: { lr: 3e-5, betas: [0.8, 0.999], eps: 1e-8, weight_decay: 3e-7, torch_adam: false } },
      scheduler: { type: "WarmupDecayLR", params: { warmup_min_lr: 0, warmup_max_lr: 3e-5, warmup_num_steps: 500, total_num_steps: 10000, warmup_type: "linear" } },
      zero_optimization: {
        stage: 3, offload_optimizer: { device: "cpu", pin_memory: true }, offload_param: { device: "nvme", nvme_path: "/local_nvme", pin_memory: true, buffer_count: 5, buffer_size: 1e8, max_in_cpu: 1e9 },
        overlap_comm: true, contiguous_gradients: true, sub_group_size: 0, reduce_bucket_size: 5e8, stage3_prefetch_bucket_size: 5e7, stage3_param_persistence_threshold: 1e6,
        stage3_max_live_parameters: 0, stage3_max_reuse_distance: 0, stage3_gather_16bit_weights_on_model_save: true, allgather_partitions: true, round_robin_gradients: true,
      },
      gradient_accumulation_steps: 4, gradient_clipping: 1.0, steps_per_print: 2000, train_batch_size: 96, train_micro_batch_size_per_gpu: 3, wall_clock_breakdown: false,
      activation_checkpointing: { partition_activations: false, cpu_checkpointing: false, contiguous_memory_optimization: false, number_checkpoints: null, synchronize_checkpoint_boundary: false, profile: false },
      flops_profiler: { enabled: false, profile_step: 1, module_depth: -1, top_modules: 1, detailed: true, output_file: null, recompute_fwd_factor: 0.0 },
      zero_allow_untested_optimizer: true, prescale_gradients: false,
    };
    // the config accepts the offload keys (DeepSpeed's meanings); the offload plugin, which the
    // registry selects for them, runs them (warning that pin_memory has no effect) and refuses
    // what it cannot run naming the field
    const { offloadOptions } = await import("@zeromoe/plugin-offload");
    const { config: withOffload } = resolveJobConfig({ model: tinyLlama }, { deepspeed: { raw: ds, source: "ds_config.json" }, overrides: { world_size: 8 } });
    const o = offloadOptions(withOffload);
    expect([o.optimizer, o.param, o.paramNvmePath]).toEqual(["cpu", "nvme", "/local_nvme"]);
    expect(o.warnings.join("\n")).toContain("zero_optimization.offload_param.pin_memory");
    const noOptim = { ...withOffload, zero_optimization: { ...withOffload.zero_optimization, offload_optimizer: { ...withOffload.zero_optimization.offload_optimizer, device: "none" as const } } };
    // offload_param without offload_optimizer is DeepSpeed's too ("valid only with stage 3")
    expect([offloadOptions(noOptim).optimizer, offloadOptions(noOptim).param]).toEqual(["none", "nvme"]);
    ds.zero_optimization.offload_optimizer.device = "none";
    ds.zero_optimization.offload_param.device = "none";
    const { config, warnings } = resolveJobConfig({ model: tinyLlama }, { deepspeed: { raw: ds, source: "ds_config.json" }, overrides: { world_size: 8 } });
    expect([config.train_batch_size, config.gradient_accumulation_steps, config.zero_optimization.stage, config.zero_optimization.offload_param.nvme_path]).toEqual([96, 4, 3, "/local_nvme"]);
    expect(config.activation_checkpointing.enabled).toBe(true);
    expect(config.fp16.initial_scale_power).toBe(32);
    expect(warnings.length).toBe(8); // auto_cast, torch_adam, allgather_partitions, round_robin_gradients, recompute_fwd_factor, zero_allow_untested_optimizer, prescale_gradients, sub_group_size (no effect); overlap_comm true is honoured at stage 3
    expect(warnings.filter((w) => w.includes("overlap_comm")).length).toBe(0);
    expect(warnings.filter((w) => w.startsWith("zero_optimization.sub_group_size: accepted but has no effect here")).length).toBe(1);
  });
  test("missing file and bad JSON name the file (and line)", async () => {
    await expect(loadJobConfig({ configPath: join(dir, "absent.json") })).rejects.toThrow(/file not found: .*absent\.json/);
    const bad = join(dir, "bad.json");
    writeFileSync(bad, '{\n  "steps": 3,\n  "seed": }\n');
    await expect(loadJobConfig({ configPath: bad })).rejects.toThrow(/bad\.json/);
  });
  test("no --config → the default job; overrides apply", async () => {
    const { config } = await loadJobConfig({ overrides: { seed: 5, backend: "cpu" } });
    expect([config.seed, config.backend, config.model.model_type]).toEqual([5, "cpu", "mixtral"]);
  });
});

describe("docs/config.md", () => {
  test("the generated key reference is up to date with the schema (run `bun core/src/config/docs.ts`)", async () => {
    const { renderConfigReference, replaceGenerated } = await import("../src/config/docs.ts");
    const path = new URL("../../docs/config.md", import.meta.url).pathname;
    const doc = await Bun.file(path).text();
    expect(doc).toBe(replaceGenerated(doc, renderConfigReference()));
    for (const key of ["zero_optimization.stage3_param_persistence_threshold", "moe.noisy_gate_policy", "scheduler.params.cos_min_ratio", "model.num_local_experts", "data.validation_fraction"]) {
      expect(doc).toContain("`" + key + "`");
    }
  });
});

describe("JSON syntax positions", () => {
  test("line and column of the first error", async () => {
    const { findJsonSyntaxError } = await import("../src/config/json-position.ts");
    expect(findJsonSyntaxError('{\n  "steps": 3,\n  "seed": }\n')).toMatchObject({ line: 3, column: 11 });
    expect(findJsonSyntaxError('{"a": [1, 2,]}')).toMatchObject({ line: 1, column: 13 });
  });
  test("accepts and rejects exactly what JSON.parse does, on random mutations of a job file", async () => {
    const { findJsonSyntaxError } = await import("../src/config/json-position.ts");
    const { Rng } = await import("../src/data/prng.ts");
    const base = JSON.stringify({ ...DEFAULT_JOB, s: "a\\\"b\u00e9", n: [-0.5, 1e-7, 0, true, null] }, null, 2);
    const alphabet = ' \n{}[]",:0123456789-+.eE\\truefalsnl';
    const rng = new Rng(31);
    let rejected = 0;
    for (let trial = 0; trial < 3000; trial++) {
      let t = base;
      for (let m = 1 + rng.nextInt(2); m > 0; m--) {
        const at = rng.nextInt(t.length);
        const op = rng.nextInt(3);
        const ch = alphabet[rng.nextInt(alphabet.length)];
        t = op === 0 ? t.slice(0, at) + t.slice(at + 1) : op === 1 ? t.slice(0, at) + ch + t.slice(at) : t.slice(0, at) + ch + t.slice(at + 1);
      }
      let ok = true;
      try {
        JSON.parse(t);
      } catch {
        ok = false;
        rejected++;
      }
      expect(findJsonSyntaxError(t) === null).toBe(ok);
    }
    expect(rejected).toBeGreaterThan(1000); // the mutations do produce invalid JSON
  });
});
