/**
 * DeepSpeed's observability keys (issue 16): the monitors `tensorboard` and `csv_monitor`
 * (deepspeed/monitor/config.py: enabled, output_path, job_name), the communication logger
 * `comms_logger` (deepspeed/comm/config.py: enabled, verbose, prof_all, debug, prof_ops), and
 * `noEffect`, which marks a key that is accepted for compatibility but does nothing here: it warns
 * once, naming the key, whenever a job gives it. What each key writes is in docs/summary.md.
 */
import { check, describeSpec, type CheckContext, type CustomSpec, type ObjectSpec, type Spec } from "./schema.ts";

const bool = (doc: string, def: boolean): Spec => ({ kind: "boolean", default: def, doc });

/** `tensorboard` / `csv_monitor`: DeepSpeed's monitor keys. */
function monitorSpec(doc: string, folder: string): ObjectSpec {
  return {
    kind: "object",
    default: {},
    doc,
    fields: {
      enabled: bool("write the files (rank 0)", false),
      output_path: { kind: "string", allowEmpty: true, default: "", doc: `folder of the job folder ("": ~/${folder}, as DeepSpeed)` },
      job_name: { kind: "string", default: "DeepSpeedJobName", doc: "sub-folder the files go to" },
    },
  };
}

/** `tensorboard`. */
export const TENSORBOARD_SPEC: ObjectSpec = monitorSpec("TensorBoard event files of the training scalars (docs/summary.md)", "tensorboard");

/** `csv_monitor`. */
export const CSV_MONITOR_SPEC: ObjectSpec = monitorSpec("one CSV file per training scalar, as DeepSpeed's csv_monitor (docs/summary.md)", "csv_monitor");

/** `comms_logger`. */
export const COMMS_LOGGER_SPEC: ObjectSpec = {
  kind: "object",
  default: {},
  doc: "log every collective by op and message size: count, bytes, latency, algbw, busbw (docs/summary.md)",
  fields: {
    enabled: bool("record collectives; print the table at the end of the run and put it in the summary", false),
    verbose: bool("print one line per collective as it completes (rank 0)", false),
    prof_all: bool("record every collective (false: only those in prof_ops)", true),
    debug: bool("append the calling function to each op name", false),
    prof_ops: { kind: "array", items: { kind: "string" }, default: [], doc: "collectives recorded when prof_all is false (all_reduce, reduce_scatter, all_gather, all_to_all_v, broadcast, gather, scatter, barrier; DeepSpeed's all_to_all_single, all_gather_into_tensor, reduce_scatter_tensor accepted)" },
  },
};

/**
 * A key that is accepted with `inner`'s type and default but has no effect in ZeroMoE: when a job
 * gives it, one warning `<path>: accepted but has no effect here (<why>)` is recorded.
 */
export function noEffect(inner: Spec, why: string): CustomSpec {
  return {
    kind: "custom",
    typeName: describeSpec(inner),
    default: inner.default,
    nullable: inner.nullable,
    doc: `${inner.doc ?? ""} — accepted, no effect here (${why}); warns when given`,
    inert: { why, always: true },
    check(value: unknown, path: string, ctx: CheckContext): unknown {
      const v = check(value, inner, path, ctx);
      ctx.warnings.push(`${path}: accepted but has no effect here (${why})`);
      return v;
    },
  };
}

/**
 * A key acted on only at the value ZeroMoE always has (`quiet`): any other value is accepted with
 * `inner`'s type and one warning `<path>: <value> has no effect here (<why>)` (e.g. `overlap_comm:
 * true`, `contiguous_gradients: false`, `activation_checkpointing.cpu_checkpointing: true`).
 */
export function noEffectUnless(inner: Spec, quiet: (value: unknown) => boolean, why: string): CustomSpec {
  return {
    kind: "custom",
    typeName: describeSpec(inner),
    default: inner.default,
    nullable: inner.nullable,
    doc: `${inner.doc ?? ""} — other values are accepted with a warning: ${why}`,
    inert: { why, always: false },
    check(value: unknown, path: string, ctx: CheckContext): unknown {
      const v = check(value, inner, path, ctx);
      if (value !== undefined && v !== undefined && !quiet(v)) ctx.warnings.push(`${path}: ${JSON.stringify(v)} has no effect here (${why})`);
      return v;
    },
  };
}
