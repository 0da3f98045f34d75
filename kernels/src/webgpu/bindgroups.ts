/**
 * Cache of bind groups keyed by pipeline and bound buffers.
 *
 * Creating a bind group costs an FFI round trip (about 20 µs through bun:ffi measured here), while
 * a training step replays the same ops on the same buffers (the buffer pool, buffer-pool.ts, hands
 * the same GPUBuffers back each step). Binding 0 (the params uniform) uses a dynamic offset, so one
 * bind group serves every uniform slot.
 *
 * The key is the path pipeline id → id of each bound buffer, looked up through nested maps with
 * number keys (a lookup per dispatch, so no key string is built). Entries naming a buffer are dropped
 * when that buffer is destroyed ({@link BindGroupCache.forget}); the cache is cleared when it
 * exceeds its capacity.
 */

interface Node {
  next: Map<number, Node> | null;
  group: GPUBindGroup | null;
}

/** Bind groups by (pipeline id, buffer ids…). */
export class BindGroupCache {
  private root = new Map<number, Node>();
  /** The leaves that bind each buffer id. */
  private byBuffer = new Map<number, Node[]>();
  private count = 0;
  private nodes = 0;
  /** Lookups served from the cache / created. */
  hits = 0;
  misses = 0;

  constructor(readonly capacity = 8192) {}

  /** The bind group for pipeline `pipelineId` binding buffers `bufIds` (in binding order), created
   * by `make` on a miss. */
  get(pipelineId: number, bufIds: readonly number[], make: () => GPUBindGroup): GPUBindGroup {
    let node = this.child(this.root, pipelineId);
    for (let i = 0; i < bufIds.length; i++) node = this.child((node.next ??= new Map()), bufIds[i]!);
    if (node.group) {
      this.hits++;
      return node.group;
    }
    if (this.count >= this.capacity || this.nodes >= 4 * this.capacity) {
      this.clear();
      return this.get(pipelineId, bufIds, make); // counts the miss once, in the fresh cache
    }
    this.misses++;
    const g = make();
    node.group = g;
    this.count++;
    for (const id of bufIds) {
      const l = this.byBuffer.get(id);
      if (l) l.push(node);
      else this.byBuffer.set(id, [node]);
    }
    return g;
  }

  private child(m: Map<number, Node>, key: number): Node {
    let n = m.get(key);
    if (!n) {
      n = { next: null, group: null };
      m.set(key, n);
      this.nodes++;
    }
    return n;
  }

  /** Drop every bind group that binds buffer `bufId`. */
  forget(bufId: number): void {
    const leaves = this.byBuffer.get(bufId);
    if (!leaves) return;
    for (const n of leaves) {
      if (n.group) {
        n.group = null;
        this.count--;
      }
    }
    this.byBuffer.delete(bufId);
  }

  /** Drop everything. */
  clear(): void {
    this.root = new Map();
    this.byBuffer = new Map();
    this.count = 0;
    this.nodes = 0;
  }

  /** Number of cached bind groups. */
  get size(): number {
    return this.count;
  }
}
