/**
 * One host read for many small device tensors (the MoE statistics and expert counts of every layer
 * of a forward): the tensors are copied into one staging buffer per dtype with buffer copies, then
 * read once — instead of one device round trip per tensor. The step's allowed host reads (issue 11:
 * "MoE statistics, batched once per step") go through here.
 */
import type { Backend, Buf, HostArray } from "@zeromoe/kernels";
import type { Tensor } from "../../tensor/tensor.ts";

/**
 * Host copies of `tensors` (each its own typed array: Int32Array, Uint32Array, Float32Array…),
 * with one `Backend.read` per distinct dtype among them (the expert counts and the routers' f32
 * statistics: two). The reads are issued together and awaited together, so the host waits for the
 * device once, not once per dtype (on the H200 each extra wait left the GPU idle ~1.4 ms at the end
 * of every mixtral-med forward). Tensors on different backends are read per backend.
 * @throws if a tensor was freed.
 */
export async function readTensorsBatched(tensors: readonly Tensor[]): Promise<HostArray[]> {
  const out: HostArray[] = new Array(tensors.length);
  const groups: { t: Tensor; idx: number[] }[] = [];
  tensors.forEach((t, i) => {
    const g = groups.find((x) => x.t.be === t.be && x.t.dtype === t.dtype);
    if (g) g.idx.push(i);
    else groups.push({ t, idx: [i] });
  });
  const reads: Promise<void>[] = [];
  const staged: { be: Backend; buf: Buf }[] = [];
  try {
    for (const { idx } of groups) {
      const first = tensors[idx[0]!]!;
      const be = first.be;
      const total = idx.reduce((a, i) => a + tensors[i]!.numel, 0);
      if (idx.length === 1 || total === 0) {
        for (const i of idx) reads.push(tensors[i]!.toArray().then((v) => void (out[i] = v)));
        continue;
      }
      const buf = be.alloc(first.dtype, total, "other");
      staged.push({ be, buf });
      let off = 0;
      for (const i of idx) {
        const t = tensors[i]!;
        if (t.numel > 0) be.copy(t.view, { buf, off }, t.numel);
        off += t.numel;
      }
      reads.push(
        be.read({ buf, off: 0 }, total).then((all) => {
          let o = 0;
          for (const i of idx) {
            const n = tensors[i]!.numel;
            out[i] = all.slice(o, o + n) as HostArray;
            o += n;
          }
        }),
      );
    }
    // every read is in flight before the first is awaited; allSettled so no staging buffer is freed
    // while a read of it is still pending
    const settled = await Promise.allSettled(reads);
    for (const r of settled) if (r.status === "rejected") throw r.reason;
  } finally {
    for (const { be, buf } of staged) be.free(buf);
  }
  return out;
}

/** Reads waiting for the next batched read (deferRead). One queue per process (one rank). */
const deferred: { tensors: Tensor[]; done: (values: HostArray[]) => void }[] = [];

/**
 * Queue a read of `tensors` for the next {@link flushDeferredReads} (the MoE statistics of a layer:
 * the router hands them over instead of reading them). The tensors are retained until then and
 * disposed after; `done` receives their host copies, in queue order with the other deferred reads.
 */
export function deferRead(tensors: readonly Tensor[], done: (values: HostArray[]) => void): void {
  deferred.push({ tensors: tensors.map((t) => t.retain()), done });
}

/** Deferred reads waiting (for tests and diagnostics). */
export function deferredReadCount(): number {
  return deferred.length;
}

/** Deferred reads issued by {@link startDeferredReads} and not yet awaited by a flush. */
let started: Promise<void> | null = null;

/**
 * Issue the read of every deferred tensor now without waiting for it: the host goes on recording
 * while the device gets there, and the callbacks run when the copies arrive. The models call it at
 * the end of a forward whose load-balancing loss needed no host read (aux-fractions.ts), so the
 * statistics are still read once per forward but nothing waits for them. The next
 * {@link flushDeferredReads} first waits for these reads (and rethrows their error).
 */
export function startDeferredReads(): void {
  if (deferred.length === 0) return;
  const prev = started;
  const jobs = deferred.splice(0);
  const run = (async () => {
    if (prev) await prev;
    await readJobs(jobs, []);
  })();
  run.catch(() => {}); // surfaced by the next flushDeferredReads
  started = run;
}

/**
 * Read every deferred tensor and `extra` in one batched read per dtype ({@link readTensorsBatched}),
 * call the deferred callbacks in queue order, dispose the deferred tensors, and return `extra`'s
 * host copies — after the reads {@link startDeferredReads} issued have arrived. The models call it
 * at the end of a forward when they read the layers' expert counts (for the load-balancing loss);
 * the moe plugin when it reduces a step.
 */
export async function flushDeferredReads(extra: readonly Tensor[] = []): Promise<HostArray[]> {
  const prev = started;
  started = null;
  if (prev) await prev;
  return readJobs(deferred.splice(0), extra);
}

async function readJobs(jobs: { tensors: Tensor[]; done: (values: HostArray[]) => void }[], extra: readonly Tensor[]): Promise<HostArray[]> {
  const all = [...extra, ...jobs.flatMap((j) => j.tensors)];
  try {
    const got = all.length > 0 ? await readTensorsBatched(all) : [];
    let i = extra.length;
    for (const j of jobs) {
      const vals = got.slice(i, i + j.tensors.length);
      i += j.tensors.length;
      j.done(vals);
    }
    return got.slice(0, extra.length);
  } finally {
    for (const j of jobs) for (const t of j.tensors) t.dispose();
  }
}
