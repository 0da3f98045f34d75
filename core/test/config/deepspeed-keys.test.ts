/**
 * DeepSpeed 0.19's keys (deepspeed-0.19-keys.ts, written from DeepSpeed's source): every one is
 * classified by the checker's own table (deepspeed-key-table.ts, which docs/config.md renders);
 * each alone at its DeepSpeed default is accepted in a --deepspeed file; each key whose feature is
 * missing here is refused when turned on, with its reason; unknown keys warn as DeepSpeed drops them.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { ConfigError, DEFAULT_JOB, resolveJobConfig } from "../../src/config/index.ts";
import { deepspeedKeyTable } from "../../src/config/deepspeed-key-table.ts";
import { DEEPSPEED_UNSUPPORTED, ZERO_UNSUPPORTED } from "../../src/config/spec-deepspeed-other.ts";
import { DEEPSPEED_019_KEYS, FEATURE_ON, ZERO_FEATURE_ON } from "./deepspeed-0.19-keys.ts";

/** `{a: {b: v}}` for path `a.b`. */
function nest(path: string, v: unknown): Record<string, unknown> {
  const ks = path.split(".");
  let o: unknown = v;
  for (let i = ks.length - 1; i >= 0; i--) o = { [ks[i]!]: o };
  return o as Record<string, unknown>;
}

const JOB = { ...DEFAULT_JOB, steps: 3 } as Record<string, unknown>;
const resolveDs = (ds: unknown) => resolveJobConfig(JOB, { deepspeed: { raw: ds, source: "ds.json" }, overrides: { world_size: 2 } });

function issuesOf(ds: unknown): string[] {
  try {
    resolveDs(ds);
    return [];
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    return e.issues.map((i) => `${i.path}: ${i.message}`);
  }
}

describe("DeepSpeed 0.19 keys", () => {
  const rows = deepspeedKeyTable();
  const byKey = new Map(rows.map((r) => [r.key, r]));

  test("every key is classified (itself, or a section handled as a whole)", () => {
    const unclassified = Object.keys(DEEPSPEED_019_KEYS).filter((k) => {
      if (byKey.has(k)) return false;
      const parts = k.split(".");
      for (let i = parts.length - 1; i > 0; i--) {
        const r = byKey.get(parts.slice(0, i).join("."));
        if (r && (r.handling === "warns" || r.handling === "refused-unless-off" || r.handling === "alias")) return false;
      }
      return true;
    });
    expect(unclassified).toEqual([]);
  });

  test("docs/config.md lists every classified key", () => {
    const doc = readFileSync(new URL("../../../docs/config.md", import.meta.url), "utf8");
    const missing = rows.filter((r) => !doc.includes(`| \`${r.key}\` |`)).map((r) => r.key);
    expect(missing).toEqual([]);
  });

  test("each key alone at its DeepSpeed default is accepted", () => {
    const refused: string[] = [];
    let n = 0;
    for (const [k, v] of Object.entries(DEEPSPEED_019_KEYS)) {
      if (v === undefined) continue;
      n++;
      for (const i of issuesOf(nest(k, v))) refused.push(`${k} = ${JSON.stringify(v)} → ${i}`);
    }
    expect(refused).toEqual([]);
    expect(n).toBeGreaterThan(150);
  });

  test("every missing feature, turned on, is refused with its reason", () => {
    expect(Object.keys(FEATURE_ON).sort()).toEqual(Object.keys(DEEPSPEED_UNSUPPORTED).sort());
    expect(Object.keys(ZERO_FEATURE_ON).sort()).toEqual(Object.keys(ZERO_UNSUPPORTED).sort());
    for (const [k, v] of Object.entries(FEATURE_ON)) {
      const got = issuesOf({ [k]: v });
      expect({ k, n: got.length }).toEqual({ k, n: 1 });
      expect(got[0]).toStartWith(`${k}: `);
      expect(got[0]).toEndWith(` is not supported: ${DEEPSPEED_UNSUPPORTED[k]!.why} (accepted: ${DEEPSPEED_UNSUPPORTED[k]!.offDoc})`);
    }
    for (const [k, v] of Object.entries(ZERO_FEATURE_ON)) {
      const got = issuesOf({ zero_optimization: { stage: 3, [k]: v } });
      expect(got.length).toBe(1);
      expect(got[0]).toStartWith(`zero_optimization.${k}: `);
      expect(got[0]).toContain(ZERO_UNSUPPORTED[k]!.why);
    }
    // ZeRO++ and FP8/AutoTP words a user looks for
    expect(issuesOf({ zero_optimization: { stage: 3, zero_quantized_weights: true } })[0]).toContain("ZeRO++ quantized weight all-gather (qwZ) is not implemented");
    expect(issuesOf({ tensor_parallel: { autotp_size: 2 } })[0]).toContain("AutoTP tensor parallelism is not implemented");
    expect(issuesOf({ bf16: { enabled: true, bf16_master_weights_and_grads: true } })[0]).toContain("bf16 master weights and gradients are not implemented");
    expect(issuesOf({ optimizer: { type: "OneBitAdam" } })[0]).toContain("1-bit Adam compresses the gradient all-reduce");
  });

  test("an unknown top-level key of a --deepspeed file warns with a did-you-mean; a ZeroMoE job key there is refused", () => {
    const { warnings } = resolveDs({ tensor_paralel: { autotp_size: 1 }, comms_config: {}, monitor_config: { enabled: false }, _comment: "a note" });
    expect(warnings).toContain('tensor_paralel: not a DeepSpeed key, ignored as DeepSpeed ignores it [ds.json]; did you mean "tensor_parallel"?');
    expect(warnings.filter((w) => w.startsWith("comms_config: not a DeepSpeed key")).length).toBe(1);
    expect(warnings.filter((w) => w.startsWith("monitor_config: not a DeepSpeed key")).length).toBe(1);
    expect(warnings.join("\n")).not.toContain("_comment");
    expect(issuesOf({ steps: 4 })).toEqual(["steps: not a DeepSpeed key; it is a ZeroMoE job key: put it in the job file (--config)"]);
  });

  test("DeepSpeed's checkpoint section is read next to the job's; the job's keys in a --deepspeed file are refused", () => {
    const { config, warnings } = resolveDs({ checkpoint: { tag_validation: "Fail", load_universal: true, use_node_local_storage: false } });
    expect(config.checkpoint.dir).toBeNull();
    expect(warnings).toContain("checkpoint.tag_validation: ignored (DeepSpeed key; tags are validated by the manifest checksum)");
    expect(warnings.filter((w) => w.startsWith("checkpoint.load_universal: ignored")).length).toBe(1);
    expect(issuesOf({ checkpoint: { dir: "/tmp/x", tag_validation: "Warn" } })).toEqual(["checkpoint.dir: a ZeroMoE job key, not one of DeepSpeed's checkpoint keys: put it in the job file (--config)"]);
  });

  test("sections DeepSpeed reads with dict.get warn on unknown keys; its pydantic sections refuse them", () => {
    const { warnings } = resolveDs({ activation_checkpointing: { partition_activation: true }, flops_profiler: { profile_stepp: 2 } });
    expect(warnings).toContain('activation_checkpointing.partition_activation: unknown key, ignored as DeepSpeed ignores it; did you mean "partition_activations"?');
    expect(warnings.filter((w) => w.startsWith("flops_profiler.profile_stepp: unknown key")).length).toBe(1);
    expect(issuesOf({ zero_optimization: { stage: 2, reduce_bucket_sise: 5 } })).toEqual(['zero_optimization.reduce_bucket_sise: unknown key; did you mean "reduce_bucket_size"?']);
  });

  test("DeepSpeed's names and values: unprefixed ZeRO-3 names, aio names, reduce_bucket_size 0, profile_step -1", () => {
    const { config: c, warnings } = resolveDs({
      zero_optimization: { stage: 3, prefetch_bucket_size: 7, param_persistence_threshold: 11, max_live_parameters: 13, max_reuse_distance: 17, gather_16bit_weights_on_model_save: true, reduce_bucket_size: 0 },
      aio: { intra_op_parallelism: 3, use_gds: false },
      flops_profiler: { enabled: true, profile_step: -1 },
    });
    expect([c.zero_optimization.stage3_prefetch_bucket_size, c.zero_optimization.stage3_param_persistence_threshold, c.zero_optimization.stage3_max_live_parameters, c.zero_optimization.stage3_max_reuse_distance]).toEqual([7, 11, 13, 17]);
    expect(c.zero_optimization.stage3_gather_16bit_weights_on_model_save).toBe(true);
    expect(c.zero_optimization.reduce_bucket_size).toBe(0);
    expect(c.aio.thread_count).toBe(3);
    expect(c.flops_profiler.profile_step).toBe(-1);
    expect(warnings.filter((w) => w.startsWith("aio."))).toEqual([]);
    expect(issuesOf({ zero_optimization: { stage: 3, max_live_parameters: 1, stage3_max_live_parameters: 2 } })[0]).toContain('both "max_live_parameters" (old name) and "stage3_max_live_parameters" are given');
  });

  test("values ZeroMoE cannot honour warn once, naming the key and why (never silently ignored)", () => {
    const { warnings } = resolveDs({
      zero_optimization: { stage: 2, overlap_comm: true, contiguous_gradients: false },
      activation_checkpointing: { partition_activations: true, cpu_checkpointing: true, contiguous_memory_optimization: true, number_checkpoints: 4, synchronize_checkpoint_boundary: true, profile: true },
      aio: { use_gds: true },
    });
    for (const k of ["zero_optimization.contiguous_gradients", "activation_checkpointing.partition_activations", "activation_checkpointing.cpu_checkpointing", "activation_checkpointing.contiguous_memory_optimization", "activation_checkpointing.number_checkpoints", "activation_checkpointing.synchronize_checkpoint_boundary", "activation_checkpointing.profile", "aio.use_gds"]) {
      expect({ k, n: warnings.filter((w) => w.startsWith(`${k}: `) && w.includes("has no effect here (")).length }).toEqual({ k, n: 1 });
    }
    // at ZeroMoE's own values: quiet
    const quiet = resolveDs({ zero_optimization: { stage: 2, overlap_comm: false, contiguous_gradients: true }, activation_checkpointing: { cpu_checkpointing: false, number_checkpoints: null } }).warnings;
    expect(quiet.filter((w) => w.includes("has no effect here"))).toEqual([]);
  });

  test("overlap_comm: honoured at stages 2 and 3 (quiet), warned at stages 0 and 1 naming why", () => {
    for (const stage of [2, 3]) expect(resolveDs({ zero_optimization: { stage, overlap_comm: true } }).warnings.filter((w) => w.includes("overlap_comm"))).toEqual([]);
    for (const stage of [0, 1]) {
      const w = resolveDs({ zero_optimization: { stage, overlap_comm: true } }).warnings.filter((x) => x.includes("overlap_comm"));
      expect(w).toEqual([`zero_optimization.overlap_comm: true has no effect here (stage ${stage} reduces the gradients once, after the last micro-batch; buckets overlap backward at stages 2 and 3)`]);
    }
  });
});
