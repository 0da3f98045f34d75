/**
 * Worker threads from a module, the same on Bun and Deno: {@link startWorker} in the parent,
 * {@link serveParent} in the worker. Messages are structured clones (SharedArrayBuffers and their
 * views are shared, not copied) and arrive in the order they were posted.
 *
 * On Bun a thread is Bun's Web `Worker` (which has `ref`/`unref`). Deno's Web `Worker` has no
 * `unref` and keeps the process alive while it exists, so on Deno a thread is a
 * `node:worker_threads` Worker (which has both), and the worker side listens on its `parentPort`.
 * A module started with {@link startWorker} must therefore use {@link serveParent}, not the
 * global `onmessage`.
 */
import { parentPort, Worker as NodeWorker } from "node:worker_threads";
import { RUNTIME } from "./detect.ts";

/** A worker thread's uncaught error, as the parent sees it. */
export interface ThreadErrorEvent {
  /** The error's message. */
  message: string;
  /** The error itself where the runtime passes it (an Error on both runtimes in practice). */
  error: unknown;
}

/** One started worker thread (the part of the Web Worker interface the engine uses). */
export interface WorkerThread<In = unknown, Out = unknown> {
  /** Receives each message the thread posts, in order. */
  onmessage: ((e: { data: Out }) => void) | null;
  /** Receives the thread's uncaught error (the thread is dead afterwards). */
  onerror: ((e: ThreadErrorEvent) => void) | null;
  /** Send `msg` to the thread. */
  postMessage(msg: In): void;
  /** Let the thread keep the process (or the parent thread) alive — the default once started. */
  ref(): void;
  /** Let the process end while the thread idles. */
  unref(): void;
  /** End the thread at once (work in it is abandoned). */
  terminate(): void;
}

/** Start module `url` (a .ts or .js file URL) as a worker thread; it keeps the process alive until
 * {@link WorkerThread.unref} or terminate. @throws when the runtime cannot start a thread. */
export function startWorker<In = unknown, Out = unknown>(url: URL): WorkerThread<In, Out> {
  if (RUNTIME === "bun") return new Worker(url.href, { type: "module" }) as unknown as WorkerThread<In, Out>;
  const w = new NodeWorker(url);
  const t: WorkerThread<In, Out> = {
    onmessage: null,
    onerror: null,
    postMessage: (msg) => w.postMessage(msg),
    ref: () => w.ref(),
    unref: () => w.unref(),
    terminate: () => void w.terminate(),
  };
  w.on("message", (data: Out) => t.onmessage?.({ data }));
  w.on("error", (error: unknown) => t.onerror?.({ message: error instanceof Error ? error.message : String(error), error }));
  return t;
}

/** Inside a thread started by {@link startWorker}: call `onMessage` with each message the parent
 * posts (in order); returns the function that posts to the parent. @throws on the main thread. */
export function serveParent<In = unknown, Out = unknown>(onMessage: (msg: In) => void): (msg: Out) => void {
  if (RUNTIME === "bun") {
    const scope = globalThis as unknown as { onmessage: ((e: MessageEvent) => void) | null; postMessage(m: unknown): void };
    scope.onmessage = (e: MessageEvent) => onMessage(e.data as In);
    return (msg) => scope.postMessage(msg);
  }
  const port = parentPort;
  if (port === null) throw new Error("serveParent: not inside a worker thread started by startWorker (no parentPort)");
  port.on("message", (m: In) => onMessage(m));
  return (msg) => port.postMessage(msg);
}
