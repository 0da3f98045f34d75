/**
 * Rank entry of the checkpoint tests: each run builds a fresh CPU engine for its job at the
 * launched world size and executes a list of operations (train, save, load, snapshot, export).
 *
 * Data: step s (the engine's global step, so a resumed engine continues the same stream) uses
 * micro-batch slots a·W + rank of the engine tests' deterministic generator; with the global batch
 * fixed (W × accumulation constant) every world size sees the same data (core/test/engine).
 *
 * Snapshots are independent of the checkpoint code: every rank returns the element ranges it holds
 * of each unit (its parameter shard, or the whole unit), read straight from the device buffers;
 * the test assembles full parameters from all ranks' pieces.
 */
import { CpuBackend } from "@zeromoe/kernels";
import { createBackend } from "@zeromoe/kernels";
import type { Communicator } from "../../src/comm/communicator.ts";
import { initFromSafetensors } from "../../src/checkpoint/init-from.ts";
import { resolveJobConfig } from "../../src/config/index.ts";
import { Engine, type TrainMicroBatch } from "../../src/engine/engine.ts";
import { pluginsForJob } from "../../src/engine/plugin-loader.ts";
import { destroyBackend } from "../../src/train/backend.ts";
import { microBatch } from "../engine/fixtures.ts";

/** Absolute path of this module (the `launch` entry). */
export const CKPT_ENTRY: string = import.meta.path;

/** One operation of a run. */
export type Op =
  | { op: "train"; steps: number }
  | { op: "save"; dir: string; tag: string; keepLast?: number }
  | { op: "load"; dir: string; tag?: string }
  | { op: "snapshot" }
  | { op: "save16"; dir: string }
  | { op: "initFrom"; file: string }
  /** Only this rank saves (the others return at once): must fail with an error, not hang. */
  | { op: "saveAlone"; dir: string; tag: string; rank: number; othersTrain?: boolean };

/** One run: a job (raw JSON; world_size is set to the launched size) and its operations. */
export interface Run {
  job: Record<string, unknown>;
  ops: Op[];
  /** Run on the auto-selected backend (webgpu where a device works — here Mesa's lavapipe — else
   * cpu) instead of the cpu backend. */
  auto?: boolean;
}

/** Element range of a unit's parameters a rank holds, as f32 values (16-bit widened). */
export interface Piece {
  unit: string;
  start: number;
  values: number[];
}

/** What a run returns on each rank. */
export interface RunOut {
  losses: number[];
  snapshots: Piece[][];
  save16: boolean[];
  loads: { resharded: boolean; tag: string; step: number }[];
  errors: string[];
  logs: string[];
  /** Backend the run used ("cpu" or "webgpu"). */
  backend: string;
}

async function snapshot(engine: Engine): Promise<Piece[]> {
  const be = engine.env.be;
  const out: Piece[] = [];
  for (const st of engine.states) {
    const u = st.unit;
    const sharded = st.paramShard !== null;
    const n = sharded ? st.plan.owned : u.numel;
    const buf = st.paramShard ?? u.data!;
    if (n === 0) continue;
    const f32 = be.alloc("f32", n, "other");
    if (buf.dtype === "f32") be.copy({ buf, off: 0 }, { buf: f32, off: 0 }, n);
    else be.cast({ buf, off: 0 }, { buf: f32, off: 0 }, n);
    const host = await be.read({ buf: f32, off: 0 }, n);
    be.free(f32);
    out.push({ unit: u.name, start: sharded ? st.plan.shardStart : 0, values: Array.from(host) });
  }
  return out;
}

/** Train `steps` steps from the engine's current global step. */
async function train(engine: Engine, comm: Communicator, steps: number, losses: number[]): Promise<void> {
  const cfg = engine.env.config;
  for (let i = 0; i < steps; i++) {
    const s = engine.globalSteps;
    const mbs: TrainMicroBatch[] = [];
    for (let a = 0; a < cfg.gradient_accumulation_steps; a++) mbs.push(microBatch(s, a * comm.worldSize + comm.rank, cfg.train_micro_batch_size_per_gpu, cfg.data.seq_len, cfg.model.vocab_size));
    losses.push((await engine.trainBatch(mbs)).loss);
  }
}

async function runOne(comm: Communicator, run: Run): Promise<RunOut> {
  const { config } = resolveJobConfig({ ...run.job, world_size: comm.worldSize });
  const be = run.auto ? (await createBackend("auto", { choose: "first-adapter" })).backend : new CpuBackend();
  const out: RunOut = { losses: [], snapshots: [], save16: [], loads: [], errors: [], logs: [], backend: be.info.name };
  const engine = await Engine.create({ config, comm, backend: be, plugins: await pluginsForJob(config), log: (m) => out.logs.push(m) });
  try {
    for (const op of run.ops) {
      if (op.op === "train") await train(engine, comm, op.steps, out.losses);
      else if (op.op === "save") await engine.saveCheckpoint(op.dir, op.tag, { keepLast: op.keepLast, dataPosition: { epoch: 0, index: engine.globalSteps, micro: 0 } });
      else if (op.op === "load") {
        const r = await engine.loadCheckpoint(op.dir, op.tag);
        out.loads.push({ resharded: r.resharded, tag: r.tag, step: engine.globalSteps });
      } else if (op.op === "snapshot") out.snapshots.push(await snapshot(engine));
      else if (op.op === "save16") out.save16.push(await engine.save16bitModel(op.dir));
      else if (op.op === "initFrom") await initFromSafetensors(engine, op.file);
      else if (op.op === "saveAlone") {
        try {
          if (comm.rank === op.rank) await engine.saveCheckpoint(op.dir, op.tag);
          else if (op.othersTrain) await train(engine, comm, 1, out.losses);
          else continue;
          out.errors.push("no error");
        } catch (e) {
          out.errors.push((e as Error).message);
        }
      }
    }
  } finally {
    engine.destroy();
    destroyBackend(be);
  }
  return out;
}

/** Rank entry: run each job in turn. */
export default async function main(comm: Communicator, _rank: number, _ws: number, args: { runs: Run[] }): Promise<RunOut[]> {
  const res: RunOut[] = [];
  for (const r of args.runs) res.push(await runOne(comm, r));
  return res;
}

/** Full parameters per unit assembled from every rank's pieces of one snapshot. */
export function assemble(perRank: readonly Piece[][]): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (const pieces of perRank) {
    for (const p of pieces) {
      let arr = out.get(p.unit);
      if (!arr) out.set(p.unit, (arr = []));
      for (let i = 0; i < p.values.length; i++) {
        const prev = arr[p.start + i];
        if (prev !== undefined && !Object.is(prev, p.values[i])) throw new Error(`assemble: ranks disagree on ${p.unit}[${p.start + i}]: ${prev} vs ${p.values[i]}`);
        arr[p.start + i] = p.values[i]!;
      }
    }
  }
  return out;
}
