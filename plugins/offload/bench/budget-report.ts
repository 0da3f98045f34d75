/**
 * The table of the device-budget runs of examples/h200/offload-mixtral-med.sh (run by it; also
 * `bun plugins/offload/bench/budget-report.ts <out-dir>`): for (a) the job unbudgeted without
 * offload, (b) the same under `--max-device-memory` (which must exit 2 at the memory check, naming
 * offload and the estimated bytes) and (c) the same budget with ZeRO-3 + offload_param +
 * offload_optimizer, from `<out-dir>/{a,b,c}.rc`, `{a,b,c}.log` and the `--summary` files
 * `{a,c}.json`: exit code, mean step time (steps after the first), device memory per tag after the
 * last step and peak total, host bytes per tag and bytes moved per step (the summary's `offload`
 * section). Prints Markdown.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

interface Summary {
  steps: number;
  start_step: number;
  final_loss: number;
  backend?: { name: string; adapter: string };
  memory: { per_rank: Record<string, number>[] };
  history: { step: number; step_ms: number }[];
  offload?: { host_bytes: Record<string, number>; host_peak_bytes: number; moved_bytes: Record<string, number>; grad_copy?: string; units_offloaded: number };
}

const MiB = 2 ** 20;
const mib = (b: number | undefined) => (b === undefined ? "—" : (b / MiB).toFixed(1));

function read(dir: string, name: string): { rc: string; log: string; sum: Summary | null } {
  const f = (ext: string) => join(dir, `${name}.${ext}`);
  const rc = existsSync(f("rc")) ? readFileSync(f("rc"), "utf8").trim() : "?";
  const log = existsSync(f("log")) ? readFileSync(f("log"), "utf8") : "";
  const sum = existsSync(f("json")) ? (JSON.parse(readFileSync(f("json"), "utf8")) as Summary) : null;
  return { rc, log, sum };
}

/** Mean ms of the steps after the first (the first compiles pipelines). */
function meanStepMs(s: Summary): number {
  const h = s.history.filter((x) => x.step > s.start_step + 1);
  const use = h.length > 0 ? h : s.history;
  return use.reduce((a, x) => a + x.step_ms, 0) / Math.max(1, use.length);
}

/** The report of `dir` (see the module comment). */
export function budgetReport(dir: string): string {
  const runs = { a: read(dir, "a"), b: read(dir, "b"), c: read(dir, "c") };
  const label = { a: "(a) unbudgeted, no offload", b: "(b) budget, no offload", c: "(c) budget, ZeRO-3 + offload_param + offload_optimizer cpu" };
  const tags = ["params", "grads", "optim", "gathered", "activation", "comm", "other"];
  const lines = [
    `| run | exit | s/step | final loss | device MiB after the last step (${tags.join(" / ")}) | device peak MiB | host MiB (optim / param / grad / comm), peak | moved MiB per step (grad d2h / param h2d) |`,
    "| --- | ---: | ---: | ---: | --- | ---: | --- | --- |",
  ];
  for (const k of ["a", "b", "c"] as const) {
    const { rc, sum } = runs[k];
    if (!sum) {
      lines.push(`| ${label[k]} | ${rc} | — | — | — | — | — | — |`);
      continue;
    }
    const m = sum.memory.per_rank[0] ?? {};
    const o = sum.offload;
    const steps = Math.max(1, sum.steps - sum.start_step);
    const host = o ? `${["optim", "param", "grad", "comm"].map((t) => mib(o.host_bytes[t] ?? 0)).join(" / ")}, peak ${mib(o.host_peak_bytes)}` : "—";
    const moved = o ? `${mib(o.moved_bytes.grad_d2h / steps)} / ${mib(o.moved_bytes.param_h2d / steps)}` : "—";
    lines.push(`| ${label[k]} | ${rc} | ${(meanStepMs(sum) / 1000).toFixed(3)} | ${sum.final_loss.toFixed(4)} | ${tags.map((t) => mib(m[t])).join(" / ")} | ${mib(m.peak_total)} | ${host} | ${moved} |`);
  }
  const refusal = runs.b.log.split("\n").filter((l) => l.includes("max_device_memory")).join("\n");
  const adapter = runs.a.sum?.backend?.adapter ?? runs.c.sum?.backend?.adapter ?? "?";
  return [`Backend adapter: ${adapter}`, "", ...lines, "", "(b)'s refusal:", "", "```", refusal || "(no max_device_memory line in b.log)", "```"].join("\n");
}

if (import.meta.main) {
  const dir = process.argv[2];
  if (!dir) {
    console.error("usage: bun plugins/offload/bench/budget-report.ts <out-dir>");
    process.exit(2);
  }
  console.log(budgetReport(dir));
}
