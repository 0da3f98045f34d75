/**
 * Construction-time partitioning (like `deepspeed.zero.Init`): a unit whose parameters are sharded
 * is never materialised whole. Each rank generates only the values of its own element range from
 * the counter-based initialisation stream (core/src/nn/init.ts), which gives the same values as a
 * whole-model initialisation, one parameter slice at a time.
 */
import type { Backend, Buf } from "@zeromoe/kernels";
import { initValues } from "../nn/init.ts";
import type { Unit } from "../nn/unit.ts";

/** Write the initial values of unit elements [start, start + count) into `dst` at offset 0
 * (casting to `dst.dtype`, nearest even). Elements past `count` are left as they are (zero). */
export function initUnitRange(be: Backend, unit: Unit, seed: number, start: number, count: number, dst: Buf): void {
  const end = start + count;
  for (const p of unit.params) {
    const lo = Math.max(start, p.offset);
    const hi = Math.min(end, p.offset + p.numel);
    if (lo >= hi) continue;
    const host = new Float64Array(hi - lo);
    initValues(p, seed, lo - p.offset, host);
    if (dst.dtype === "f32") {
      be.write({ buf: dst, off: lo - start }, host);
    } else {
      const tmp = be.alloc("f32", hi - lo, "other");
      be.write({ buf: tmp, off: 0 }, host);
      be.cast({ buf: tmp, off: 0 }, { buf: dst, off: lo - start }, hi - lo);
      be.free(tmp);
    }
  }
}
