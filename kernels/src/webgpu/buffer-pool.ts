/**
 * A caching pool of freed GPUBuffers, keyed by exact byte size (a training step allocates and frees
 * the same shapes every step), in the manner of PyTorch's CUDA caching allocator: `free` returns a
 * buffer to the pool instead of destroying it and a later `alloc` of the same size takes it back.
 * This saves the FFI round trips and driver work of createBuffer/destroy, and — because the same
 * GPUBuffers recur — lets the bind-group cache (bindgroups.ts) hit instead of creating a bind group
 * per fresh buffer.
 *
 * Among free buffers of a size the one with the smallest id is handed out, so the assignment of
 * buffers to allocations depends only on which buffers are free, not on the order they were freed
 * in: a step that allocates and frees the same sequence as the previous one gets the same buffers
 * in the same places, and every dispatch finds its bind group cached.
 *
 * The pool only stores and hands out; the rules that make reuse correct are the batcher's
 * (commands.ts): a buffer enters the pool only once no unsubmitted command uses it, and a buffer
 * taken from it is zeroed by a clear recorded ahead of the batch that first uses it (the Backend
 * contract: `alloc` returns zeros).
 *
 * Pooled bytes are device memory the ledger's per-tag accounts do not count (they are free from the
 * program's point of view, as PyTorch's "reserved but unallocated"); `bytes` reports them and
 * `capacity` (fixed) and `limit` (recomputed at each give) bound them: a buffer that would exceed
 * either is destroyed instead. The backend's default bound is adaptive — the high-water mark of the
 * program's live buffer bytes, at least 1 GiB (webgpu/backend.ts `bufferPoolBytes`) — so a step
 * whose activations take many GiB keeps them pooled between steps instead of destroying and
 * re-creating them every step (each `createBuffer` of a large buffer costs the host a driver
 * allocation, ~0.5 ms per buffer measured on the H200, and wgpu zeroes it on the GPU anyway).
 */

/** Free GPUBuffers by byte size. */
export class BufferPool {
  private readonly free = new Map<number, GPUBuffer[]>();
  /** Bytes held in the pool now. */
  bytes = 0;
  /** Buffers handed back out (reuses) since creation. */
  reuses = 0;

  /** A second bound on the pooled bytes, asked at each give (null: none): the backend's adaptive
   * bound. */
  limit: (() => number) | null = null;

  /** @param capacity most bytes the pool holds (0 disables pooling; Infinity: only `limit`); may be
   * changed later (a lower value applies to buffers given afterwards)
   * @param idOf a stable id per buffer (the order of preference) */
  constructor(
    public capacity: number,
    private readonly idOf: (b: GPUBuffer) => number,
  ) {}

  /** The pooled buffer of exactly `bytes` bytes with the smallest id, or null. */
  take(bytes: number): GPUBuffer | null {
    const list = this.free.get(bytes);
    const b = list?.pop();
    if (!b) return null;
    this.bytes -= bytes;
    this.reuses++;
    return b;
  }

  /** Keep `b` for reuse; returns false (the caller destroys it) when it would exceed the capacity. */
  give(b: GPUBuffer): boolean {
    const room = this.limit ? Math.min(this.capacity, this.limit()) : this.capacity;
    if (this.bytes + b.size > room) return false;
    // each list is kept in descending id order, so pop() takes the smallest
    const list = this.free.get(b.size);
    if (!list) this.free.set(b.size, [b]);
    else {
      const id = this.idOf(b);
      let lo = 0;
      let hi = list.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (this.idOf(list[mid]!) > id) lo = mid + 1;
        else hi = mid;
      }
      list.splice(lo, 0, b);
    }
    this.bytes += b.size;
    return true;
  }

  /** Remove and return every pooled buffer (for destruction). */
  drain(): GPUBuffer[] {
    const out: GPUBuffer[] = [];
    for (const l of this.free.values()) out.push(...l);
    this.free.clear();
    this.bytes = 0;
    return out;
  }
}
