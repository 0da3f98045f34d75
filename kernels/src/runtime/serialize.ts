/**
 * Structured serialization (the HTML structured-clone algorithm: typed arrays, NaN, ±Infinity,
 * bigint, Map and Date survive) of a value to bytes and back — `bun:jsc` on Bun, `node:v8` on Deno.
 * Both ends of a byte string must run on the same runtime (the formats differ); the mpi transport's
 * ranks always do, since they are started by one launcher.
 */
import { deserialize as v8Deserialize, serialize as v8Serialize } from "node:v8";
import { RUNTIME } from "./detect.ts";

interface Jsc {
  serialize(value: unknown): SharedArrayBuffer | ArrayBuffer;
  deserialize(bytes: ArrayBufferLike | ArrayBufferView): unknown;
}

const jsc: Jsc | null = RUNTIME === "bun" ? (import.meta.require("bun:jsc") as Jsc) : null;

/** `value` as bytes (a fresh buffer). @throws DataCloneError on what cannot be cloned (functions). */
export function serialize(value: unknown): ArrayBuffer {
  if (jsc !== null) return jsc.serialize(value) as ArrayBuffer;
  const b = v8Serialize(value);
  return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer;
}

/** The value that {@link serialize} turned into `bytes` (the whole buffer, or a view's bytes).
 * @throws on bytes that are not a serialized value of this runtime. */
export function deserialize(bytes: ArrayBuffer | ArrayBufferView): unknown {
  if (jsc !== null) return jsc.deserialize(bytes as ArrayBuffer);
  const u8 = ArrayBuffer.isView(bytes) ? new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength) : new Uint8Array(bytes);
  return v8Deserialize(u8);
}
