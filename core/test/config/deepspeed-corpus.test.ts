/**
 * Real DeepSpeed configs, written here in our own words from their public originals (the keys and
 * values they carry), each laid over a small job as a user would pass it:
 * `bun run train --config job.json --deepspeed FILE --backend cpu --world-size 2 --steps 3`.
 * Each either trains its 3 steps (exit 0, finite losses, the resolved ZeRO stage and offload as the
 * file asks) or is refused (exit 2) only where DeepSpeed 0.19 also refuses it or asks for a feature
 * ZeroMoE lacks, with the message checked. Sources: LLaMA-Factory examples/deepspeed/ds_z{0,2,3}_config
 * and ds_z{2,3}_offload_config; ms-swift's zero3.json; Transformers' tests/deepspeed/ds_config_zero3.json;
 * Accelerate's zero_stage3_offload_config.json template; a DeepSpeed-names file (Hjson comments,
 * `_comment`, the unprefixed ZeRO-3 names, DeepSpeed's checkpoint section, aio's 0.19 names, ...).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const ROOT = new URL("../../../", import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), "zm-ds-corpus-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The small job every config is laid over (the HF Trainer's part: micro-batch, lr). */
const JOB = {
  model: { model_type: "mixtral", vocab_size: 256, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 64, num_local_experts: 4, num_experts_per_tok: 2 },
  data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 32 },
  steps: 3,
  train_micro_batch_size_per_gpu: 2,
  optimizer: { type: "AdamW", params: { lr: 1e-3 } },
};
const jobPath = join(dir, "job.json");
writeFileSync(jobPath, JSON.stringify(JOB));

// the Trainer-facing "auto" block every LLaMA-Factory file starts with
const LF_HEAD = {
  train_batch_size: "auto", train_micro_batch_size_per_gpu: "auto", gradient_accumulation_steps: "auto", gradient_clipping: "auto", zero_allow_untested_optimizer: true,
  fp16: { enabled: "auto", loss_scale: 0, loss_scale_window: 1000, initial_scale_power: 16, hysteresis: 2, min_loss_scale: 1 },
  bf16: { enabled: "auto" },
};
const LF_TAIL = { comms_config: { verbose: false }, monitor_config: { enabled: false } };
const LF_Z2_ZERO = { allgather_partitions: true, allgather_bucket_size: 5e8, overlap_comm: false, reduce_scatter: true, reduce_bucket_size: 5e8, contiguous_gradients: true, round_robin_gradients: true };
const LF_Z3_ZERO = { overlap_comm: false, contiguous_gradients: true, sub_group_size: 1e9, reduce_bucket_size: "auto", stage3_prefetch_bucket_size: "auto", stage3_param_persistence_threshold: "auto", stage3_max_live_parameters: 1e9, stage3_max_reuse_distance: 1e9, stage3_gather_16bit_weights_on_model_save: true };
const CPU_PINNED = { device: "cpu", pin_memory: true };

interface Case {
  /** File text (JSON, or Hjson with comments). */
  text: string;
  /** Expected: trains, with this ZeRO stage and offload words in the precision line. */
  runs?: { stage: number; offload?: string; warns?: string[] };
  /** Expected: exit 2 with these words. */
  refused?: string[];
}

const json = (v: unknown): string => JSON.stringify(v, null, 2);

const CASES: Record<string, Case> = {
  "llamafactory-ds_z0": { text: json({ ...LF_HEAD, zero_optimization: { stage: 0, ...LF_Z2_ZERO }, ...LF_TAIL }), runs: { stage: 0, warns: ["comms_config: not a DeepSpeed key, ignored as DeepSpeed ignores it", "monitor_config: not a DeepSpeed key"] } },
  "llamafactory-ds_z2": { text: json({ ...LF_HEAD, zero_optimization: { stage: 2, ...LF_Z2_ZERO }, ...LF_TAIL }), runs: { stage: 2 } },
  "llamafactory-ds_z2_offload": { text: json({ ...LF_HEAD, zero_optimization: { stage: 2, offload_optimizer: CPU_PINNED, ...LF_Z2_ZERO }, ...LF_TAIL }), runs: { stage: 2, offload: "offload optimizer→cpu" } },
  "llamafactory-ds_z3": { text: json({ ...LF_HEAD, zero_optimization: { stage: 3, ...LF_Z3_ZERO }, ...LF_TAIL }), runs: { stage: 3 } },
  "llamafactory-ds_z3_offload": { text: json({ ...LF_HEAD, zero_optimization: { stage: 3, offload_optimizer: CPU_PINNED, offload_param: CPU_PINNED, ...LF_Z3_ZERO }, ...LF_TAIL }), runs: { stage: 3, offload: "offload optimizer→cpu, params→cpu" } },
  "ms-swift-zero3": {
    text: json({
      fp16: { enabled: "auto", loss_scale: 0, loss_scale_window: 1000, initial_scale_power: 16, hysteresis: 2, min_loss_scale: 1 },
      bf16: { enabled: "auto" },
      zero_optimization: {
        stage: 3, offload_optimizer: { device: "none", pin_memory: true }, offload_param: { device: "none", pin_memory: true }, overlap_comm: false, contiguous_gradients: true, sub_group_size: 1e9, reduce_bucket_size: "auto",
        zero_quantized_weights: false, zero_quantized_gradients: false, stage3_prefetch_bucket_size: "auto", stage3_param_persistence_threshold: "auto", stage3_max_live_parameters: 1e9, stage3_max_reuse_distance: 1e9, stage3_gather_16bit_weights_on_model_save: true,
      },
      gradient_accumulation_steps: "auto", gradient_clipping: "auto", steps_per_print: 2000, train_batch_size: "auto", train_micro_batch_size_per_gpu: "auto", wall_clock_breakdown: false,
    }),
    runs: { stage: 3 },
  },
  "transformers-tests-ds_config_zero3": {
    text: json({
      fp16: { enabled: "auto", loss_scale: 0, loss_scale_window: 1000, initial_scale_power: 16, hysteresis: 2, min_loss_scale: 1 },
      bf16: { enabled: "auto" },
      optimizer: { type: "AdamW", params: { lr: "auto", betas: "auto", eps: "auto", weight_decay: "auto" } },
      scheduler: { type: "WarmupLR", params: { warmup_min_lr: "auto", warmup_max_lr: "auto", warmup_num_steps: "auto" } },
      zero_optimization: {
        stage: 3, offload_optimizer: CPU_PINNED, offload_param: CPU_PINNED, overlap_comm: true, contiguous_gradients: true, sub_group_size: 1e9, reduce_bucket_size: 0,
        stage3_prefetch_bucket_size: "auto", stage3_param_persistence_threshold: "auto", stage3_max_live_parameters: 1e9, stage3_max_reuse_distance: 1e9, stage3_gather_16bit_weights_on_model_save: true,
      },
      gradient_accumulation_steps: "auto", gradient_clipping: "auto", steps_per_print: 2000, train_batch_size: "auto", train_micro_batch_size_per_gpu: "auto", wall_clock_breakdown: false,
    }),
    runs: { stage: 3, offload: "offload optimizer→cpu, params→cpu", warns: [] },
  },
  "accelerate-zero_stage3_offload": {
    text: json({
      fp16: { enabled: true, loss_scale: 0, loss_scale_window: 1000, initial_scale_power: 16, hysteresis: 2, min_loss_scale: 1 },
      optimizer: { type: "AdamW", params: { lr: "auto", weight_decay: "auto" } },
      scheduler: { type: "WarmupDecayLR", params: { warmup_min_lr: "auto", warmup_max_lr: "auto", warmup_num_steps: "auto", total_num_steps: "auto" } },
      zero_optimization: {
        stage: 3, offload_optimizer: CPU_PINNED, offload_param: CPU_PINNED, overlap_comm: true, contiguous_gradients: true, reduce_bucket_size: "auto", stage3_prefetch_bucket_size: "auto",
        stage3_param_persistence_threshold: "auto", sub_group_size: 1e9, stage3_max_live_parameters: 1e9, stage3_max_reuse_distance: 1e9, stage3_gather_16bit_weights_on_model_save: "auto",
      },
      gradient_accumulation_steps: 1, gradient_clipping: "auto", steps_per_print: 2000, train_batch_size: "auto", train_micro_batch_size_per_gpu: "auto", wall_clock_breakdown: false,
    }),
    runs: { stage: 3, offload: "offload optimizer→cpu, params→cpu", warns: ["zero_optimization.stage3_gather_16bit_weights_on_model_save = false (the default: DeepSpeed's config models drop \"auto\")"] },
  },
  "deepspeed-names-hjson": {
    text: `{
  // DeepSpeed parses its config with hjson: comments are fine
  "_comment": "DeepSpeed 0.19's own names and values",
  "train_micro_batch_size_per_gpu": 2,
  "zero_optimization": {
    "stage": 3,
    "prefetch_bucket_size": 100000,       # unprefixed ZeRO-3 names (DeepSpeed's field names)
    "param_persistence_threshold": 1000,
    "max_live_parameters": 1e9,
    "max_reuse_distance": 1e9,
    "gather_16bit_weights_on_model_save": false,
    "zero_quantized_weights": false,
    "leaf_module": { "classes": [] },
    "reduce_bucket_size": 0
  },
  "aio": { "intra_op_parallelism": 1, "use_gds": false },
  "flops_profiler": { "enabled": false, "profile_step": -1 },
  "curriculum_learning": { "enabled": false },
  "checkpoint": { "tag_validation": "Warn", "load_universal": false },
  "tensor_parallel": { "autotp_size": 0 },
  "activation_checkpointing": { "partition_activations": false, "cpu_checkpointing": false, "number_checkpoints": null }
}`,
    runs: { stage: 3, warns: ["zero_optimization.leaf_module: ignored", "checkpoint.tag_validation: ignored"] },
  },
  "zero++-quantized-weights": { text: json({ zero_optimization: { stage: 3, zero_quantized_weights: true, zero_hpz_partition_size: 2 } }), refused: ["zero_optimization.zero_quantized_weights: true is not supported: ZeRO++ quantized weight all-gather (qwZ) is not implemented", "zero_optimization.zero_hpz_partition_size: 2 is not supported: ZeRO++ hierarchical partitioning"] },
  "onebit-adam-zero3": { text: json({ optimizer: { type: "OneBitAdam", params: { lr: 1e-3, freeze_step: 2 } }, zero_optimization: { stage: 3 } }), refused: ['optimizer.type: optimizer "OneBitAdam" is not available: 1-bit Adam'] },
  "autotp": { text: json({ tensor_parallel: { autotp_size: 2 }, zero_optimization: { stage: 1 } }), refused: ["tensor_parallel: ", "AutoTP tensor parallelism is not implemented"] },
};

describe("DeepSpeed config corpus: bun run train --deepspeed FILE --backend cpu --world-size 2 --steps 3", () => {
  for (const [name, c] of Object.entries(CASES)) {
    test(name, async () => {
      const file = join(dir, `${name}.json`);
      writeFileSync(file, c.text);
      const summary = join(dir, `${name}.summary.json`);
      const p = Bun.spawn(["bun", "run", "train", "--config", jobPath, "--deepspeed", file, "--backend", "cpu", "--world-size", "2", "--steps", "3", "--summary", summary], { cwd: ROOT, stdout: "pipe", stderr: "pipe", env: { ...process.env, CI: "1" } });
      const [o, e] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text()]);
      const code = await p.exited;
      const out = o + e;
      if (c.runs) {
        expect({ code, out }).toMatchObject({ code: 0 });
        expect(out).toContain(`ZeRO stage ${c.runs.stage}`);
        if (c.runs.offload) expect(out).toContain(c.runs.offload);
        for (const w of c.runs.warns ?? []) expect(out).toContain(w);
        expect(out).not.toContain("not a DeepSpeed key;"); // never a refusal of a DeepSpeed key
        const s = JSON.parse(readFileSync(summary, "utf8"));
        expect(s.losses.length).toBe(3);
        expect(s.losses.every((l: number) => Number.isFinite(l))).toBe(true);
      } else {
        expect({ code, out: code === 2 ? "" : out }).toEqual({ code: 2, out: "" });
        for (const w of c.refused!) expect(out).toContain(w);
        expect(out).not.toMatch(/^\s+at /m); // no stack trace
      }
    }, 300_000);
  }
});
