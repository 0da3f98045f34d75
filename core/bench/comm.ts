/**
 * Communication benchmark: all_reduce, reduce_scatter, all_gather and all_to_all_v bandwidth of the
 * `local` transport at 4 ranks (Bun Workers), 1 MB–256 MB, beside a single-thread memcpy
 * (`TypedArray.set`) of the same bytes in the same run.
 *
 * Run: `bun core/bench/comm.ts [--world-size N] [--sizes-mb 1,4,16,64,256] [--iters K] [--write]`
 * or `bun run bench comm …`. Prints a table; only with `--write` does it replace the "Communication"
 * section of docs/performance.md (`--no-write`, the old opt-out, is accepted and does nothing).
 *
 * `--transport local,mpi --world-size 2,4` measures each transport at each world size in one run
 * (the `mpi` transport: one process per rank under mpirun, core/src/comm/mpi/) and prints one
 * table with transport and rank columns; with `--write` that table replaces the section
 * "Communication: mpi transport beside local" instead.
 *
 * Figures, for an array of B bytes (the full array: the reduced array, the gathered output, the
 * scattered input, the whole send buffer) and time t per call (slowest rank):
 * - algbw = B / t.
 * - busbw (as nccl-tests define it) = algbw · 2(n−1)/n for all_reduce and algbw · (n−1)/n for the
 *   others: the ring bytes each rank moves per second, comparable across ops and with memcpy.
 * - memcpy = B / t of one `Float32Array.set` of B bytes on one thread (no other rank running).
 */

import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { resolve } from "node:path";
import { slotBytesFromEnv } from "../src/comm/local/memory.ts";
import { launch } from "../src/launch/launch.ts";
import { launchMpi } from "../src/launch/mpi-launch.ts";
import type { CommBenchArgs, CommBenchTimes } from "./comm-rank.ts";
import { runtimeLabel } from "@zeromoe/kernels/runtime";

/** One measured row. Bandwidths in GB/s (10⁹ bytes per second). */
export interface CommBenchRow {
  op: string;
  /** Transport measured: "local" or "mpi". */
  transport: string;
  bytes: number;
  worldSize: number;
  /** Seconds per call, slowest rank's mean. */
  seconds: number;
  algbw: number;
  busbw: number;
  /** Single-thread memcpy of the same bytes, GB/s. */
  memcpy: number;
}

const OPS = ["all_reduce", "reduce_scatter", "all_gather", "all_to_all_v"] as const;

/** Memcpy bandwidth (GB/s) of `bytes` bytes: best of `iters` `Float32Array.set` calls. */
export function memcpyGBs(bytes: number, iters: number): number {
  const src = new Float32Array(Math.floor(bytes / 4)).fill(1.25);
  const dst = new Float32Array(src.length);
  dst.set(src); // touch pages
  let best = Infinity;
  for (let k = 0; k < iters; k++) {
    const t0 = performance.now();
    dst.set(src);
    best = Math.min(best, (performance.now() - t0) / 1000);
  }
  return src.byteLength / best / 1e9;
}

/** Measured rows plus small-message latency (slowest rank's mean, microseconds). */
export interface CommBenchResult {
  rows: CommBenchRow[];
  latencyAllReduceUs: number;
  latencyBarrierUs: number;
}

/** Run the benchmark and return its rows. Sizes in MB (10⁶ bytes). */
export async function runCommBench(worldSize: number, sizesMB: number[], iters: number, transport: "local" | "mpi" = "local"): Promise<CommBenchResult> {
  const sizes = sizesMB.map((mb) => Math.round(mb * 1e6));
  const args: CommBenchArgs = { sizes, iters };
  const entry = new URL("./comm-rank.ts", import.meta.url);
  const times = transport === "mpi"
    ? await launchMpi<CommBenchTimes>({ worldSize, entry, args, timeoutS: 600, echo: true })
    : await launch<CommBenchTimes>({ worldSize, entry, args, timeoutS: 600 });
  const rows: CommBenchRow[] = [];
  for (const bytes of sizes) {
    const mem = memcpyGBs(bytes, Math.max(3, iters));
    const len = Math.floor(bytes / 4 / worldSize) * worldSize;
    const B = len * 4;
    for (const op of OPS) {
      const t = Math.max(...times.map((r) => r[`${op}:${bytes}`]));
      const algbw = B / t / 1e9;
      const factor = op === "all_reduce" ? (2 * (worldSize - 1)) / worldSize : (worldSize - 1) / worldSize;
      rows.push({ op, transport, bytes: B, worldSize, seconds: t, algbw, busbw: algbw * factor, memcpy: mem });
    }
  }
  const lat = (k: string): number => Math.max(...times.map((r) => r[k])) * 1e6;
  return { rows, latencyAllReduceUs: lat("latency_all_reduce"), latencyBarrierUs: lat("latency_barrier") };
}

/** Markdown table of rows of several transports / world sizes, with those as columns. */
export function formatRowsByTransport(rows: CommBenchRow[]): string {
  const lines = [
    "| transport | ranks | op | size | time/call | algbw GB/s | busbw GB/s | memcpy GB/s (same bytes) | busbw / memcpy |",
    "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
  ];
  for (const r of rows) {
    lines.push(
      `| ${r.transport} | ${r.worldSize} | ${r.op} | ${(r.bytes / 1e6).toFixed(1)} MB | ${(r.seconds * 1000).toFixed(2)} ms | ${r.algbw.toFixed(2)} | ${r.busbw.toFixed(2)} | ${r.memcpy.toFixed(2)} | ${(r.busbw / r.memcpy).toFixed(3)} |`,
    );
  }
  return lines.join("\n");
}

/** Markdown table of the rows. */
export function formatRows(rows: CommBenchRow[]): string {
  const lines = [
    "| op | size | time/call | algbw GB/s | busbw GB/s | memcpy GB/s (same bytes) |",
    "| --- | ---: | ---: | ---: | ---: | ---: |",
  ];
  for (const r of rows) {
    lines.push(
      `| ${r.op} | ${(r.bytes / 1e6).toFixed(1)} MB | ${(r.seconds * 1000).toFixed(2)} ms | ${r.algbw.toFixed(2)} | ${r.busbw.toFixed(2)} | ${r.memcpy.toFixed(2)} |`,
    );
  }
  return lines.join("\n");
}

/** Replace (or append) the `## Communication` section of docs/performance.md, leaving others intact. */
export function writeSection(file: string, body: string, heading = "## Communication"): void {
  const text = existsSync(file) ? readFileSync(file, "utf8") : "# Performance\n";
  const start = text.indexOf(`${heading}\n`);
  let next: string;
  if (start < 0) {
    next = `${text.trimEnd()}\n\n${heading}\n\n${body.trim()}\n`;
  } else {
    const after = text.indexOf("\n## ", start + heading.length);
    const tail = after < 0 ? "" : text.slice(after + 1);
    next = `${text.slice(0, start)}${heading}\n\n${body.trim()}\n${tail ? `\n${tail}` : ""}`;
  }
  writeFileSync(file, next);
}

/**
 * Parses `bun run bench comm` arguments. `write` is true only with `--write` (docs/performance.md is
 * tracked: a plain run must not rewrite it); `--no-write` is accepted as a no-op for old command lines.
 * Throws an Error naming the argument on an unknown one.
 */
export function parseCommBenchArgs(argv: string[]): { worldSize: number; worldSizes: number[]; transports: ("local" | "mpi")[]; sizesMB: number[]; iters: number; write: boolean } {
  let worldSizes = [4];
  let transports: ("local" | "mpi")[] = ["local"];
  let sizesMB = [1, 4, 16, 64, 256];
  let iters = 3;
  let write = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--world-size") worldSizes = (argv[++i] ?? "").split(",").map(Number);
    else if (a === "--transport") {
      const t = (argv[++i] ?? "").split(",");
      for (const x of t) if (x !== "local" && x !== "mpi") throw new Error(`bench comm: --transport takes local, mpi or local,mpi; got ${JSON.stringify(argv[i])}`);
      transports = t as ("local" | "mpi")[];
    }
    else if (a === "--sizes-mb") sizesMB = (argv[++i] ?? "").split(",").map(Number);
    else if (a === "--iters") iters = Number(argv[++i]);
    else if (a === "--write") write = true;
    else if (a === "--no-write") write = false;
    else throw new Error(`bench comm: unknown argument ${a}; usage: [--transport local|mpi|local,mpi] [--world-size N[,M…]] [--sizes-mb 1,4,16] [--iters K] [--write]`);
  }
  return { worldSize: worldSizes[0]!, worldSizes, transports, sizesMB, iters, write };
}

/** `bun run bench comm` entry: parses args, runs, prints, and with `--write` replaces the Communication section of docs/performance.md. */
export async function main(argv: string[]): Promise<void> {
  const { worldSize, worldSizes, transports, sizesMB, iters, write } = parseCommBenchArgs(argv);
  if (worldSizes.some((w) => !Number.isInteger(w) || w < 1)) throw new Error(`bench comm: --world-size must be positive integers`);
  if (sizesMB.some((s) => !(s > 0))) throw new Error(`bench comm: --sizes-mb must be positive numbers`);
  if (worldSizes.length > 1 || transports.join() !== "local") {
    await mainByTransport(worldSizes, transports, sizesMB, iters, write);
    return;
  }
  const t0 = Date.now();
  const loadBefore = loadavg()[0];
  const res = await runCommBench(worldSize, sizesMB, iters);
  const table = formatRows(res.rows);
  const latency = `Latency (mean of 1000 calls, slowest rank): all_reduce of one f32 ${res.latencyAllReduceUs.toFixed(0)} µs, barrier ${res.latencyBarrierUs.toFixed(0)} µs.`;
  console.log(table);
  console.log(latency);
  if (write) {
    const cores = navigator.hardwareConcurrency;
    const body = [
      `Measured ${new Date().toISOString().slice(0, 10)} with \`bun core/bench/comm.ts --world-size ${worldSize} --sizes-mb ${sizesMB.join(",")} --iters ${iters} --write\``,
      `(${runtimeLabel()}, ${cores} CPU cores, transport \`local\`: ${worldSize} ranks as worker threads, ${(slotBytesFromEnv(worldSize) / 1048576).toFixed(0)} MiB arena slot per rank; run took ${((Date.now() - t0) / 1000).toFixed(0)} s;`,
      `1-minute load average ${loadBefore.toFixed(1)} before and ${loadavg()[0].toFixed(1)} after the run: above ${worldSize}, other jobs were sharing the cores).`,
      "algbw = array bytes / time; busbw = algbw·2(n−1)/n for all_reduce, algbw·(n−1)/n for the others (nccl-tests' definition);",
      "memcpy = one-thread `Float32Array.set` of the same bytes in the same run (best of ≥3). Data are Float32Array; all_to_all_v uses even counts;",
      "time/call = the slowest rank's mean over max(iters, 64 MB / size, at most 100) calls after one warm-up call.",
      "",
      table,
      "",
      latency,
      "",
      "Reading: every byte passes through the ranks' 16 MiB shared-memory slots (one copy in, one copy out) and reductions run",
      "as JavaScript loops on the ranks' own threads (about 1 ns per element and source here), with more ranks than cores;",
      "all_reduce and reduce_scatter are therefore far below memcpy. Timings on a shared 2-core machine vary by 2x between runs.",
    ].join("\n");
    const file = resolve(import.meta.dirname, "..", "..", "docs", "performance.md");
    writeSection(file, body);
    console.log(`wrote the Communication section of ${file}`);
  }
}

/** Several transports and/or world sizes in one run (see the file comment). */
async function mainByTransport(worldSizes: number[], transports: ("local" | "mpi")[], sizesMB: number[], iters: number, write: boolean): Promise<void> {
  const t0 = Date.now();
  const loadBefore = loadavg()[0];
  const rows: CommBenchRow[] = [];
  const lat: string[] = [];
  for (const w of worldSizes) {
    for (const t of transports) {
      const res = await runCommBench(w, sizesMB, iters, t);
      rows.push(...res.rows);
      lat.push(`${t} ${w} ranks: all_reduce of one f32 ${res.latencyAllReduceUs.toFixed(0)} µs, barrier ${res.latencyBarrierUs.toFixed(0)} µs`);
      console.log(formatRowsByTransport(res.rows));
    }
  }
  const table = formatRowsByTransport(rows);
  const latency = `Latency (mean of 1000 calls, slowest rank): ${lat.join("; ")}.`;
  console.log(latency);
  if (!write) return;
  const body = [
    `Measured ${new Date().toISOString().slice(0, 10)} with \`bun run bench comm --transport ${transports.join(",")} --world-size ${worldSizes.join(",")} --sizes-mb ${sizesMB.join(",")} --iters ${iters} --write\``,
    `(${runtimeLabel()}, ${navigator.hardwareConcurrency} CPU cores; run took ${((Date.now() - t0) / 1000).toFixed(0)} s; 1-minute load average ${loadBefore.toFixed(1)} before and ${loadavg()[0].toFixed(1)} after:`,
    "other jobs were sharing the cores). `local`: ranks are Bun Workers of one process; `mpi`: one process per rank under Open MPI's mpirun",
    "(shared-memory BTL on one host), collectives through bun:ffi, reductions in JavaScript in fixed rank order (docs/comm.md). Columns as above.",
    "",
    table,
    "",
    latency,
  ].join("\n");
  const file = resolve(import.meta.dirname, "..", "..", "docs", "performance.md");
  writeSection(file, body, "## Communication: mpi transport beside local");
  console.log(`wrote the "Communication: mpi transport beside local" section of ${file}`);
}

if (import.meta.main) await main(process.argv.slice(2));
