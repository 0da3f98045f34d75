/**
 * `--save-init DIR` (and `engine.saveFp32Weights(dir)`): the model's full-precision weights as a
 * Hugging Face Hub directory — `config.json` (hf-config.ts) and one `model.safetensors` in F32
 * with Hugging Face names — that Transformers' `from_pretrained`, `--init-from DIR` and
 * core/bench/hf_reference.py read. Written before step 1 it is the run's step-0 state, so another
 * implementation can start from exactly ZeroMoE's initial weights.
 *
 * What "full precision" is: with bf16/fp16 the fp32 master copy the optimizer updates (the
 * 16-bit parameters are its rounding, so PyTorch with fp32 parameters under autocast holds the
 * same numbers), with fp32 the parameters themselves — zero_to_fp32's choice, without needing a
 * checkpoint (which would also write the optimizer moments: 3× the bytes).
 *
 * A collective, streaming unit by unit in model order (peak host memory: one unit in f32): a
 * sharded master (ZeRO 1–3) or sharded fp32 parameters (ZeRO-3) are all_gathered inside the
 * unit's group; a unit world rank 0 does not hold (an expert on another rank of the EP group) is
 * broadcast by its lowest holder. Rank 0 writes.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { CheckpointTarget } from "../engine/stateful.ts";
import type { UnitHandle } from "../engine/plugin-context.ts";
import { readPadded } from "../engine/host-transfer.ts";
import { bf16ToNumber, f16ToNumber } from "@zeromoe/kernels";
import { writeHfConfig } from "./hf-config.ts";
import { SafetensorsWriter } from "./safetensors.ts";

/** This rank's part of `h`'s full-precision values: its optimizer range of the master (mixed
 * precision) or of the parameters (fp32), padded to the shard size when that range is a shard. */
async function localFp32(engine: CheckpointTarget, h: UnitHandle, mixed: boolean): Promise<{ data: Float32Array; sharded: boolean }> {
  const p = h.plan;
  if (mixed) {
    const sharded = p.optim === "sharded";
    const len = sharded ? p.shardSize : p.numel;
    const data = new Float32Array(len);
    const n = sharded ? p.owned : p.numel;
    if (n > 0) data.set(await h.readOptimizerState("master", 0, n), 0);
    return { data, sharded };
  }
  const stored = h.paramStorage();
  const sharded = p.params === "sharded";
  const raw = await readPadded(engine.job.be, stored.buf, 0, sharded ? p.owned : p.numel, sharded ? p.shardSize : p.numel);
  if (raw instanceof Float32Array) return { data: raw, sharded };
  const dec = h.dtype === "f16" ? f16ToNumber : bf16ToNumber;
  return { data: Float32Array.from(raw, dec), sharded };
}

/**
 * Write the model's full-precision weights into `dir` (module comment). Every rank must call it.
 * @returns the path of the safetensors file (on every rank).
 * @throws SafetensorsError / fs errors while writing (rank 0), communicator errors.
 */
export async function saveFp32Weights(engine: CheckpointTarget, dir: string): Promise<string> {
  const env = engine.job;
  const { comm, config } = env;
  if ((config.moe?.etp_size ?? 1) > 1) throw new Error(`saveFp32Weights: moe.etp_size ${config.moe!.etp_size}: the experts are held as etp slices; a Hugging Face export of them is not supported (train with moe.etp_size 1 to export)`);
  const mixed = config.bf16.enabled || config.fp16.enabled;
  const units = engine.modelUnits;
  const held = new Int32Array(units.length);
  units.forEach((u, i) => (held[i] = engine.handleOf(u) ? 1 : 0));
  const all = comm.worldSize > 1 ? await comm.allGather(held) : held;
  const path = join(dir, "model.safetensors");
  let writer: SafetensorsWriter | null = null;
  if (comm.rank === 0) {
    mkdirSync(dir, { recursive: true });
    const specs = units.flatMap((u) => u.params.map((p) => ({ name: p.name, dtype: "F32" as const, shape: [...p.shape] })));
    for (const [name, b] of engine.modelBuffers()) specs.push({ name, dtype: "F32", shape: [b.length] });
    writer = SafetensorsWriter.create(path, specs, { format: "pt", "zeromoe.dtype": "f32", "zeromoe.source": mixed ? "fp32 master" : "fp32 parameters" });
  }
  try {
    for (let i = 0; i < units.length; i++) {
      const u = units[i]!;
      let root = -1;
      for (let r = 0; r < comm.worldSize; r++) if (all[r * units.length + i] === 1) { root = r; break; }
      if (root < 0) throw new Error(`saveFp32Weights: no rank holds unit ${u.name}`);
      const h = engine.handleOf(u);
      let full: Float32Array | null = null;
      if (h) {
        const { data, sharded } = await localFp32(engine, h, mixed);
        full = sharded && h.plan.group.size > 1 ? ((await comm.allGather(data, undefined, { group: h.plan.group })) as Float32Array).subarray(0, u.numel) : data.subarray(0, u.numel);
      }
      if (root !== 0 && comm.worldSize > 1) full = (await comm.broadcast(full ?? new Float32Array(u.numel), root)) as Float32Array;
      if (writer && full) for (const q of u.params) writer.writeTensor(q.name, full.subarray(q.offset, q.offset + q.numel));
    }
    if (writer) for (const [name, b] of engine.modelBuffers()) writer.writeTensor(name, b);
    writer?.finish();
    if (comm.rank === 0) writeHfConfig(dir, config.model, "f32");
  } catch (e) {
    writer?.abort();
    throw e;
  }
  return path;
}
