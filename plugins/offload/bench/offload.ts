/**
 * Offload benchmark (`bun run bench offload [--elements N] [--reps R] [--steps K] [--write]`):
 *
 * 1. host AdamW throughput over N fp32 elements, in bytes of optimizer state (master, m, v: 12 B per
 *    element) per second, at 1…T threads (src/adamw-pool.ts), beside memcpy of the same 12·N bytes
 *    (TypedArray.set) and `torch.optim.AdamW(foreach=True)` on the CPU in the same run
 *    (bench/torch_adamw.py; skipped, and said so, when Python has no torch);
 * 2. NVMe offload I/O: writing and reading N elements' states through the offload's files and aio
 *    engine (src/nvme-state.ts, default `aio` settings) beside raw sequential writeSync/readSync of the
 *    same bytes to a file in the same directory (`--dir`, default the OS temp dir);
 * 3. step time of the default job's model (core's DEFAULT_JOB, world 1, ZeRO-1) without offload, with
 *    offload_optimizer cpu and nvme (gradients copied to the host as each unit's reduction completes
 *    in backward, src/grad-copy.ts), and cpu/nvme with the copy at the optimizer step instead
 *    (`overlapGradCopy: false`): mean seconds per step, first step excluded.
 * Best of R repetitions for 1 and 2. With `--write` the "Offload" section of docs/performance.md is
 * replaced by the tables.
 */
import { execFileSync } from "node:child_process";
import { closeSync, existsSync, fsyncSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, statSync, writeFileSync, writeSync } from "node:fs";
import { availableParallelism, cpus, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Engine, pluginsForJob, type TrainMicroBatch } from "@zeromoe/core";
import { DEFAULT_JOB, resolveJobConfig } from "@zeromoe/core/config";
import { createSoloCommunicator, microBatch } from "@zeromoe/core/testing";
import { CpuBackend, type AdamWParams } from "@zeromoe/kernels";
import { HostAdamWPool } from "../src/adamw-pool.ts";
import { Aio } from "../src/aio.ts";
import { HostLedger } from "../src/host-ledger.ts";
import { createOffloadPlugin } from "../src/index.ts";
import { NvmeOptimizerState } from "../src/nvme-state.ts";
import { runtimeLabel } from "@zeromoe/kernels/runtime";

const GB = 1e9;

/** The benchmark's options (see the module comment). */
export interface OffloadBenchArgs {
  elements: number;
  reps: number;
  steps: number;
  dir: string;
  write: boolean;
}

/**
 * Parse `--elements N` (≥ 1), `--reps R` (≥ 1), `--steps K` (≥ 2: the first step is excluded from
 * the mean), `--dir D` and `--write`.
 * @returns the options, or a message naming the option and what it expects (the bench then exits 2;
 *   before, `--reps 0` printed Infinity, `--steps 1` a 0 s step and `--elements abc` NaN-sized files,
 *   which `--write` would have put in docs/performance.md)
 */
export function parseOffloadBenchArgs(args: readonly string[]): OffloadBenchArgs | string {
  const known = new Set(["--elements", "--reps", "--steps", "--dir", "--write"]);
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (!known.has(a)) return `bench offload: unknown argument "${a}" (expected --elements N, --reps R, --steps K, --dir D, --write)`;
    if (a !== "--write") i++;
  }
  const int = (name: string, def: number, min: number): number | string => {
    const i = args.indexOf(name);
    if (i < 0) return def;
    const raw = args[i + 1];
    const v = raw === undefined || raw.trim() === "" ? Number.NaN : Number(raw);
    if (!Number.isSafeInteger(v) || v < min) return `bench offload: ${name} expects an integer ≥ ${min}, got ${raw === undefined ? "nothing" : JSON.stringify(raw)}`;
    return v;
  };
  const elements = int("--elements", 4_000_000, 1);
  const reps = int("--reps", 3, 1);
  const steps = int("--steps", 6, 2);
  for (const v of [elements, reps, steps]) if (typeof v === "string") return v;
  const di = args.indexOf("--dir");
  let dir = tmpdir();
  if (di >= 0) {
    const d = args[di + 1];
    if (d === undefined || d === "") return "bench offload: --dir expects a directory, got nothing";
    if (!existsSync(d) || !statSync(d).isDirectory()) return `bench offload: --dir ${JSON.stringify(d)} is not an existing directory`;
    dir = d;
  }
  return { elements: elements as number, reps: reps as number, steps: steps as number, dir, write: args.includes("--write") };
}

function best(reps: number, f: () => void): number {
  let b = Infinity;
  for (let r = 0; r < reps; r++) {
    const t0 = performance.now();
    f();
    b = Math.min(b, (performance.now() - t0) / 1000);
  }
  return b;
}

async function bestAsync(reps: number, f: () => Promise<void>): Promise<number> {
  let b = Infinity;
  for (let r = 0; r < reps; r++) {
    const t0 = performance.now();
    await f();
    b = Math.min(b, (performance.now() - t0) / 1000);
  }
  return b;
}

function shared(n: number, f: (i: number) => number): Float32Array {
  const a = new Float32Array(new SharedArrayBuffer(n * 4));
  for (let i = 0; i < n; i++) a[i] = f(i);
  return a;
}

/** Section 1: rows [label, seconds, GB/s of state]. */
async function adamwRows(n: number, reps: number): Promise<string[][]> {
  const rows: string[][] = [];
  const state = 12 * n;
  const hp: AdamWParams = { lr: 1e-3, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, decoupled: true, step: 1, gradScale: 1 };
  const master = shared(n, (i) => Math.sin(i));
  const m = shared(n, () => 0);
  const v = shared(n, () => 0);
  const g = shared(n, (i) => Math.cos(i));
  const maxT = Math.max(1, availableParallelism());
  for (let t = 1; t <= maxT; t *= 2) {
    const pool = new HostAdamWPool({ threads: t });
    await pool.step(master, g, "f32", m, v, null, "bf16", n, hp); // warm-up (worker start, JIT)
    const s = await bestAsync(reps, () => pool.step(master, g, "f32", m, v, null, "bf16", n, { ...hp, step: 2 }));
    pool.close();
    rows.push([`host AdamW, ${t} thread${t === 1 ? "" : "s"}`, s.toFixed(4), (state / s / GB).toFixed(2)]);
  }
  const src = new Uint8Array(state).fill(3);
  const dst = new Uint8Array(state);
  const s = best(reps, () => dst.set(src));
  rows.push([`memcpy of the same ${(state / 1e6).toFixed(0)} MB (TypedArray.set)`, s.toFixed(4), (state / s / GB).toFixed(2)]);
  const py = resolve(import.meta.dirname, "torch_adamw.py");
  try {
    const out = execFileSync("python3", [py, String(n), String(reps), String(maxT)], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    const r = JSON.parse(out.trim().split("\n").pop()!) as { seconds: number; torch: string; threads: number };
    rows.push([`torch.optim.AdamW(foreach=True) ${r.torch}, ${r.threads} threads`, r.seconds.toFixed(4), (state / r.seconds / GB).toFixed(2)]);
  } catch (e) {
    const msg = String((e as { stderr?: string }).stderr ?? e).includes("No module named 'torch'") ? "not measured: Python on this machine has no torch" : `not measured: ${String((e as Error).message).split("\n")[0]}`;
    rows.push(["torch.optim.AdamW(foreach=True)", "—", msg]);
  }
  return rows;
}

/** Section 2: rows [label, write GB/s, read GB/s]. */
async function nvmeRows(n: number, reps: number, dir: string): Promise<string[][]> {
  const d = mkdtempSync(join(dir, "offload-bench-"));
  try {
    const ledger = new HostLedger();
    const aio = new Aio({ block_size: 1048576, queue_depth: 8, thread_count: 1, single_submit: false, overlap_events: true });
    const st = new NvmeOptimizerState(join(d, "unit.optim"), n, aio, ledger, true);
    const views = { master: shared(n, (i) => i), m: shared(n, (i) => -i), v: shared(n, (i) => i / 2) };
    const bytes = 12 * n;
    await st.writeAll(views);
    const w = await bestAsync(reps, () => st.writeAll(views));
    const r = await bestAsync(reps, () => st.readAll(views));
    st.free();
    const raw = join(d, "raw.bin");
    const buf = new Uint8Array(bytes).fill(5);
    const fd = openSync(raw, "w+");
    writeSync(fd, buf, 0, bytes, 0);
    const rw = best(reps, () => void writeSync(fd, buf, 0, bytes, 0));
    const rr = best(reps, () => void readSync(fd, buf, 0, bytes, 0));
    fsyncSync(fd);
    closeSync(fd);
    return [
      [`offload files + aio (block 1 MiB, queue 8, coalesced)`, (bytes / w / GB).toFixed(2), (bytes / r / GB).toFixed(2)],
      [`raw writeSync/readSync of ${(bytes / 1e6).toFixed(0)} MB`, (bytes / rw / GB).toFixed(2), (bytes / rr / GB).toFixed(2)],
    ];
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
}

/** Section 3: rows [label, s/step, final loss]. */
async function stepRows(steps: number, dir: string): Promise<string[][]> {
  const rows: string[][] = [];
  const nvme = mkdtempSync(join(dir, "offload-bench-step-"));
  try {
    const variants = [
      ["no offload", { device: "none" }, true],
      ["offload_optimizer cpu (gradient copy overlapped with backward)", { device: "cpu" }, true],
      ["offload_optimizer cpu (gradient copy at the optimizer step)", { device: "cpu" }, false],
      ["offload_optimizer nvme (gradient copy overlapped with backward)", { device: "nvme", nvme_path: nvme }, true],
      ["offload_optimizer nvme (gradient copy at the optimizer step)", { device: "nvme", nvme_path: nvme }, false],
    ] as const;
    for (const [label, oo, overlap] of variants) {
      const { config } = resolveJobConfig({ ...DEFAULT_JOB, backend: "cpu", world_size: 1, zero_optimization: { stage: 1, offload_optimizer: oo } });
      const be = new CpuBackend();
      const plugins = (await pluginsForJob(config)).map((p) => (p.name === "offload" ? createOffloadPlugin({ overlapGradCopy: overlap }) : p));
      const engine = await Engine.create({ config, comm: createSoloCommunicator(), backend: be, plugins, log: () => {} });
      const micro = config.train_micro_batch_size_per_gpu;
      let t = 0;
      let loss = 0;
      for (let s = 0; s < steps; s++) {
        const mbs: TrainMicroBatch[] = [];
        for (let a = 0; a < config.gradient_accumulation_steps; a++) mbs.push(microBatch(s, a, micro, config.data.seq_len, config.model.vocab_size));
        const t0 = performance.now();
        loss = (await engine.trainBatch(mbs)).loss;
        if (s > 0) t += (performance.now() - t0) / 1000;
      }
      const optim = be.memory().current.optim ?? 0;
      engine.destroy();
      rows.push([label, (t / Math.max(1, steps - 1)).toFixed(4), loss.toFixed(4), String(optim)]);
    }
  } finally {
    rmSync(nvme, { recursive: true, force: true });
  }
  return rows;
}

function table(head: string[], rows: string[][]): string {
  return [`| ${head.join(" | ")} |`, `| ${head.map(() => "---").join(" | ")} |`, ...rows.map((r) => `| ${r.join(" | ")} |`)].join("\n");
}

/** Run the benchmark (see the module comment). */
export async function main(args: string[]): Promise<void> {
  const parsed = parseOffloadBenchArgs(args);
  if (typeof parsed === "string") {
    console.error(parsed);
    process.exit(2);
  }
  const { elements: n, reps, steps, dir } = parsed;
  const host = `${cpus()[0]?.model ?? "cpu"}, ${availableParallelism()} cores available`;
  const a = await adamwRows(n, reps);
  const io = await nvmeRows(n, reps, dir);
  const st = await stepRows(steps, dir);
  const text = [
    `Measured with \`bun run bench offload --elements ${n} --reps ${reps} --steps ${steps}\` on ${host} (${runtimeLabel()}); best of ${reps}.`,
    "",
    `Host AdamW over ${n} fp32 elements (GB/s = 12 bytes of optimizer state per element per second):`,
    "",
    table(["what", "seconds", "GB/s"], a),
    "",
    `Optimizer-state files (${(12 * n / 1e6).toFixed(0)} MB) under ${dir}:`,
    "",
    table(["what", "write GB/s", "read GB/s"], io),
    "",
    `Step time of the default job's model (world 1, ZeRO-1, cpu backend, ${steps} steps, first excluded):`,
    "",
    table(["run", "s/step", "final loss", "device optim bytes"], st),
  ].join("\n");
  console.log(text);
  if (parsed.write) {
    const doc = resolve(import.meta.dirname, "../../../docs/performance.md");
    const cur = existsSync(doc) ? readFileSync(doc, "utf8") : "# Performance\n";
    const begin = "<!-- offload-bench:begin -->";
    const end = "<!-- offload-bench:end -->";
    const block = `${begin}\n${text}\n${end}`;
    const next = cur.includes(begin) ? cur.replace(new RegExp(`${begin}[\\s\\S]*?${end}`), block) : `${cur.trimEnd()}\n\n## Offload\n\n${block}\n`;
    writeFileSync(doc, next);
    console.log(`wrote ${doc}`);
  }
}

if (import.meta.main) await main(process.argv.slice(2));
