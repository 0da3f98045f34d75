/**
 * Parameter initialisation as Hugging Face's `_init_weights` does it for Llama/Mixtral: Linear and
 * Embedding weights ~ normal(0, initializer_range), RMSNorm weights = 1 — from the counter-based
 * Philox stream keyed by (seed, parameter name) (`tensor/random.ts`), so every run, rank and
 * partitioning produces the same values, and any slice can be generated on its own.
 *
 * A unit (or a shard's element range of one) is generated into one host f32 array in a single pass
 * over its parameters, the normal draws spread over threads (`tensor/random-pool.ts`), and written to
 * the device with one `write` (plus one `cast` for a 16-bit unit). Values are computed in f64 and
 * rounded once to f32, as before; a 16-bit unit casts that f32 (nearest even).
 */
import type { Backend, Buf } from "@zeromoe/kernels";
import { normalFill, streamKey } from "../tensor/random.ts";
import { PARALLEL_MIN_ELEMENTS, normalFillTasks, type NormalFillTask } from "../tensor/random-pool.ts";
import type { Parameter, Unit } from "./unit.ts";

/** Values of elements [start, start + out.length) of parameter `p` under `seed`. */
export function initValues(p: Parameter, seed: number, start: number, out: Float32Array | Float64Array): void {
  switch (p.init.kind) {
    case "normal":
      normalFill(out, streamKey(seed, p.name), start, p.init.std);
      return;
    case "ones":
      out.fill(1);
      return;
    case "zeros":
      out.fill(0);
      return;
  }
}

/**
 * The initial values of unit elements [start, start + count) (the unit's flat layout, nn/unit.ts) as
 * f32: element k of the result is element start + k of the unit. The array lives in a
 * SharedArrayBuffer when it is large enough for the thread pool. An empty range (count 0) may start
 * anywhere (a ZeRO shard past the unit's end owns nothing).
 * @throws if a non-empty range lies outside the unit.
 */
export function initUnitValues(unit: Unit, seed: number, start: number, count: number): Float32Array {
  if (count === 0) return new Float32Array(0);
  if (!Number.isInteger(start) || !Number.isInteger(count) || start < 0 || count < 0 || start + count > unit.numel) {
    throw new Error(`initUnitValues(${unit.name}): range [${start}, ${start + count}) outside the unit's ${unit.numel} elements`);
  }
  const out = count >= PARALLEL_MIN_ELEMENTS ? new Float32Array(new SharedArrayBuffer(4 * count)) : new Float32Array(count);
  const end = start + count;
  const tasks: NormalFillTask[] = [];
  for (const p of unit.params) {
    const lo = Math.max(start, p.offset);
    const hi = Math.min(end, p.offset + p.numel);
    if (lo >= hi) continue;
    switch (p.init.kind) {
      case "normal":
        tasks.push({ key: streamKey(seed, p.name), start: lo - p.offset, count: hi - lo, dstOff: lo - start, std: p.init.std, mean: 0 });
        break;
      case "ones":
        out.fill(1, lo - start, hi - start);
        break;
      case "zeros":
        break; // already zero
    }
  }
  normalFillTasks(out, tasks);
  return out;
}

/** Write host f32 values into `dst` from element `off`, casting (nearest even) to a 16-bit `dst`. */
export function writeHostF32(be: Backend, dst: Buf, off: number, values: Float32Array): void {
  if (values.length === 0) return;
  if (dst.dtype === "f32") {
    be.write({ buf: dst, off }, values);
    return;
  }
  const tmp = be.alloc("f32", values.length, "other");
  try {
    be.write({ buf: tmp, off: 0 }, values);
    be.cast({ buf: tmp, off: 0 }, { buf: dst, off }, values.length);
  } finally {
    be.free(tmp);
  }
}

/** Initialise every parameter of `unit` into `unit.data` (casting for 16-bit units).
 * @throws if `unit.data` is null. */
export function initUnit(unit: Unit, seed: number): void {
  if (!unit.data) throw new Error(`initUnit(${unit.name}): unit.data is null (allocate it first)`);
  writeHostF32(unit.be, unit.data, 0, initUnitValues(unit, seed, 0, unit.numel));
}
