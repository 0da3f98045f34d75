/**
 * `engine.save16bitModel(dir)`: one safetensors file (`model.safetensors`) — or, with
 * `maxShardSize`, shards and an index as `save_pretrained` writes them (hub-export.ts) — with Hugging
 * Face parameter names and the training dtype (bf16/f16 under mixed precision, f32 otherwise), plus the
 * model's `config.json` (hf-config.ts) and the tokenizer and generation_config.json files of the
 * model's source (hub-side-files.ts), so the directory loads with Transformers' `from_pretrained`
 * (and AutoTokenizer) and with `--init-from`.
 *
 * As DeepSpeed's `save_16bit_model`: under ZeRO-3 the parameters are sharded, and gathering them
 * needs `zero_optimization.stage3_gather_16bit_weights_on_model_save: true`; without it the call
 * logs a warning and returns false (on every rank, without writing anything).
 *
 * Streaming, unit by unit in model order, every rank taking part (a collective): the ranks holding
 * a unit all_gather it inside the unit's group when its parameters are sharded; then, when world
 * rank 0 does not hold it (an expert placed on another rank of the EP group), the lowest holding
 * rank broadcasts it over the world. Rank 0 writes it and drops it before the next unit. Peak host
 * memory: one unit's full parameters.
 */
import { join } from "node:path";
import { mkdirSync } from "node:fs";
import type { CheckpointTarget } from "../engine/stateful.ts";
import { readPadded } from "../engine/host-transfer.ts";
import { writeHfConfig } from "./hf-config.ts";
import { copyHubSideFiles, sideFileSources } from "./hub-side-files.ts";
import { HubDirWriter } from "./hub-export.ts";
import { SafetensorsWriter, type SafetensorsDType } from "./safetensors.ts";
import { quoteUntrusted } from "../config/quote-untrusted.ts";

/** Options of {@link save16bitModel}. */
export interface Save16Options {
  /** File name inside `dir` (default `model.safetensors`; not with `maxShardSize`). */
  filename?: string;
  /** Shard the weights as `save_pretrained(max_shard_size=…)` does: files of at most this many
   * bytes and `model.safetensors.index.json` when there are several (hub-export.ts). */
  maxShardSize?: number;
}

const ST_DTYPE: Record<string, SafetensorsDType> = { f32: "F32", bf16: "BF16", f16: "F16" };

/**
 * Write the model (see the module comment). Every rank must call it.
 * @returns true when written; false (with a warning through the engine's log) under ZeRO-3
 *   without `stage3_gather_16bit_weights_on_model_save`.
 * @throws SafetensorsError / fs errors while writing (rank 0), communicator errors.
 */
export async function save16bitModel(engine: CheckpointTarget, dir: string, opts: Save16Options = {}): Promise<boolean> {
  const env = engine.job;
  const { comm, be, config } = env;
  if ((config.moe?.etp_size ?? 1) > 1) throw new Error(`save16bitModel: moe.etp_size ${config.moe!.etp_size}: the experts are held as etp slices; a Hugging Face export of them is not supported (train with moe.etp_size 1 to export)`);
  const z = config.zero_optimization;
  if (z.stage === 3 && !z.stage3_gather_16bit_weights_on_model_save) {
    const msg = `warning: save16bitModel: ZeRO-3 parameters are sharded and zero_optimization.stage3_gather_16bit_weights_on_model_save is false: no model saved (DeepSpeed returns False the same way); use bun run zero-to-fp32 on a checkpoint instead`;
    if (comm.rank === 0) env.log(msg);
    return false;
  }
  const units = engine.modelUnits;
  // which world ranks hold which unit (experts live on some ranks only)
  const held = new Int32Array(units.length);
  units.forEach((u, i) => (held[i] = engine.handleOf(u) ? 1 : 0));
  const all = comm.worldSize > 1 ? await comm.allGather(held) : held;
  const path = join(dir, opts.filename ?? "model.safetensors");
  let writer: SafetensorsWriter | HubDirWriter | null = null;
  if (comm.rank === 0) {
    mkdirSync(dir, { recursive: true });
    const specs = units.flatMap((u) => u.params.map((p) => ({ name: p.name, dtype: ST_DTYPE[u.dtype]!, shape: [...p.shape] })));
    // the model's buffers (DeepSeek-V3's e_score_correction_bias), f32, after the parameters
    for (const [name, b] of engine.modelBuffers()) specs.push({ name, dtype: "F32", shape: [b.length] });
    const meta = { format: "pt", "zeromoe.dtype": env.paramDtype };
    writer = opts.maxShardSize !== undefined ? HubDirWriter.create(dir, specs, opts.maxShardSize, meta) : SafetensorsWriter.create(path, specs, meta);
  }
  try {
    for (let i = 0; i < units.length; i++) {
      const u = units[i]!;
      let root = -1;
      for (let r = 0; r < comm.worldSize; r++) if (all[r * units.length + i] === 1) { root = r; break; }
      if (root < 0) throw new Error(`save16bitModel: no rank holds unit ${quoteUntrusted(u.name)}`);
      const h = engine.handleOf(u);
      let full: Float32Array | Uint16Array | null = null;
      if (h) {
        const p = h.plan;
        const stored = h.paramStorage();
        if (p.params === "sharded") {
          const shard = await readPadded(be, stored.buf, 0, p.shardSize, p.shardSize);
          full = (await comm.allGather(shard, undefined, { group: p.group })).subarray(0, u.numel);
        } else {
          full = await readPadded(be, stored.buf, 0, u.numel, u.numel);
        }
      }
      if (root !== 0 && comm.worldSize > 1) {
        const buf: Float32Array | Uint16Array = full ?? (u.dtype === "f32" ? new Float32Array(u.numel) : new Uint16Array(u.numel));
        full = await comm.broadcast(buf, root);
      }
      if (writer && full) for (const q of u.params) writer.writeTensor(q.name, full.subarray(q.offset, q.offset + q.numel));
    }
    if (writer) for (const [name, b] of engine.modelBuffers()) writer.writeTensor(name, b);
    writer?.finish();
    if (comm.rank === 0) {
      writeHfConfig(dir, config.model, env.paramDtype);
      // the tokenizer and generation_config.json of the model's source directory (hub-side-files.ts)
      copyHubSideFiles(dir, sideFileSources(config));
    }
  } catch (e) {
    writer?.abort();
    throw e;
  }
  return true;
}
