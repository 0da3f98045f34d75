/**
 * Construction-time partitioning (like `deepspeed.zero.Init`): a unit whose parameters are sharded
 * is never materialised whole. Each rank generates only the values of its own element range from
 * the counter-based initialisation stream (core/src/nn/init.ts), which gives the same values as a
 * whole-model initialisation, one parameter slice at a time.
 */
import type { Backend, Buf } from "@zeromoe/kernels";
import { initUnitValues, writeHostF32 } from "../nn/init.ts";
import type { Unit } from "../nn/unit.ts";

/** Write the initial values of unit elements [start, start + count) into `dst` at offset 0
 * (casting to `dst.dtype`, nearest even). Elements past `count` are left as they are (zero). The
 * values come from one host pass over the range (nn/init.ts `initUnitValues`, threaded).
 * @throws if the range lies outside the unit. */
export function initUnitRange(be: Backend, unit: Unit, seed: number, start: number, count: number, dst: Buf): void {
  writeHostF32(be, dst, 0, initUnitValues(unit, seed, start, count));
}
