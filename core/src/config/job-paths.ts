/**
 * One rule for relative paths in a job file: they are read from the job file's folder, as
 * `model.from_pretrained` and `plugins` already were (and as most tools read their config files),
 * whatever the working directory — `bun run` resets it to the repository root, so a job beside its
 * data found `data.dataset` only when started from the right place. The keys: `data.dataset`,
 * `data.tokenizer` (a tokenizer.json path), `data.chat_template`, `moe.topology`, `moe.routing_log` and `checkpoint.dir`. A path given absolute, the
 * built-in names ("moby-dick", "sotu", "byte", "gpt2") and DeepSpeed's own keys (monitor
 * output_path, nvme_path: DeepSpeed reads those from the working directory) are left as they are.
 * For reading paths, one that is missing from the job's folder but present from the working
 * directory (the old reading) is still used, with a warning saying how to write it.
 */
import { existsSync } from "node:fs";
import { isAbsolute, join, relative, resolve } from "node:path";

const BUILTIN = new Set(["moby-dick", "sotu", "byte", "gpt2"]);

/**
 * A copy of the raw job `job` (the parsed file) with its relative paths made absolute from
 * `jobDir` (module comment), before the job is resolved (its checks read the tokenizer file).
 * Values that are not strings are left for the schema check to report.
 * @returns the job and warnings for paths found only from the working directory
 */
export function resolveJobPaths(job: Record<string, unknown>, jobDir: string, cwd: string = process.cwd()): { job: Record<string, unknown>; warnings: string[] } {
  const warnings: string[] = [];
  const input = (key: string, value: string): string => {
    if (BUILTIN.has(value) || value === "" || isAbsolute(value)) return value;
    const fromJob = resolve(jobDir, value);
    if (existsSync(fromJob)) return fromJob;
    // a bare word found nowhere is a name, not a path: the checks name it (did-you-mean)
    if (!/[./\\]/.test(value) && !existsSync(resolve(cwd, value))) return value;
    if (!existsSync(resolve(cwd, value))) return fromJob;
    const fromCwd = resolve(cwd, value);
    warnings.push(`${key}: ${JSON.stringify(value)} is not in the job file's folder ${jobDir}; read from the working directory (${fromCwd}) this time — relative paths in a job file are read from its folder: write ${JSON.stringify(relative(jobDir, fromCwd) || ".")} or an absolute path`);
    return fromCwd;
  };
  const out: Record<string, unknown> = { ...job };
  const data = out.data;
  if (data !== null && typeof data === "object" && !Array.isArray(data)) {
    const d: Record<string, unknown> = { ...(data as Record<string, unknown>) };
    if (typeof d.dataset === "string") d.dataset = input("data.dataset", d.dataset);
    if (typeof d.tokenizer === "string") d.tokenizer = input("data.tokenizer", d.tokenizer);
    if (typeof d.chat_template === "string") d.chat_template = input("data.chat_template", d.chat_template);
    out.data = d;
  }
  const moe = out.moe;
  if (moe !== null && typeof moe === "object" && !Array.isArray(moe)) {
    const m: Record<string, unknown> = { ...(moe as Record<string, unknown>) };
    if (typeof m.topology === "string") m.topology = input("moe.topology", m.topology);
    if (typeof m.routing_log === "string") m.routing_log = input("moe.routing_log", m.routing_log);
    out.moe = m;
  }
  const ck = out.checkpoint;
  if (ck !== null && typeof ck === "object" && !Array.isArray(ck)) {
    const c: Record<string, unknown> = { ...(ck as Record<string, unknown>) };
    if (typeof c.dir === "string" && c.dir !== "" && !isAbsolute(c.dir)) c.dir = join(jobDir, c.dir);
    out.checkpoint = c;
  }
  return { job: out, warnings };
}
