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
  const bound = new Map<PropertyKey, unknown>();
  return new Proxy(be, {
    get(target, prop, _receiver) {
      if (prop === "alloc") {
        return (dtype: DType, length: number, tag: MemTag) => {
          const want = DTYPE_BYTES[dtype] * length;
          // freed buffers a backend keeps for reuse are device memory too: counted, and released
          // before an allocation is refused
          let used = deviceBytesInUse(target) + pooledBytesOf(target);
          if (used + want > budget && releasePooled(target) > 0) used = deviceBytesInUse(target) + pooledBytesOf(target);
          if (used + want > budget) {
            throw new DeviceBudgetError(`device memory budget exceeded: allocating ${formatByteSize(want)} (${tag}) with ${formatByteSize(used)} in use, max_device_memory is ${formatByteSize(budget)} (${budget} bytes); offload optimizer states (zero_optimization.offload_optimizer.device "cpu"), use ZeRO stage 3, smaller micro-batches, activation checkpointing, or raise the budget`);
          }
          return alloc(dtype, length, tag);
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

/** Bytes of freed device buffers a backend keeps for reuse (the webgpu backend's buffer pool,
 * `stats().pooledBytes`); 0 for backends without one. */
function pooledBytesOf(be: Backend): number {
  const stats = (be as unknown as { stats?: () => { pooledBytes?: number } }).stats;
  if (typeof stats !== "function") return 0;
  const n = stats.call(be).pooledBytes;
  return typeof n === "number" ? n : 0;
}

/** Release a backend's pooled buffers (webgpu `releasePooledBuffers`); returns the bytes freed. */
function releasePooled(be: Backend): number {
  const release = (be as unknown as { releasePooledBuffers?: () => number }).releasePooledBuffers;
  return typeof release === "function" ? release.call(be) : 0;
}
