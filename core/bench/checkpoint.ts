/**
 * `bun run bench checkpoint [--models default,100m] [--codecs shuffle,deflate,raw] [--stage 2] [--dir D]`:
 * save and load throughput of sharded checkpoints per rank at world size 2 (cpu backend), beside a
 * raw node:fs write (+ fsync) and read of the same number of bytes on the same rank in the same run.
 *
 * MB/s = uncompressed state bytes of the rank (params in their dtype + m + v, + master under mixed
 * precision) / wall seconds (10^6 bytes). Columns: cold save (the run's first save, with the JIT
 * warm-up of the codec), save (a second save), load, raw write + fsync and raw read of the same
 * byte count (done first, before the checkpoint's writes). Save time covers the whole collective save (agreement,
 * device reads, compression, writes, fsyncs, rank 0's manifest and renames); load time covers
 * reading, checking and decompressing the records and writing them into device buffers. Loads and
 * raw reads come from the page cache (the files were just written). Optimizer moments are random
 * normal values as after training (zeros would compress to nothing).
 *
 * Models: `default` (the built-in job's mixtral, 263k parameters) and `100m` (a llama of 98.9M
 * parameters: hidden 768, 7 layers, intermediate 2048, vocab 32000; fp32, ZeRO-2: each rank writes
 * half of the params, m and v ≈ 600 MB).
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RecordCodec } from "../src/checkpoint/record-file.ts";
import { DEFAULT_JOB } from "../src/config/default-job.ts";
import { launch } from "../src/launch/index.ts";
import type { CkptBenchArgs, CkptBenchOut } from "./checkpoint-rank.ts";

const MODELS: Record<string, Record<string, unknown>> = {
  default: DEFAULT_JOB.model as Record<string, unknown>,
  "100m": {
    model_type: "llama", vocab_size: 32000, hidden_size: 768, intermediate_size: 2048, num_hidden_layers: 7,
    num_attention_heads: 12, num_key_value_heads: 12, max_position_embeddings: 256, tie_word_embeddings: false,
  },
};

function opt(args: string[], name: string, def: string): string {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1]! : def;
}

/** Options `bun run bench checkpoint` takes (each with a value). */
const OPTIONS = ["--models", "--codecs", "--stage", "--dir"];

/** Entry of `bun run bench checkpoint`.
 * @throws on an unknown option or one without a value (before any work). */
export async function main(args: string[]): Promise<void> {
  for (let i = 0; i < args.length; i += 2) {
    if (!OPTIONS.includes(args[i]!) || args[i + 1] === undefined) {
      throw new Error(`bench checkpoint: unexpected argument ${args[i]}${OPTIONS.includes(args[i]!) ? " without a value" : ""}; usage: [--models default,100m] [--codecs shuffle,deflate,raw] [--stage 2] [--dir DIR]`);
    }
  }
  const models = opt(args, "--models", "default,100m").split(",");
  const codecs = opt(args, "--codecs", "shuffle,deflate,raw").split(",") as RecordCodec[];
  const stage = Number(opt(args, "--stage", "2"));
  const root = opt(args, "--dir", "") || mkdtempSync(join(tmpdir(), "zeromoe-bench-ckpt-"));
  const W = 2;
  console.log(`checkpoint bench: world ${W}, ZeRO-${stage}, cpu backend, dir ${root}`);
  console.log(`${"model".padEnd(8)} ${"params".padStart(11)} ${"codec".padEnd(10)} ${"MB/rank".padStart(8)} ${"file MB".padStart(8)} ${"cold save".padStart(10)} ${"save MB/s".padStart(10)} ${"load MB/s".padStart(10)} ${"raw write".padStart(10)} ${"raw read".padStart(10)}`);
  // an interrupted run removes its temporary folder too (the 100m model writes about 600 MB there)
  // The rank workers (threads of this process) may still be writing while the folder is removed, so
  // a removal can race with a file they create (ENOTEMPTY) or they can recreate a folder: retry
  // until the folder is gone, then exit (which stops the workers).
  const onSignal = (sig: NodeJS.Signals) => {
    if (!args.includes("--dir")) {
      for (let i = 0; i < 20 && existsSync(root); i++) {
        try {
          rmSync(root, { recursive: true, force: true, maxRetries: 3, retryDelay: 10 });
        } catch {
          // a worker created a file mid-removal: try again
        }
      }
    }
    process.exit(sig === "SIGINT" ? 130 : 143);
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    for (const m of models) {
      const model = MODELS[m];
      if (!model) throw new Error(`bench checkpoint: unknown model "${m}" (have ${Object.keys(MODELS).join(", ")})`);
      for (const codec of codecs) {
        const job = { ...DEFAULT_JOB, model, backend: "cpu", zero_optimization: { stage }, train_micro_batch_size_per_gpu: 1, data: { ...(DEFAULT_JOB.data as object), seq_len: 8 } };
        const dir = join(root, `${m}-${codec}`);
        const res = await launch<CkptBenchOut, CkptBenchArgs>({ worldSize: W, entry: new URL("./checkpoint-rank.ts", import.meta.url), args: { job, dir, codec }, timeoutS: 1200 });
        for (const [r, o] of res.entries()) {
          const mb = o.rawBytes / 1e6;
          console.log(
            `${(r === 0 ? m : "").padEnd(8)} ${(r === 0 ? o.numParameters.toLocaleString("en-US") : "").padStart(11)} ${`${codec} r${r}`.padEnd(10)} ${mb.toFixed(1).padStart(8)} ${(o.fileBytes / 1e6).toFixed(1).padStart(8)} ` +
              `${(mb / o.coldSaveSeconds).toFixed(0).padStart(10)} ${(mb / o.saveSeconds).toFixed(0).padStart(10)} ${(mb / o.loadSeconds).toFixed(0).padStart(10)} ${(mb / o.rawWriteSeconds).toFixed(0).padStart(10)} ${(mb / o.rawReadSeconds).toFixed(0).padStart(10)}`,
          );
        }
        rmSync(dir, { recursive: true, force: true });
      }
    }
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    if (!args.includes("--dir")) rmSync(root, { recursive: true, force: true });
  }
}
