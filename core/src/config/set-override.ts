/**
 * `--set KEY=VALUE` overrides of any job key (`--set moe.ep_size=1`, `--set data.seq_len=128`,
 * `--set optimizer.params.lr=1e-4`): KEY is a dotted path of plain key names, VALUE JSON
 * (`1`, `true`, `null`, `[1, 2]`, `"text"`) or else taken as a string (`--set data.dataset=sotu`).
 * They apply after the job file and `--deepspeed`, before the schema check, so a wrong key or value
 * is reported as any job error, naming the path. Needed, e.g., to resume an ep_size-2 checkpoint at
 * world size 1 without writing a new job file (checkpoints reshard across ep_size).
 */

/** One parsed `--set`. */
export interface SetOverride {
  /** The dotted path split into keys. */
  path: string[];
  value: unknown;
  /** The argument as given, for messages. */
  text: string;
}

const KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;
const FORBIDDEN = new Set(["__proto__", "prototype", "constructor"]);

/**
 * Parse one `--set` argument.
 * @returns the override, or a sentence saying what is wrong (for a usage error)
 */
export function parseSetOverride(arg: string): SetOverride | string {
  const eq = arg.indexOf("=");
  if (eq <= 0) return `expected KEY=VALUE (a dotted job key, e.g. moe.ep_size=1), got ${JSON.stringify(arg.slice(0, 80))}`;
  const key = arg.slice(0, eq);
  const raw = arg.slice(eq + 1);
  const path = key.split(".");
  if (path.length > 8 || !path.every((k) => KEY.test(k) && !FORBIDDEN.has(k))) return `${JSON.stringify(key.slice(0, 80))} is not a dotted path of key names (letters, digits, _)`;
  let value: unknown = raw;
  try {
    value = JSON.parse(raw);
  } catch {
    // not JSON: the text itself (a dataset name, a path)
  }
  return { path, value, text: arg };
}

/** A copy of `job` with every override set (objects created along the way; `job` unchanged). */
export function applySetOverrides(job: Record<string, unknown>, sets: readonly SetOverride[]): Record<string, unknown> {
  const out = structuredClone(job);
  for (const s of sets) {
    let o: Record<string, unknown> = out;
    for (const k of s.path.slice(0, -1)) {
      const next = Object.hasOwn(o, k) ? o[k] : undefined;
      if (next === null || typeof next !== "object" || Array.isArray(next)) o[k] = {};
      o = o[k] as Record<string, unknown>;
    }
    o[s.path[s.path.length - 1]!] = s.value;
  }
  return out;
}
