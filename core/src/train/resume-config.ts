/**
 * Resume check of the data stream: the data position a checkpoint records (DataLoader.state())
 * counts windows of ONE stream — the dataset, its tokenization, the window length and the
 * seed-driven shuffle. Resuming with another `data.dataset`, `data.tokenizer`, `data.seq_len` or
 * `seed` than the saving job's silently continues at that position in a different stream, so the
 * trainer warns, naming the keys. Likewise the learning-rate schedule: the scheduler's state comes
 * back from the checkpoint, but its plan comes from the job, so `--resume --steps 150` on a
 * 100-step job re-planned WarmupDecayLR over 150 steps (the lr jumped from 3.0e-4 to 9.1e-4) without
 * a word: {@link scheduleChanges} names every schedule value that differs.
 */
import type { JobConfig } from "../config/types.ts";

/** The job keys that define the training stream, as dotted paths. */
export const DATA_STREAM_KEYS = ["data.dataset", "data.tokenizer", "data.seq_len", "seed"] as const;

/** Value at a dotted path of an untrusted object, or undefined. */
function at(obj: unknown, path: string): unknown {
  let v: unknown = obj;
  for (const k of path.split(".")) {
    if (v === null || typeof v !== "object") return undefined;
    v = (v as Record<string, unknown>)[k];
  }
  return v;
}

/**
 * The data-stream keys whose value in `config` differs from the checkpoint's saved job config
 * `saved` (the manifest's `config`, read as untrusted JSON), each as
 * `key <value now> (checkpoint: <saved value>)` with JSON values; empty when all agree.
 * A key missing from `saved` counts as different.
 */
export function dataStreamChanges(saved: unknown, config: JobConfig): string[] {
  const out: string[] = [];
  for (const key of DATA_STREAM_KEYS) {
    const now = JSON.stringify(at(config, key));
    const then = JSON.stringify(at(saved, key)) ?? "nothing";
    if (now !== then) out.push(`${key} ${now} (checkpoint: ${then})`);
  }
  return out;
}

/** Every leaf of `v` as [dotted path under `prefix`, JSON value]. */
function leaves(v: unknown, prefix: string, out: [string, string][] = []): [string, string][] {
  if (v !== null && typeof v === "object" && !Array.isArray(v)) {
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) leaves(x, prefix ? `${prefix}.${k}` : k, out);
  } else out.push([prefix, JSON.stringify(v) ?? "nothing"]);
  return out;
}

/**
 * The learning-rate schedule values (`scheduler.*`, the optimizer's `lr`, and the `steps` a
 * schedule is planned over) whose value in `config` differs from the checkpoint's saved job
 * config `saved` (untrusted JSON), each as `key <value now> (checkpoint: <saved value>)`; empty
 * when the resumed run follows the saved schedule.
 */
export function scheduleChanges(saved: unknown, config: JobConfig): string[] {
  const out: string[] = [];
  const then = new Map(leaves(at(saved, "scheduler"), "scheduler"));
  const now = leaves(config.scheduler, "scheduler");
  for (const [k, v] of now) if (then.get(k) !== v) out.push(`${k} ${v} (checkpoint: ${then.get(k) ?? "nothing"})`);
  for (const k of then.keys()) if (!now.some(([n]) => n === k)) out.push(`${k} nothing (checkpoint: ${then.get(k)})`);
  const lr = JSON.stringify(config.optimizer.params.lr);
  const lrThen = JSON.stringify(at(saved, "optimizer.params.lr")) ?? "nothing";
  if (lr !== lrThen) out.push(`optimizer.params.lr ${lr} (checkpoint: ${lrThen})`);
  // steps plans the schedules that run to the end of training (their total_num_steps follows it)
  const steps = JSON.stringify(config.steps);
  const stepsThen = JSON.stringify(at(saved, "steps")) ?? "nothing";
  if (out.length > 0 && steps !== stepsThen) out.unshift(`steps ${steps} (checkpoint: ${stepsThen})`);
  return out;
}
