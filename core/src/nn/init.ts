/**
 * Parameter initialisation as Hugging Face's `_init_weights` does it for Llama/Mixtral: Linear and
 * Embedding weights ~ normal(0, initializer_range), RMSNorm weights = 1 — from the counter-based
 * Philox stream keyed by (seed, parameter name) (`tensor/random.ts` `streamKey`), so every run, rank
 * and partitioning produces the same values, and any slice can be generated on its own.
 *
 * The values are made where they live: a unit (or a ZeRO shard's element range of one) is filled by
 * one backend op per parameter piece (`Backend.randomFill` for normal draws, `fill` for ones and
 * zeros), so on a GPU nothing but keys, stream positions and scales crosses the bus, and a 16-bit
 * unit is written rounded to nearest even from the same f32 values. The transform from Philox words
 * to samples is integer arithmetic (kernels/src/numerics/philox-transform.ts), bit-identical on the
 * cpu and webgpu backends; {@link initUnitValues} computes the same values on the host.
 */
import { philoxFill, type Backend, type Buf } from "@zeromoe/kernels";
import { streamKey } from "../tensor/random.ts";
import type { Parameter, Unit } from "./unit.ts";

/** Host values of elements [start, start + out.length) of parameter `p` under `seed` (the values
 * {@link initUnit} writes, as f32; a Float64Array receives those f32 values exactly). */
export function initValues(p: Parameter, seed: number, start: number, out: Float32Array | Float64Array): void {
  switch (p.init.kind) {
    case "normal": {
      const f = out instanceof Float32Array ? out : new Float32Array(out.length);
      for (const r of windowRuns(p, start, out.length)) philoxFill(f.subarray(r.at, r.at + r.count), { dist: "normal", key: streamKey(seed, streamName(p)), start: r.start, std: p.init.std });
      if (f !== out) out.set(f);
      return;
    }
    case "ones":
      out.fill(1);
      return;
    case "zeros":
      out.fill(0);
      return;
  }
}

/** The name whose Philox stream parameter `p` draws from: its window's full parameter, else its own. */
function streamName(p: Parameter): string {
  return (p.init.kind === "normal" ? p.init.window?.key : undefined) ?? p.name;
}

/**
 * Elements [start, start + count) of parameter `p` as runs of its full matrix's Philox stream:
 * `at` (offset into the range), `count`, `start` (position in the full matrix). Without a window
 * one run at the same position; with one (nn/unit.ts `ParamWindow`), one run per row piece.
 */
function windowRuns(p: Parameter, start: number, count: number): { at: number; count: number; start: number }[] {
  const w = p.init.kind === "normal" ? p.init.window : undefined;
  if (!w) return [{ at: 0, count, start }];
  const cols = p.shape[1]!;
  const out: { at: number; count: number; start: number }[] = [];
  let k = start;
  while (k < start + count) {
    const r = Math.floor(k / cols);
    const c = k - r * cols;
    const n = Math.min(cols - c, start + count - k);
    out.push({ at: k - start, count: n, start: (w.r0 + r) * w.fullCols + w.c0 + c });
    k += n;
  }
  return out;
}

function checkRange(unit: Unit, start: number, count: number, what: string): void {
  if (count === 0) return;
  if (!Number.isInteger(start) || !Number.isInteger(count) || start < 0 || count < 0 || start + count > unit.numel) {
    throw new Error(`${what}(${unit.name}): range [${start}, ${start + count}) outside the unit's ${unit.numel} elements`);
  }
}

/**
 * The initial values of unit elements [start, start + count) (the unit's flat layout, nn/unit.ts) as
 * host f32, computed on the host: element k of the result is element start + k of the unit. The
 * reference for {@link initUnitRange} (equal bit for bit). An empty range (count 0) may start
 * anywhere (a ZeRO shard past the unit's end owns nothing).
 * @throws if a non-empty range lies outside the unit.
 */
export function initUnitValues(unit: Unit, seed: number, start: number, count: number): Float32Array {
  checkRange(unit, start, count, "initUnitValues");
  const out = new Float32Array(count);
  const end = start + count;
  for (const p of unit.params) {
    const lo = Math.max(start, p.offset);
    const hi = Math.min(end, p.offset + p.numel);
    if (lo < hi) initValues(p, seed, lo - p.offset, out.subarray(lo - start, hi - start));
  }
  return out;
}

/**
 * Initialise unit elements [start, start + count) into `dst` from element `dstOff` (default 0) on
 * `be` (any backend): one `randomFill` per normal parameter piece, one `fill` per ones/zeros piece,
 * rounded to `dst.dtype` (f32, f16 or bf16) as a cast would. Elements of `dst` outside the written
 * range are left as they are. An empty range may start anywhere.
 * @throws if a non-empty range lies outside the unit or `dst`.
 */
export function initUnitRange(be: Backend, unit: Unit, seed: number, start: number, count: number, dst: Buf, dstOff = 0): void {
  checkRange(unit, start, count, "initUnitRange");
  if (count === 0) return;
  if (dstOff < 0 || dstOff + count > dst.length) throw new Error(`initUnitRange(${unit.name}): ${count} elements from offset ${dstOff} do not fit the destination's ${dst.length}`);
  const end = start + count;
  for (const p of unit.params) {
    const lo = Math.max(start, p.offset);
    const hi = Math.min(end, p.offset + p.numel);
    if (lo >= hi) continue;
    const view = { buf: dst, off: dstOff + lo - start };
    switch (p.init.kind) {
      case "normal":
        for (const r of windowRuns(p, lo - p.offset, hi - lo)) be.randomFill({ buf: view.buf, off: view.off + r.at }, r.count, { dist: "normal", key: streamKey(seed, streamName(p)), start: r.start, std: p.init.std });
        break;
      case "ones":
        be.fill(view, 1, hi - lo);
        break;
      case "zeros":
        be.fill(view, 0, hi - lo);
        break;
    }
  }
}

/** Initialise every parameter of `unit` into `unit.data` on the unit's backend ({@link initUnitRange}
 * over the whole unit). @throws if `unit.data` is null. */
export function initUnit(unit: Unit, seed: number): void {
  if (!unit.data) throw new Error(`initUnit(${unit.name}): unit.data is null (allocate it first)`);
  initUnitRange(unit.be, unit, seed, 0, unit.numel, unit.data);
}
