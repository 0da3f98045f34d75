/**
 * Save a state dict of host arrays as one Hugging Face-loadable safetensors file — the inverse of
 * {@link loadStateDict} (./hf-load.ts), for the fp32 / 16-bit model export.
 *
 * Floating tensors (Float32Array, or Float64Array from the f64 CPU backend) are written as F32, or
 * cast to BF16 / F16 with round to nearest, ties to even (docs/domain.md §5; f64 data is first rounded
 * to f32, as a cast from an f32 model would be). Int32Array tensors are written as I32. The file's
 * `__metadata__` includes `"format": "pt"`, which Transformers' `from_pretrained` requires of a
 * safetensors checkpoint.
 *
 * Streaming: the header is written from the names and shapes first, then one tensor at a time is
 * converted and written, so peak extra memory is one converted tensor. The file appears atomically
 * (temporary file + rename, see {@link SafetensorsWriter}).
 */

import { bf16FromF32Bits, f16FromF32Bits } from "@zeromoe/kernels";
import { SafetensorsError, SafetensorsWriter, type SafetensorsDType } from "./safetensors.ts";

/** A tensor to save: row-major `shape`, `data.length` = product of `shape`. */
export interface SaveTensor {
  shape: readonly number[];
  data: Float32Array | Float64Array | Int32Array;
}

/** Options of {@link saveStateDict}. */
export interface SaveStateDictOptions {
  /** On-disk dtype of floating tensors (default F32). Integer tensors are always I32. */
  floatDtype?: "F32" | "BF16" | "F16";
  /** Extra `__metadata__` entries; `format` defaults to `"pt"`. */
  metadata?: Record<string, string>;
}

/**
 * Cast f32 values to 16-bit float bits, round to nearest even.
 * @param src f32 data (f64 data is rounded to f32 first).
 * @param to "BF16" or "F16".
 * @returns one Uint16 of bits per element.
 */
export function castTo16(src: Float32Array | Float64Array, to: "BF16" | "F16"): Uint16Array {
  const f32 = src instanceof Float32Array ? src : Float32Array.from(src);
  const bits = new Uint32Array(f32.buffer, f32.byteOffset, f32.length);
  const out = new Uint16Array(f32.length);
  const conv = to === "BF16" ? bf16FromF32Bits : f16FromF32Bits;
  for (let i = 0; i < bits.length; i++) out[i] = conv(bits[i]);
  return out;
}

/**
 * Write `tensors` (in iteration order) to `path`.
 * @param path output file.
 * @param tensors name → tensor (a Map, or any iterable of pairs; {@link loadStateDict}'s result works).
 * @param opts floating dtype and metadata.
 * @throws SafetensorsError when a tensor's data length differs from its shape's element count, or for
 *   invalid names/shapes (see {@link SafetensorsWriter.create}).
 */
export function saveStateDict(path: string, tensors: Iterable<readonly [string, SaveTensor]>, opts: SaveStateDictOptions = {}): void {
  const floatDtype = opts.floatDtype ?? "F32";
  const entries = [...tensors];
  const specs = entries.map(([name, t]) => {
    const numel = t.shape.reduce((a, b) => a * b, 1);
    if (t.data.length !== numel) throw new SafetensorsError(path, `data has ${t.data.length} elements; shape ${JSON.stringify(t.shape)} needs ${numel}`, name);
    const dtype: SafetensorsDType = t.data instanceof Int32Array ? "I32" : floatDtype;
    return { name, dtype, shape: t.shape };
  });
  const w = SafetensorsWriter.create(path, specs, { format: "pt", ...opts.metadata });
  try {
    for (let i = 0; i < entries.length; i++) {
      const [name, t] = entries[i];
      if (t.data.length === 0) continue;
      const dtype = specs[i].dtype;
      if (dtype === "I32") w.writeTensor(name, t.data);
      else if (dtype === "F32") w.writeTensor(name, t.data instanceof Float64Array ? Float32Array.from(t.data) : t.data);
      else w.writeTensor(name, castTo16(t.data as Float32Array | Float64Array, dtype as "BF16" | "F16"));
    }
    w.finish();
  } catch (e) {
    w.abort();
    throw e;
  }
}
