/**
 * A short human-readable description of a resolved job, for the start of a training log and for
 * `--summary` files: model size, data, batch geometry, optimizer and schedule, precision, ZeRO,
 * MoE. Pure formatting; no validation.
 */
import { moeShape } from "./moe-shape.ts";
import { countParameters } from "./param-count.ts";
import type { JobConfig } from "./types.ts";

/** 262976 → "263.0K", 1.2e9 → "1.20B". */
export function formatCount(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)}B`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(2)}M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)}K`;
  return String(n);
}

/** One line per aspect of the job (no trailing newline). */
export function summarizeJob(c: JobConfig): string[] {
  const m = c.model;
  const p = countParameters(m);
  const shape = moeShape(m);
  const moe = shape ? `, ${shape.numExperts} experts top-${shape.topK}${shape.layers.length < m.num_hidden_layers ? ` in ${shape.layers.length} layers` : ""}` : "";
  const active = p.activePerToken !== p.total ? ` (${formatCount(p.activePerToken)} active per token)` : "";
  const lines = [
    `model      ${m.model_type}: ${m.num_hidden_layers} layers, hidden ${m.hidden_size}, ${m.num_attention_heads} heads (${m.num_key_value_heads} kv), intermediate ${m.intermediate_size}${moe}; ${formatCount(p.total)} parameters${active}`,
    `data       ${c.data.dataset}, ${c.data.tokenizer} tokens, seq_len ${c.data.seq_len}, validation ${c.data.validation_fraction}`,
    `batch      ${c.train_micro_batch_size_per_gpu} micro × ${c.gradient_accumulation_steps} accumulation × ${c.world_size} ranks = ${c.train_batch_size} sequences = ${c.train_batch_size * c.data.seq_len} tokens per step; ${c.steps} steps`,
  ];
  const o = c.optimizer;
  const sched = c.scheduler ? `${c.scheduler.type} ${JSON.stringify(c.scheduler.params)}` : "constant lr";
  lines.push(`optimizer  ${o.type} lr ${o.params.lr}, betas [${o.params.betas.join(", ")}], eps ${o.params.eps}, weight_decay ${o.params.weight_decay}; ${sched}; clip ${c.gradient_clipping || "off"}`);
  const prec = c.fp16.enabled ? `fp16 (${c.fp16.loss_scale > 0 ? `static scale ${c.fp16.loss_scale}` : `dynamic scale from 2^${c.fp16.initial_scale_power}`})` : c.bf16.enabled ? "bf16" : "fp32";
  const z = c.zero_optimization;
  const off = [z.offload_optimizer.device !== "none" ? `optimizer→${z.offload_optimizer.device}` : "", z.offload_param.device !== "none" ? `params→${z.offload_param.device}` : ""].filter(Boolean).join(", ");
  lines.push(`precision  ${prec}; ZeRO stage ${z.stage}${off ? ` (offload ${off})` : ""}; backend ${c.backend}; seed ${c.seed}`);
  if (c.moe) {
    const cap = c.moe.drop_tokens ? `capacity factor ${c.moe.capacity_factor}, dropping` : "no dropping";
    lines.push(`moe        ep_size ${c.moe.ep_size}${(c.moe.etp_size ?? 1) > 1 ? `, etp_size ${c.moe.etp_size}` : ""}, k ${c.moe.k}, aux ${c.moe.aux_loss} × ${c.moe.aux_loss_coef}, z-loss × ${c.moe.z_loss_coef}, ${cap}, placement ${c.moe.placement}`);
  }
  return lines;
}
