/**
 * Bun beside Deno on one training job (README "Bun or Deno"): `bun run bench runtimes [train
 * options…]` trains the same job with `bun core/src/cli/train.ts` and with `deno task train`
 * (deno.json), one after the other, and prints per runtime the mean step time over the logged
 * steps after the first logged one (summary history `step_ms`, milliseconds), tokens per second, and
 * whether the two runs' losses are bit-identical. Train options pass through unchanged (default
 * `--steps 30`; e.g. `--backend webgpu --config examples/moe-zero3-ep2.json`); `--summary` is set
 * by the bench. Deno is node_modules/deno/deno (the pinned devDependency), Bun is `bun` on PATH.
 * Exit 1 when either run fails or the losses differ.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { RUNTIME, spawn, which } from "@zeromoe/kernels/runtime";

/** Usage (bun run bench runtimes --help). */
export const USAGE = `usage: bun run bench runtimes [train options…]   (or deno task bench runtimes …)
Trains the job on Bun and on Deno and prints the step time of each side by side, and whether the
losses are bit-identical. Train options pass through (default --steps 30); --summary is the bench's.`;

const ROOT = resolve(import.meta.dirname, "..", "..");

interface Summary {
  losses: number[];
  tokens_per_second: number;
  history: { step: number; step_ms?: number }[];
}

interface Side {
  name: string;
  summary: Summary;
  meanStepMs: number;
}

async function train(name: string, argv: string[], summaryFile: string): Promise<Side> {
  const p = spawn([...argv, "--summary", summaryFile], { cwd: ROOT, stdio: ["ignore", "inherit", "inherit"] });
  const code = await p.exited;
  if (code !== 0) throw new Error(`bench runtimes: the ${name} run exited with ${code}`);
  const summary = JSON.parse(readFileSync(summaryFile, "utf8")) as Summary;
  const steps = summary.history.slice(1).map((h) => h.step_ms).filter((x): x is number => typeof x === "number");
  const all = summary.history.map((h) => h.step_ms).filter((x): x is number => typeof x === "number");
  const use = steps.length > 0 ? steps : all;
  return { name, summary, meanStepMs: use.reduce((a, b) => a + b, 0) / Math.max(1, use.length) };
}

/** Entry of `bun run bench runtimes`. @throws when bun or deno is missing, or a run fails. */
export async function main(args: string[]): Promise<void> {
  if (args.includes("--help") || args.includes("-h")) {
    console.log(USAGE);
    return;
  }
  if (args.includes("--summary")) throw new Error("bench runtimes: --summary is set by the bench (one per runtime); leave it out");
  const trainArgs = args.includes("--steps") ? args : ["--steps", "30", ...args];
  const bun = RUNTIME === "bun" ? process.execPath : which("bun");
  if (bun === null) throw new Error("bench runtimes: bun is not on PATH");
  const deno = RUNTIME === "deno" ? process.execPath : join(ROOT, "node_modules", "deno", "deno");
  if (!existsSync(deno)) throw new Error(`bench runtimes: ${deno} is missing (run bun install)`);
  const dir = mkdtempSync(join(tmpdir(), "zeromoe-bench-runtimes-"));
  try {
    const train_ts = join(ROOT, "core", "src", "cli", "train.ts");
    const b = await train("Bun", [bun, train_ts, ...trainArgs], join(dir, "bun.json"));
    const d = await train("Deno", [deno, "task", "train", ...trainArgs], join(dir, "deno.json"));
    const same = b.summary.losses.length === d.summary.losses.length && b.summary.losses.every((l, i) => Object.is(l, d.summary.losses[i]));
    console.log(`\nbench runtimes: train ${trainArgs.join(" ")}`);
    console.log("runtime  mean step ms  tokens/s  final loss");
    for (const s of [b, d]) console.log(`${s.name.padEnd(8)} ${s.meanStepMs.toFixed(1).padStart(12)}  ${s.summary.tokens_per_second.toFixed(0).padStart(8)}  ${s.summary.losses.at(-1)}`);
    console.log(`Deno / Bun step time: ${(d.meanStepMs / b.meanStepMs).toFixed(2)}×; losses ${same ? "bit-identical" : "DIFFER"} over ${b.summary.losses.length} steps`);
    if (!same) process.exitCode = 1;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

