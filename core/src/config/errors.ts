/**
 * Configuration errors: every problem found while validating a job file is collected as a
 * {@link ConfigIssue} (JSON path + what was expected) and all of them are thrown together as one
 * {@link ConfigError}, so a user fixes a file in one pass instead of one error per run.
 */
import { pathForMessage } from "./quote-untrusted.ts";

/** One problem in a job/DeepSpeed config. */
export interface ConfigIssue {
  /** Dotted JSON path of the offending key, e.g. `zero_optimization.stage`, `optimizer.params.betas[1]`.
   * The empty string means the document root. */
  path: string;
  /** What is wrong and what was expected (type, range, allowed values). */
  message: string;
  /** File the value came from (job file, `--deepspeed` file, or `<cli>`), when known. */
  source?: string;
}

/** Formats one issue as `path: message [source]`; the path (it holds the file's keys) and the
 * source are rendered by quote-untrusted.ts pathForMessage: as they are when plain, else escaped
 * and bounded. */
export function formatIssue(issue: ConfigIssue): string {
  const where = issue.path === "" ? "(root)" : pathForMessage(issue.path);
  const from = issue.source ? ` [${pathForMessage(issue.source)}]` : "";
  return `${where}: ${issue.message}${from}`;
}

/**
 * Thrown by config loading/validation with every issue found. `issues` is the machine-readable list;
 * `message` lists them one per line.
 */
export class ConfigError extends Error {
  readonly issues: readonly ConfigIssue[];

  /** @param issues at least one issue; @param header optional first line (e.g. the file name). */
  constructor(issues: readonly ConfigIssue[], header = "invalid configuration") {
    const n = issues.length;
    super(`${header}: ${n} error${n === 1 ? "" : "s"}\n` + issues.map((i) => "  - " + formatIssue(i)).join("\n"));
    this.name = "ConfigError";
    this.issues = issues;
  }
}

/**
 * Levenshtein edit distance (insert/delete/substitute, each cost 1) between two strings;
 * O(|a|·|b|) time, O(|b|) memory. Source: V. I. Levenshtein, 1966.
 */
export function editDistance(a: string, b: string): number {
  const m = a.length;
  const n = b.length;
  if (m === 0) return n;
  if (n === 0) return m;
  let prev = new Array<number>(n + 1);
  let cur = new Array<number>(n + 1);
  for (let j = 0; j <= n; j++) prev[j] = j;
  for (let i = 1; i <= m; i++) {
    cur[0] = i;
    const ca = a.charCodeAt(i - 1);
    for (let j = 1; j <= n; j++) {
      const cost = ca === b.charCodeAt(j - 1) ? 0 : 1;
      cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost);
    }
    [prev, cur] = [cur, prev];
  }
  return prev[n];
}

/**
 * The closest candidate to `word` for a "did you mean" hint, or null when nothing is close.
 * Close means edit distance ≤ max(2, ⌊len/3⌋) on the lower-cased strings, or one name containing
 * the other (e.g. `stage3_gather_16bit_weights` → `stage3_gather_16bit_weights_on_model_save`).
 * Ties go to the candidate listed first. A word of more than 256 characters gets null.
 */
export function suggest(word: string, candidates: Iterable<string>): string | null {
  // no name here is longer than 256 characters: a longer word is close to none (and a 10 MB value
  // would cost 10M × |candidate| steps per candidate)
  if (word.length > 256) return null;
  const w = word.toLowerCase();
  let best: string | null = null;
  let bestD = Infinity;
  for (const c of candidates) {
    const lc = c.toLowerCase();
    let d = editDistance(w, lc);
    if (d > Math.max(2, Math.floor(Math.max(w.length, lc.length) / 3)) && w.length >= 4 && (lc.includes(w) || w.includes(lc))) {
      d = Math.max(2, Math.floor(lc.length / 3)); // containment counts as close, but ranks after real typos
    }
    if (d < bestD) {
      bestD = d;
      best = c;
    }
  }
  if (best === null) return null;
  const limit = Math.max(2, Math.floor(Math.max(w.length, best.length) / 3));
  return bestD <= limit ? best : null;
}
