/**
 * `--init-from model.safetensors`: initialise a fresh engine's parameters from a Hugging Face
 * safetensors file (one file; e.g. the output of `save16bitModel` or `zero-to-fp32`, or a model
 * saved by Transformers in the Hub layout).
 *
 * Streaming and sharded: each rank reads only the element ranges of the tensors its plan holds
 * (its ZeRO-3 shard, or whole replicated units) with {@link SafetensorsReader.readTensorElements},
 * converts them (F32/F16/BF16/F64 → f32, then to the unit's dtype, round to nearest even) and
 * writes them into its buffers. The fp32 master copy (mixed precision) is initialised from the
 * loaded 16-bit values, as at a fresh start; optimizer moments stay zero and step counters are not
 * touched. The file is untrusted input: the reader validates its header (safetensors.ts); a tensor
 * missing or of another shape is an error naming it.
 */
import { castTo16 } from "./hf-save.ts";
import { decodeTensor } from "./hf-load.ts";
import { SafetensorsError, SafetensorsReader } from "./safetensors.ts";
import type { CheckpointTarget } from "../engine/stateful.ts";

/** What {@link initFromSafetensors} loaded on this rank. */
export interface InitFromResult {
  /** Tensors (or parts of tensors) read, and elements written on this rank. */
  reads: number;
  elements: number;
}

/**
 * Load `file` into `engine` (see the module comment). Not a collective; every rank calls it.
 * @throws SafetensorsError naming the file and tensor for a malformed file, a missing tensor, a
 *   shape mismatch or an unsupported dtype.
 */
export async function initFromSafetensors(engine: CheckpointTarget, file: string): Promise<InitFromResult> {
  const be = engine.job.be;
  const rd = SafetensorsReader.open(file);
  let reads = 0;
  let elements = 0;
  try {
    for (const u of engine.modelUnits) {
      const h = engine.handleOf(u);
      if (!h) continue; // held by another rank (expert parallelism)
      const stored = h.paramStorage();
      const lo = stored.start;
      const hi = stored.start + stored.count;
      const dst = stored.buf;
      for (const p of u.params) {
        const a = Math.max(lo, p.offset);
        const b = Math.min(hi, p.offset + p.numel);
        if (a >= b) continue;
        const info = rd.info(p.name);
        if (info.shape.join(",") !== p.shape.join(",")) throw new SafetensorsError(file, `shape [${info.shape.join(", ")}] differs from the model's [${p.shape.join(", ")}]`, p.name);
        const bytes = rd.readTensorElements(p.name, a - p.offset, b - a);
        const dec = decodeTensor(bytes, { ...info, shape: [b - a], numel: b - a }, file);
        if (dec.dtype !== "f32") throw new SafetensorsError(file, `holds integers (${info.dtype}); a parameter needs a floating dtype`, p.name);
        const f32 = dec.data as Float32Array;
        const off = a - lo;
        if (dst.dtype === "f32") be.write({ buf: dst, off }, f32);
        else be.write({ buf: dst, off }, castTo16(f32, dst.dtype === "bf16" ? "BF16" : "F16"));
        reads++;
        elements += b - a;
      }
    }
  } finally {
    rd.close();
  }
  for (const h of engine.units()) await engine.initMaster(h);
  return { reads, elements };
}
