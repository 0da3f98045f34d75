/**
 * Resume check of the data stream: the data position a checkpoint records (DataLoader.state())
 * counts windows of ONE stream — the dataset, its tokenization, the window length and the
 * seed-driven shuffle. Resuming with another `data.dataset`, `data.tokenizer`, `data.seq_len` or
 * `seed` than the saving job's silently continues at that position in a different stream, so the
 * trainer warns, naming the keys.
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
