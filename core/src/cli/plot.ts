/**
 * `bun run plot <summary.json> [--out DIR]`: render the plots of a training summary (written by
 * `bun run train --summary`) as SVG and PNG files (core/src/observe/plots.ts says which).
 * DIR defaults to `<summary without .json>-plots` beside the summary. Exit 2 with a message (no
 * stack) for a missing or malformed summary or bad arguments.
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { parseArgs } from "node:util";
import { writePlots } from "../observe/plots.ts";
import { checkSummary, type TrainSummary } from "../train/summary.ts";

/** Largest summary file read, bytes (one string: Bun's strings end at 2^31 − 1 characters). */
export const MAX_SUMMARY_BYTES = 2 ** 31 - 1;

/** Usage of `bun run plot`. */
export const PLOT_USAGE = `usage: bun run plot <summary.json> [--out DIR]

  --out <dir>   folder for the plots (default: <summary>-plots beside the summary)
  -h, --help    show this help`;

/** Run the plot command with `argv` (without the program name); returns the exit status. */
export async function main(argv: string[]): Promise<number> {
  let values: { out?: string; help?: boolean };
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({ args: argv, options: { out: { type: "string" }, help: { type: "boolean", short: "h" } }, allowPositionals: true, strict: true }));
  } catch (e) {
    console.error(`${(e as Error).message}\n\n${PLOT_USAGE}`);
    return 2;
  }
  if (values.help) {
    console.log(PLOT_USAGE);
    return 0;
  }
  if (positionals.length !== 1) {
    console.error(`expected one summary file, got ${positionals.length}\n\n${PLOT_USAGE}`);
    return 2;
  }
  const file = positionals[0]!;
  if (!existsSync(file)) {
    console.error(`${file}: no such file (expected a summary written by bun run train --summary)`);
    return 2;
  }
  // before reading: a FIFO blocks until a writer comes, a directory fails with EISDIR, and a file
  // over Bun's longest string cannot be read into one
  const st = statSync(file);
  if (!st.isFile()) {
    console.error(`${file}: not a regular file (${st.isDirectory() ? "a directory" : st.isFIFO() ? "a FIFO" : "a device or socket"}); expected a summary written by bun run train --summary`);
    return 2;
  }
  if (st.size > MAX_SUMMARY_BYTES) {
    console.error(`${file}: ${st.size} bytes is over the ${MAX_SUMMARY_BYTES}-byte limit of a summary`);
    return 2;
  }
  let summary: TrainSummary;
  try {
    summary = JSON.parse(readFileSync(file, "utf8")) as TrainSummary;
  } catch (e) {
    console.error(`${file}: not JSON: ${(e as Error).message}`);
    return 2;
  }
  const problems = checkSummary(summary);
  if (problems.length > 0) {
    console.error(`${file}: not a training summary:\n  ${problems.slice(0, 10).join("\n  ")}`);
    return 2;
  }
  const out = values.out ?? file.replace(/\.json$/i, "") + "-plots";
  try {
    const files = await writePlots(summary, out);
    for (const f of files) console.log(f);
  } catch (e) {
    console.error((e as Error).message);
    return 2;
  }
  return 0;
}

if (import.meta.main) process.exitCode = await main(process.argv.slice(2));
