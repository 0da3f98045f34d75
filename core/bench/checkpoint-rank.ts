/**
 * Rank entry of `bun run bench checkpoint` (see checkpoint.ts): build the engine of a job, fill the
 * optimizer moments with random normal values (as after training — zero moments would compress to
 * nothing and flatter the codec), then time on this rank: a raw write (+ fsync) and read of the
 * same number of bytes with node:fs, a first (cold) and a second saveCheckpoint, and a
 * loadCheckpoint, in the same run.
 */
import { closeSync, fsyncSync, mkdirSync, openSync, readSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import type { RecordCodec } from "../src/checkpoint/record-file.ts";
import { CpuBackend } from "@zeromoe/kernels";
import { xorshift32 } from "@zeromoe/kernels/testing";
import type { Communicator } from "../src/comm/communicator.ts";
import { resolveJobConfig } from "../src/config/index.ts";
import { Engine } from "../src/engine/engine.ts";
import { pluginsForJob } from "../src/engine/plugin-loader.ts";

/** Arguments of one rank. */
export interface CkptBenchArgs {
  job: Record<string, unknown>;
  dir: string;
  codec: RecordCodec;
}

/** One rank's figures (bytes, seconds). */
export interface CkptBenchOut {
  numParameters: number;
  rawBytes: number;
  fileBytes: number;
  /** First save of the run (includes JIT warm-up of the codec) and a second one. */
  coldSaveSeconds: number;
  saveSeconds: number;
  writeSeconds: number;
  loadSeconds: number;
  rawWriteSeconds: number;
  rawReadSeconds: number;
}

const CHUNK = 4 << 20;

function fillRandom(a: Float32Array, seed: number): void {
  const next = xorshift32(seed);
  for (let i = 0; i < a.length; i += 2) {
    const u1 = (next() + 1) / 4294967297;
    const u2 = next() / 4294967296;
    const r = Math.sqrt(-2 * Math.log(u1)) * 1e-3;
    a[i] = r * Math.cos(2 * Math.PI * u2);
    if (i + 1 < a.length) a[i + 1] = r * Math.sin(2 * Math.PI * u2);
  }
}

export default async function main(comm: Communicator, rank: number, _ws: number, args: CkptBenchArgs): Promise<CkptBenchOut> {
  const { config } = resolveJobConfig({ ...args.job, world_size: comm.worldSize });
  const be = new CpuBackend();
  const engine = await Engine.create({ config, comm, backend: be, plugins: await pluginsForJob(config), log: () => {} });
  for (const st of engine.states) {
    for (const [i, b] of [st.m!, st.v!].entries()) {
      const host = new Float32Array(b.length);
      fillRandom(host, 977 * rank + 131 * i + b.length);
      if (i === 1) for (let j = 0; j < host.length; j++) host[j] = host[j]! * host[j]!; // v ≥ 0
      be.write({ buf: b, off: 0 }, host);
    }
  }
  // raw file I/O of the state's byte count on this rank first (before the checkpoint's own
  // writes are being flushed by the kernel), then a cold save, a warm save, and a load
  const bytes = engine.states.reduce((a, st) => a + st.optimCount * (2 * 4 + (st.master ? 4 : 0) + (st.unit.dtype === "f32" ? 4 : 2)), 0);
  const file = join(args.dir, `raw_${rank}.bin`);
  mkdirSync(args.dir, { recursive: true });
  const buf = new Uint8Array(CHUNK).map((_, i) => (i * 2654435761) >>> 24);
  await comm.barrier();
  let t0 = performance.now();
  let fd = openSync(file, "w");
  for (let done = 0; done < bytes; done += CHUNK) writeSync(fd, buf, 0, Math.min(CHUNK, bytes - done));
  fsyncSync(fd);
  closeSync(fd);
  const rawWriteSeconds = (performance.now() - t0) / 1000;
  await comm.barrier();
  t0 = performance.now();
  fd = openSync(file, "r");
  for (let done = 0; done < bytes; ) {
    const n = readSync(fd, buf, 0, Math.min(CHUNK, bytes - done), done);
    if (n <= 0) break;
    done += n;
  }
  closeSync(fd);
  const rawReadSeconds = (performance.now() - t0) / 1000;
  rmSync(file, { force: true });
  await comm.barrier();
  const cold = await engine.saveCheckpoint(args.dir, "bench", { codec: args.codec, keepLast: 0 });
  await comm.barrier();
  const s = await engine.saveCheckpoint(args.dir, "bench", { codec: args.codec, keepLast: 0 });
  await comm.barrier();
  const l = await engine.loadCheckpoint(args.dir, "bench");
  await comm.barrier();
  if (s.rawBytes !== bytes) throw new Error(`bench checkpoint: rank ${rank} saved ${s.rawBytes} state bytes, expected ${bytes}`);
  const out: CkptBenchOut = {
    numParameters: engine.model.numParameters,
    rawBytes: s.rawBytes,
    fileBytes: s.fileBytes,
    coldSaveSeconds: cold.seconds,
    saveSeconds: s.seconds,
    writeSeconds: s.writeSeconds,
    loadSeconds: l.seconds,
    rawWriteSeconds,
    rawReadSeconds,
  };
  engine.destroy();
  return out;
}
