/**
 * Load a Hugging Face state dict (safetensors) into host arrays.
 *
 * Accepts a single `.safetensors` file, or a directory holding `model.safetensors` or a sharded
 * checkpoint's `model.safetensors.index.json` (`{"weight_map": {name: shard file}}`, the layout
 * `save_pretrained` writes for large models). Tensor names are kept exactly as stored, so models
 * built with Hugging Face parameter names can consume them without renaming.
 *
 * Conversions (exact unless noted): F32 as is; F16 and BF16 widened to f32 (exact); F64 rounded to
 * f32 (round to nearest even, the IEEE cast); I32 as is; I64/U32/I16/U16/I8/U8/BOOL to i32, refusing
 * values outside the i32 range. Other dtypes (FP8, C64, U64) are refused with an error naming the
 * tensor.
 */

import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { readHubIndex } from "./hub-index.ts";
import { SafetensorsError, SafetensorsReader, type SafetensorsDType, type SafetensorsTensorInfo } from "./safetensors.ts";

/** One loaded tensor: f32 data for floating types, i32 for integer ones. Shape is row-major. */
export interface LoadedTensor {
  dtype: "f32" | "i32";
  shape: number[];
  data: Float32Array | Int32Array;
  /** The dtype stored in the file. */
  sourceDtype: SafetensorsDType;
}

/** Options of {@link loadStateDict}. */
export interface LoadStateDictOptions {
  /** Load only the names for which this returns true (others are not read from disk). */
  filter?: (name: string) => boolean;
}

/**
 * Convert one tensor's raw little-endian bytes to a host array.
 * @param bytes the tensor's bytes; `bytes.byteOffset` must be a multiple of 8 (as from
 *   {@link SafetensorsReader.readTensorBytes}).
 * @param info its header entry.
 * @param file file name for errors.
 * @throws SafetensorsError for an unsupported dtype or an integer outside the i32 range.
 */
export function decodeTensor(bytes: Uint8Array, info: SafetensorsTensorInfo, file: string): LoadedTensor {
  const n = info.numel;
  const shape = [...info.shape];
  const buf = bytes.buffer;
  const off = bytes.byteOffset;
  if (off % 8 !== 0) throw new SafetensorsError(file, `decodeTensor needs 8-byte-aligned bytes (byteOffset ${off})`, info.name);
  const f32 = (data: Float32Array): LoadedTensor => ({ dtype: "f32", shape, data, sourceDtype: info.dtype });
  const i32 = (data: Int32Array): LoadedTensor => ({ dtype: "i32", shape, data, sourceDtype: info.dtype });
  switch (info.dtype) {
    case "F32":
      return f32(new Float32Array(buf, off, n));
    case "F64":
      return f32(Float32Array.from(new Float64Array(buf, off, n)));
    case "F16":
      // Float16Array (ES2025, built into Bun's JavaScriptCore) widens exactly.
      return f32(Float32Array.from(new Float16Array(buf, off, n)));
    case "BF16": {
      // bf16 is the top half of an f32 (docs/domain.md §5): widening is a 16-bit shift.
      const src = new Uint16Array(buf, off, n);
      const out = new Uint32Array(n);
      for (let i = 0; i < n; i++) out[i] = src[i] << 16;
      return f32(new Float32Array(out.buffer));
    }
    case "I32":
      return i32(new Int32Array(buf, off, n));
    case "U32":
      return i32(checkedI32(new Uint32Array(buf, off, n), info, file));
    case "I16":
      return i32(Int32Array.from(new Int16Array(buf, off, n)));
    case "U16":
      return i32(Int32Array.from(new Uint16Array(buf, off, n)));
    case "I8":
      return i32(Int32Array.from(new Int8Array(buf, off, n)));
    case "U8":
    case "BOOL":
      return i32(Int32Array.from(new Uint8Array(buf, off, n)));
    case "I64":
      return i32(checkedI32(new BigInt64Array(buf, off, n), info, file));
    default:
      throw new SafetensorsError(file, `dtype ${info.dtype} is not supported by loadStateDict (supported: F32, F64, F16, BF16, I64, I32, U32, I16, U16, I8, U8, BOOL)`, info.name);
  }
}

function checkedI32(src: Uint32Array | BigInt64Array, info: SafetensorsTensorInfo, file: string): Int32Array {
  const out = new Int32Array(src.length);
  for (let i = 0; i < src.length; i++) {
    const v = Number(src[i]);
    if (v < -2147483648 || v > 2147483647) {
      throw new SafetensorsError(file, `element ${i} = ${src[i]} does not fit in i32`, info.name);
    }
    out[i] = v;
  }
  return out;
}

/** Files making up the checkpoint at `path` (see module doc). */
function checkpointFiles(path: string): string[] {
  if (!statSync(path).isDirectory()) return [path];
  const index = join(path, "model.safetensors.index.json");
  if (existsSync(index)) {
    const files = new Set(readHubIndex(index).values());
    return [...files].sort().map((f) => join(path, f));
  }
  const single = join(path, "model.safetensors");
  if (existsSync(single)) return [single];
  throw new SafetensorsError(path, "directory holds neither model.safetensors nor model.safetensors.index.json");
}

/**
 * Read a safetensors state dict into `Map<name, LoadedTensor>`, streaming one tensor at a time.
 *
 * @param path a `.safetensors` file, or a directory with `model.safetensors` or
 *   `model.safetensors.index.json` plus its shards.
 * @param opts optional name filter.
 * @returns tensors in file order (shards in sorted file-name order).
 * @throws SafetensorsError for malformed files, a name present in two shards, unsupported dtypes or
 *   out-of-range integers; fs errors for missing files.
 */
export function loadStateDict(path: string, opts: LoadStateDictOptions = {}): Map<string, LoadedTensor> {
  const out = new Map<string, LoadedTensor>();
  for (const file of checkpointFiles(path)) {
    const r = SafetensorsReader.open(file);
    try {
      for (const info of r.header.tensors) {
        if (opts.filter !== undefined && !opts.filter(info.name)) continue;
        if (out.has(info.name)) throw new SafetensorsError(file, "tensor appears in more than one shard", info.name);
        out.set(info.name, decodeTensor(r.readTensorBytes(info.name), info, file));
      }
    } finally {
      r.close();
    }
  }
  return out;
}
