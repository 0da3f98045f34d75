/**
 * Cache of bind groups keyed by pipeline layout and bound buffers.
 *
 * Creating a bind group costs an FFI round trip (about 20 µs through bun:ffi measured here), while
 * a training step replays the same ops on the same buffers. Binding 0 (the params uniform) uses a
 * dynamic offset, so one bind group serves every uniform slot. Entries naming a buffer are dropped
 * when that buffer is freed ({@link BindGroupCache.forget}); the cache is cleared when it exceeds
 * its capacity.
 */

/** Bind groups by key `layoutId|bufId,bufId,…`. */
export class BindGroupCache {
  private readonly groups = new Map<string, GPUBindGroup>();
  private readonly byBuffer = new Map<number, string[]>();
  /** Lookups served from the cache / created. */
  hits = 0;
  misses = 0;

  constructor(readonly capacity = 8192) {}

  /** The bind group for `key`, created by `make` on a miss; `bufIds` are the buffers it binds. */
  get(key: string, bufIds: readonly number[], make: () => GPUBindGroup): GPUBindGroup {
    const hit = this.groups.get(key);
    if (hit) {
      this.hits++;
      return hit;
    }
    this.misses++;
    if (this.groups.size >= this.capacity) this.clear();
    const g = make();
    this.groups.set(key, g);
    for (const id of bufIds) {
      const l = this.byBuffer.get(id);
      if (l) l.push(key);
      else this.byBuffer.set(id, [key]);
    }
    return g;
  }

  /** Drop every bind group that binds buffer `bufId`. */
  forget(bufId: number): void {
    const keys = this.byBuffer.get(bufId);
    if (!keys) return;
    for (const k of keys) this.groups.delete(k);
    this.byBuffer.delete(bufId);
  }

  /** Drop everything. */
  clear(): void {
    this.groups.clear();
    this.byBuffer.clear();
  }

  /** Number of cached bind groups. */
  get size(): number {
    return this.groups.size;
  }
}
