/**
 * `bun run bench memory-estimate [--backend webgpu|cpu] [--max-binding BYTES] [--moments] JOB.json…`:
 * the pre-run memory estimate of each job file as a rank computes it before allocating anything
 * (core/src/train/memory-estimate.ts model states with the job's plugins, core/src/train/memory-peak.ts
 * peak), without a device: model states by kind, the estimated `peak_total` and its moment, the
 * allocator overhead and the device bytes. `--backend` picks the allocator overhead (default webgpu,
 * 10 %); `--max-binding` the largest storage binding the fused head's tile plan is capped by
 * (default 2147483644, the H200's); `--moments` lists every moment of the walk.
 *
 * Example (docs/performance.md "Memory at real shapes"):
 *   bun run bench memory-estimate examples/h200/llama3-bytes.json examples/h200/qwen3-bytes.json examples/h200/mixtral-bytes.json
 */
import { loadJobConfig } from "../src/config/load.ts";
import { loadJobPlugins } from "../src/train/job-plugins.ts";
import { estimateModelState } from "../src/train/memory-estimate.ts";
import { estimatePeak } from "../src/train/memory-peak.ts";

/** Usage text (`bench memory-estimate --help`). */
export const USAGE = "usage: bun run bench memory-estimate [--backend webgpu|cpu] [--max-binding BYTES] [--moments] JOB.json…";

/** Bytes as e9 with two decimals. */
function e9(bytes: number): string {
  return `${(bytes / 1e9).toFixed(2)}e9`;
}

/** Prints the estimate of every job file in `args` (see the module comment).
 * @throws Error naming the flag for a bad --backend / --max-binding, or when no job is given;
 *   the config loader's ConfigError for a bad job file. */
export async function main(args: string[]): Promise<void> {
  let backend: "webgpu" | "cpu" = "webgpu";
  let maxBinding = 2147483644;
  let moments = false;
  const jobs: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === "--backend") {
      const v = args[++i];
      if (v !== "webgpu" && v !== "cpu") throw new Error(`memory-estimate: --backend must be webgpu or cpu, got ${v ?? "nothing"}`);
      backend = v;
    } else if (a === "--max-binding") {
      const v = Number(args[++i]);
      if (!Number.isInteger(v) || v <= 0) throw new Error(`memory-estimate: --max-binding must be a positive byte count, got ${args[i] ?? "nothing"}`);
      maxBinding = v;
    } else if (a === "--moments") moments = true;
    else jobs.push(a);
  }
  if (jobs.length === 0) throw new Error(`memory-estimate: no job file given. ${USAGE}`);
  for (const file of jobs) {
    const { config } = await loadJobConfig({ configPath: file });
    const ms = estimateModelState(config, (await loadJobPlugins(config)).plugins);
    const p = estimatePeak(config, ms, backend, maxBinding);
    console.log(`${file}: model states ${e9(ms.total)} (param ${e9(ms.params)}, grad ${e9(ms.grads)}, optim ${e9(ms.optim)}); peak_total ${e9(p.peak.bytes)} at ${p.peak.name}; + allocator overhead ${e9(p.allocatorOverhead)} = ${e9(p.deviceBytes)} on the device (${p.tokens} tokens per micro-batch, ${backend})`);
    if (moments) for (const m of p.moments) console.log(`  ${m.name.padEnd(28)} ${e9(m.bytes)}`);
  }
}

if (import.meta.main) {
  main(process.argv.slice(2)).catch((e: Error) => {
    console.error(e.message);
    process.exit(2);
  });
}
