/**
 * Schema of a whole job file: ZeroMoE's own sections (`model`, `data`, `checkpoint`, `moe`, run
 * keys) plus the DeepSpeed keys of {@link DEEPSPEED_FIELDS} at top level.
 * Defaults of `moe.k`, `moe.aux_loss`, `moe.aux_loss_coef`, `moe.drop_tokens` depend on the model
 * and are filled in by resolve.ts.
 */
import { DEEPSPEED_ALIASES, DEEPSPEED_FIELDS, DEEPSPEED_IGNORED, DEEPSPEED_UNSUPPORTED } from "./spec-deepspeed.ts";
import { CHECKPOINT_DEEPSPEED_IGNORED } from "./spec-deepspeed-other.ts";
import { MODEL_SPEC } from "./spec-model.ts";
import { suggestBackend } from "./backend-name.ts";
import { addIssue, type CheckContext, type ObjectSpec, type Spec } from "./schema.ts";
import { parseByteSize } from "./byte-size.ts";
import { suggest } from "./errors.ts";
import { existsSync } from "node:fs";
import { tokenizerJsonPath } from "../data/hf-tokenizer.ts";
import { describeValue } from "./json-bounds.ts";
import { quoteUntrusted } from "./quote-untrusted.ts";

/** `data` section. */
export const DATA_SPEC: ObjectSpec = {
  kind: "object",
  default: {},
  doc: "training data",
  fields: {
    dataset: { kind: "string", default: "moby-dick", doc: '"moby-dick", "sotu", or a path to .txt, .jsonl (a `text` field per line, or chat records: data.format), .parquet (a `text` column, or chat records) or uint16 .bin tokens' },
    tokenizer: {
      kind: "custom",
      typeName: '"byte", "gpt2" or a path',
      default: "byte",
      doc: "byte (vocab 256), gpt2 BPE (vocab 50257), or a Hugging Face tokenizer.json / a directory holding one (e.g. the --init-from directory)",
      check(value: unknown, path: string, ctx: CheckContext): unknown {
        if (value === "byte" || value === "gpt2") return value;
        if (typeof value === "string" && value !== "" && tokenizerJsonPath(value) !== null) return value;
        const near = typeof value === "string" ? suggest(value, ["byte", "gpt2"]) : null;
        const what = typeof value === "string" && existsSync(value) ? `${quoteUntrusted(value)} holds no tokenizer.json` : `got ${describeValue(value)}`;
        addIssue(ctx, path, `expected "byte", "gpt2" or a path to a Hugging Face tokenizer.json (or a directory holding one); ${what}${near ? `; did you mean "${near}"?` : ""}`);
        return undefined;
      },
    },
    seq_len: { kind: "number", int: true, min: 1, default: 64, doc: "tokens per training sequence" },
    validation_fraction: { kind: "number", min: 0, max: 0.5, default: 0.05, doc: "tail fraction of the tokens (chat data: of the rows) held out for validation" },
    format: { kind: "enum", values: ["auto", "text", "messages", "alpaca", "sharegpt"], default: "auto", doc: 'records of a .jsonl or .parquet dataset: "text" (a `text` field), chat "messages", "alpaca" (instruction/input/output) or "sharegpt" (conversations of from/value); "auto" takes the first record\'s shape (docs/fine-tuning.md)' },
    chat_template: { kind: "string", nullable: true, default: null, doc: "chat data: a Jinja chat template file, or the name of one of tokenizer_config.json's named templates (null: its chat_template, the \"default\" one of a list)" },
    train_on_prompt: { kind: "boolean", default: false, doc: "chat data: train on every token, not only the assistant turns" },
    packing: { kind: "boolean", default: false, doc: "chat data: several examples per row (segments: positions restart, attention per example) instead of one example per row padded" },
  },
};

/** `checkpoint` section (DeepSpeed's own `checkpoint` keys are accepted and ignored). */
export const CHECKPOINT_SPEC: ObjectSpec = {
  kind: "object",
  default: {},
  doc: "sharded checkpoints",
  fields: {
    dir: { kind: "string", nullable: true, default: null, doc: "directory of checkpoint tags (null = no saving)" },
    save_interval: { kind: "number", int: true, min: 0, default: 0, doc: "save every N steps (0 = only at the end)" },
    keep_last: { kind: "number", int: true, min: 0, default: 0, doc: "keep the newest N tags (0 = all)" },
  },
  ignored: CHECKPOINT_DEEPSPEED_IGNORED,
};

/** `moe` section (DeepSpeed MoE layer argument names where they exist). */
export const MOE_SPEC: ObjectSpec = {
  kind: "object",
  doc: "Mixture-of-Experts routing and expert parallelism",
  fields: {
    ep_size: { kind: "number", int: true, min: 1, default: 1, doc: "expert-parallel group size (divides num_local_experts and world_size)" },
    etp_size: { kind: "number", int: true, min: 1, default: 1, doc: "expert tensor parallelism (Megatron-Core's expert_tensor_parallel_size): ranks each expert's w1/w3 rows and w2 columns are split over; ep_size × etp_size divides world_size, etp_size divides the expert's intermediate size" },
    capacity_factor: { kind: "number", min: 0, exclusiveMin: true, default: 1.0, doc: "training capacity per expert: ceil(factor · tokens / E), at least min_capacity (docs/domain.md §4)" },
    eval_capacity_factor: { kind: "number", min: 0, exclusiveMin: true, default: 1.0, doc: "capacity factor in evaluation" },
    min_capacity: { kind: "number", int: true, min: 0, default: 4, doc: "lower bound of the capacity per expert" },
    drop_tokens: { kind: "boolean", doc: "drop tokens past capacity (default: false for mixtral aux_loss, true otherwise)" },
    k: { kind: "number", int: true, min: 1, max: 8, doc: "experts per token (default: model.num_experts_per_tok)" },
    aux_loss: { kind: "enum", values: ["switch", "gshard", "mixtral"], doc: 'load-balancing loss (default: "mixtral" for a mixtral model)' },
    aux_loss_coef: { kind: "number", min: 0, doc: "aux-loss weight (default: model.router_aux_loss_coef)" },
    z_loss_coef: { kind: "number", min: 0, default: 0, doc: "router z-loss weight (ST-MoE)" },
    noisy_gate_policy: { kind: "enum", values: ["Jitter", "RSample"], nullable: true, default: null, doc: "router noise in training" },
    router_logits_clamp: { kind: "number", min: 0, exclusiveMin: true, nullable: true, default: null, doc: "clamp router logits to [-v, v] (null = off)" },
    placement: { kind: "enum", values: ["contiguous", "round_robin", "balanced", "co_occurrence", "topology"], default: "contiguous", doc: "which experts each EP rank holds (co_occurrence, topology: from routing statistics of a checkpoint or moe.routing_log; docs/moe.md)" },
    topology: { kind: "string", nullable: true, default: null, doc: 'groups of world ranks for placement "topology": a JSON file {"groups": [[0,1],[2,3]]} or a hostfile (host slots=N); equal groups covering every rank' },
    routing_log: { kind: "string", nullable: true, default: null, doc: "a --summary JSON of an earlier run: its moe.expert_pairs and moe.expert_counts feed the co_occurrence, topology and balanced placements at start (a checkpoint's statistics win on resume)" },
    dead_expert_steps: { kind: "number", int: true, min: 0, default: 0, doc: "report an expert that got no tokens for N steps (0 = off)" },
    replace_every: { kind: "number", int: true, min: 0, default: 0, doc: "live re-placement: every N steps recompute the placement and move the experts whose rank changes (0 = off; needs ep_size > 1 and a placement that can change, e.g. balanced; docs/moe.md)" },
  },
};

/** ZeroMoE's own top-level keys. */
export const JOB_FIELDS: Readonly<Record<string, Spec>> = {
  model: MODEL_SPEC,
  data: DATA_SPEC,
  seed: { kind: "number", int: true, min: 0, max: 2 ** 32 - 1, default: 1234, doc: "seed for init, data order and router noise" },
  backend: { kind: "enum", values: ["auto", "webgpu", "cpu"], default: "auto", doc: "compute backend", suggestValue: suggestBackend },
  world_size: { kind: "number", int: true, min: 1, default: 1, doc: "number of ranks (data-parallel world size)" },
  steps: { kind: "number", int: true, min: 0, default: 100, doc: "optimizer steps to run" },
  eval_interval: { kind: "number", int: true, min: 0, default: 0, doc: "evaluate every N steps (0 = never)" },
  eval_batches: { kind: "number", int: true, min: 1, default: 4, doc: "validation micro-batches per rank per evaluation" },
  checkpoint: CHECKPOINT_SPEC,
  max_bad_steps: { kind: "number", int: true, min: 0, default: 10, doc: "stop the run (exit 4) after N consecutive bad steps: non-finite loss, skipped without dynamic loss scaling, or zero gradient norm (0 = never)" },
  max_device_memory: {
    kind: "custom",
    typeName: "size (\"8MiB\", \"4GiB\", bytes) or null",
    nullable: true,
    default: null,
    doc: "device memory budget per rank (model states + activations + buffers); the memory check refuses a job whose model states exceed it (naming offload as the fix) and the backend's allocator fails past it; null = the backend's own limits. --max-device-memory overrides",
    check(value: unknown, path: string, ctx: CheckContext): unknown {
      const b = parseByteSize(value);
      if (typeof b === "string") {
        addIssue(ctx, path, b);
        return undefined;
      }
      return b;
    },
  },
  lm_z_loss_coef: { kind: "number", min: 0, default: 0, doc: "z-loss weight on the LM head (PaLM): the loss gains coef · mean(logsumexp(logits)²) over the scored tokens, in training and evaluation (0 = off; the router's is moe.z_loss_coef)" },
  plugins: { kind: "array", items: { kind: "string" }, default: [], doc: "third-party plugins: package names or paths" },
  freeze: {
    kind: "array",
    items: { kind: "string" },
    default: [],
    doc: 'parameters that do not train: Hugging Face parameter-name globs (`*` any characters, `?` one) or module names, e.g. ["model.embed_tokens", "model.layers.0.*"]; a frozen unit gets no gradient, optimizer state, weight decay or gradient communication; a unit is frozen whole (a pattern set covering part of one, or a pattern matching nothing, is refused)',
  },
  moe: MOE_SPEC,
};

/** The whole job file. */
export const JOB_SPEC: ObjectSpec = {
  kind: "object",
  doc: "ZeroMoE job",
  fields: { ...JOB_FIELDS, ...DEEPSPEED_FIELDS },
  aliases: DEEPSPEED_ALIASES,
  ignored: DEEPSPEED_IGNORED,
  unsupported: DEEPSPEED_UNSUPPORTED,
};
