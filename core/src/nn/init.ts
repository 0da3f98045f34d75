/**
 * Parameter initialisation as Hugging Face's `_init_weights` does it for Llama/Mixtral: Linear and
 * Embedding weights ~ normal(0, initializer_range), RMSNorm weights = 1 — from the counter-based
 * Philox stream keyed by (seed, parameter name) (`tensor/random.ts`), so every run, rank and
 * partitioning produces the same values, and any slice can be generated on its own.
 */
import { normalFill, streamKey } from "../tensor/random.ts";
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

/** Initialise every parameter of `unit` into `unit.data` (casting for 16-bit units).
 * @throws if `unit.data` is null. */
export function initUnit(unit: Unit, seed: number): void {
  if (!unit.data) throw new Error(`initUnit(${unit.name}): unit.data is null (allocate it first)`);
  const be = unit.be;
  const data = unit.data;
  for (const p of unit.params) {
    if (p.numel === 0) continue;
    const host = new Float64Array(p.numel);
    initValues(p, seed, 0, host);
    if (unit.dtype === "f32") {
      be.write({ buf: data, off: p.offset }, host);
    } else {
      const tmp = be.alloc("f32", p.numel, "other");
      be.write({ buf: tmp, off: 0 }, host);
      be.cast({ buf: tmp, off: 0 }, { buf: data, off: p.offset }, p.numel);
      be.free(tmp);
    }
  }
}
