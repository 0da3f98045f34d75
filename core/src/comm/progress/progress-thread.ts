/**
 * The runtime's thread primitive behind the progress threads (docs/comm.md "Progress threads"):
 * start a worker from a module, exchange structured-clone messages with it (SharedArrayBuffers and
 * their views are shared, not copied), let it keep the process alive only while work is in flight,
 * and end it. Everything runtime-specific about the transports' threads is in this file, so a port
 * to another runtime replaces only it. Here: the runtime layer's worker threads
 * (kernels/src/runtime/threads.ts: Bun's Web `Worker`, node:worker_threads on Deno).
 */
import { serveParent, startWorker } from "@zeromoe/kernels/runtime";

/** A message sent to or from a progress thread (structured-clone data). */
export type ThreadMessage = Record<string, unknown>;

/** One started worker thread. */
export interface ProgressThread {
  /** Send `msg` to the thread; messages arrive in the order they are sent. */
  post(msg: ThreadMessage): void;
  /** Whether the thread keeps the process (or the rank's thread) alive: on while work is pending. */
  keepAlive(on: boolean): void;
  /** End the thread at once (work in it is abandoned). */
  terminate(): void;
}

/**
 * Start the module `url` as a worker thread. `onMessage` receives every message it posts, in order;
 * `onError` its uncaught error (the thread is dead afterwards). The thread starts not keeping the
 * process alive.
 */
export function startProgressThread(url: URL, onMessage: (msg: ThreadMessage) => void, onError: (e: Error) => void): ProgressThread {
  const w = startWorker<ThreadMessage, ThreadMessage>(url);
  w.onmessage = (e) => onMessage(e.data);
  w.onerror = (e) => onError(e.error instanceof Error ? e.error : new Error(e.message || "progress thread failed"));
  w.unref();
  return {
    post: (msg) => w.postMessage(msg),
    keepAlive: (on) => (on ? w.ref() : w.unref()),
    terminate: () => w.terminate(),
  };
}

/** Inside a progress thread: receive the parent's messages (in order) and post back. */
export function serveProgressThread(onMessage: (msg: ThreadMessage) => void): (msg: ThreadMessage) => void {
  return serveParent<ThreadMessage, ThreadMessage>(onMessage);
}
