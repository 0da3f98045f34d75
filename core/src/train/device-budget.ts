/**
 * The device memory budget at run time (`max_device_memory`, `--max-device-memory`): a backend
 * whose `alloc` refuses to go past the budget — everything a rank allocates on the device counts
 * (model states, activations, gathered parameters, communication buffers), by the backend's own
 * per-tag accounting (`memory().current`). The up-front check (memory-check.ts `checkDeviceBudget`)
 * covers the model states before anything runs; this catches what comes on top.
 */
import { DTYPE_BYTES, type Backend, type DType, type MemTag } from "@zeromoe/kernels";
import { formatByteSize } from "../config/byte-size.ts";

/** An allocation that would exceed the device budget. */
export class DeviceBudgetError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DeviceBudgetError";
  }
}

/** Bytes in use on `be` now (sum over tags). */
export function deviceBytesInUse(be: Backend): number {
  let s = 0;
  for (const v of Object.values(be.memory().current)) s += v ?? 0;
  return s;
}

/**
 * `be` with `alloc` limited to `budget` bytes in use (see the module comment); every other member is
 * the backend's own. `budget` null returns `be` unchanged.
 * @throws DeviceBudgetError (from alloc) naming the tag, the request, the bytes in use and the budget
 */
export function withDeviceBudget<B extends Backend>(be: B, budget: number | null): B {
  if (budget === null) return be;
  const alloc = be.alloc.bind(be);
  // the backend's buffer pool, if it has one (webgpu), resolved once rather than per allocation
  const pooled = optionalMethod(be, "pooledBytes");
  const releasePooled = optionalMethod(be, "releasePooledBuffers");
  const inUse = () => deviceBytesInUse(be) + (pooled ? pooled() : 0);
  const bound = new Map<PropertyKey, unknown>();
  return new Proxy(be, {
    get(target, prop, _receiver) {
      if (prop === "alloc") {
        return (dtype: DType, length: number, tag: MemTag, contents?: "zeros" | "any") => {
          const want = DTYPE_BYTES[dtype] * length;
          // freed buffers a backend keeps for reuse are device memory too: counted, and released
          // before an allocation is refused
          let used = inUse();
          if (used + want > budget && releasePooled && releasePooled() > 0) used = inUse();
          if (used + want > budget) {
            throw new DeviceBudgetError(`device memory budget exceeded: allocating ${formatByteSize(want)} (${tag}) with ${formatByteSize(used)} in use, max_device_memory is ${formatByteSize(budget)} (${budget} bytes); offload optimizer states (zero_optimization.offload_optimizer.device "cpu"), use ZeRO stage 3, smaller micro-batches, activation checkpointing, or raise the budget`);
          }
          return alloc(dtype, length, tag, contents);
        };
      }
      const v = Reflect.get(target, prop, target);
      if (typeof v !== "function") return v;
      let f = bound.get(prop);
      if (!f) {
        f = (v as (...a: unknown[]) => unknown).bind(target);
        bound.set(prop, f);
      }
      return f;
    },
  });
}

/** `be[name]` bound to `be` when the backend has that method (the webgpu backend's
 * `pooledBytes` / `releasePooledBuffers`: bytes of freed buffers kept for reuse, and their release),
 * else null. */
function optionalMethod(be: Backend, name: "pooledBytes" | "releasePooledBuffers"): (() => number) | null {
  const f = (be as unknown as Record<string, unknown>)[name];
  return typeof f === "function" ? (f as () => number).bind(be) : null;
}
