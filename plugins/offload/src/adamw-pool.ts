/**
 * The host optimizer's thread pool: AdamW over one unit's optimizer range split into contiguous
 * slices, one per thread — the calling thread takes the first slice, Bun Workers the others — on
 * shared memory (SharedArrayBuffer views are posted, nothing is copied). ZeRO-Offload's CPU Adam
 * does the same with OpenMP threads (Ren et al., USENIX ATC'21 §4.1). AdamW is elementwise, so the
 * result does not depend on the split (host-adamw.ts).
 */
import type { AdamWParams } from "@zeromoe/kernels";
import { adamwHost, type GradDtype } from "./host-adamw.ts";
import { startWorker, type WorkerThread } from "@zeromoe/kernels/runtime";

/** A worker's answer to one {@link AdamWJob}: done, or the error it threw. */
export interface AdamWReply {
  id: number;
  ok: boolean;
  error?: string;
}

/** A typed-array view of shared memory, as posted to a worker: byte offset, element length. */
export interface SharedRange {
  sab: SharedArrayBuffer;
  off: number;
  len: number;
}

/** One slice for a worker. */
export interface AdamWJob {
  id: number;
  master: SharedRange;
  m: SharedRange;
  v: SharedRange;
  grad: SharedRange;
  gradDtype: GradDtype;
  p16: SharedRange | null;
  p16Dtype: "bf16" | "f16";
  lo: number;
  hi: number;
  hp: AdamWParams;
}

/** Pool options. */
export interface AdamWPoolOptions {
  /** Threads including the caller (≥ 1). */
  threads: number;
  /** Fewest elements per thread worth a hand-off (smaller updates run on the caller alone).
   * Default 16384. */
  minPerThread?: number;
}

function shared(a: Float32Array | Uint16Array): SharedRange {
  if (!(a.buffer instanceof SharedArrayBuffer)) throw new Error("host AdamW pool: arrays must live in a SharedArrayBuffer to be shared with worker threads");
  return { sab: a.buffer, off: a.byteOffset, len: a.length };
}

/** A pool of AdamW threads (see the module comment). */
export class HostAdamWPool {
  readonly threads: number;
  readonly minPerThread: number;
  private workers: WorkerThread<AdamWJob, AdamWReply>[] = [];
  private nextId = 1;
  private pending = new Map<number, { resolve: () => void; reject: (e: Error) => void }>();

  constructor(opts: AdamWPoolOptions) {
    if (!Number.isInteger(opts.threads) || opts.threads < 1) throw new Error(`host AdamW pool: threads must be a positive integer, got ${opts.threads}`);
    this.threads = opts.threads;
    this.minPerThread = Math.max(1, opts.minPerThread ?? 16384);
  }

  private worker(i: number): WorkerThread<AdamWJob, AdamWReply> {
    let w = this.workers[i];
    if (!w) {
      w = startWorker<AdamWJob, AdamWReply>(new URL("./adamw-worker.ts", import.meta.url));
      w.onmessage = (e) => {
        const p = this.pending.get(e.data.id);
        if (!p) return;
        this.pending.delete(e.data.id);
        if (e.data.ok) p.resolve();
        else p.reject(new Error(`host AdamW worker: ${e.data.error}`));
      };
      w.onerror = (e) => {
        for (const p of this.pending.values()) p.reject(new Error(`host AdamW worker failed: ${e.message}`));
        this.pending.clear();
      };
      // not unref'd: a rank awaiting a slice must keep its event loop alive; close() ends them
      this.workers[i] = w;
    }
    return w;
  }

  /** Slices of [0, n) for up to `threads` threads, each ≥ minPerThread elements (multiples of 16). */
  slices(n: number): [number, number][] {
    const t = Math.max(1, Math.min(this.threads, Math.floor(n / this.minPerThread)));
    const per = Math.ceil(n / t / 16) * 16;
    const out: [number, number][] = [];
    for (let lo = 0; lo < n; lo += per) out.push([lo, Math.min(n, lo + per)]);
    return out.length > 0 ? out : [[0, 0]];
  }

  /**
   * AdamW over elements [0, n) (host-adamw.ts `adamwHost`). With more than one slice, every array
   * must be a view of a SharedArrayBuffer.
   */
  async step(
    master: Float32Array, grad: Float32Array | Uint16Array, gradDtype: GradDtype, m: Float32Array, v: Float32Array,
    p16: Uint16Array | null, p16Dtype: "bf16" | "f16", n: number, hp: AdamWParams,
  ): Promise<void> {
    const sl = this.slices(n);
    if (sl.length === 1) {
      adamwHost(master, grad, gradDtype, m, v, p16, p16Dtype, 0, n, hp);
      return;
    }
    const base = { master: shared(master), m: shared(m), v: shared(v), grad: shared(grad), gradDtype, p16: p16 ? shared(p16) : null, p16Dtype, hp };
    const done: Promise<void>[] = [];
    for (let i = 1; i < sl.length; i++) {
      const id = this.nextId++;
      done.push(new Promise<void>((resolve, reject) => this.pending.set(id, { resolve, reject })));
      this.worker(i - 1).postMessage({ ...base, id, lo: sl[i]![0], hi: sl[i]![1] } satisfies AdamWJob);
    }
    adamwHost(master, grad, gradDtype, m, v, p16, p16Dtype, sl[0]![0], sl[0]![1], hp);
    await Promise.all(done);
  }

  /** Stop the worker threads. */
  close(): void {
    for (const w of this.workers) w?.terminate();
    this.workers = [];
    for (const p of this.pending.values()) p.reject(new Error("host AdamW pool closed"));
    this.pending.clear();
  }
}
