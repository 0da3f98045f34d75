/**
 * The runtime layer (`@zeromoe/kernels/runtime`): everything in kernels/, core/ and plugins/ that
 * Bun and Deno spell differently goes through these files, one per concern — detect.ts (which
 * runtime), ffi.ts (bun:ffi, Bun-only bindings), process.ts (child processes, PATH, running a
 * script), modules.ts (package resolution, CommonJS), serialize.ts (structured serialization), threads.ts (worker threads),
 * sleep.ts, gc.ts, env.ts (native environment), system-error.ts (errno codes). What both runtimes share through node: APIs (node:fs, node:path,
 * node:worker_threads, node:crypto, node:zlib) is used directly. core/test/runtime/boundary.test.ts
 * checks that no other source file names a runtime-specific API.
 */
export { RUNTIME, runtimeLabel, runtimeVersion, type RuntimeName } from "./detect.ts";
export { spawn, which, scriptArgv, type SpawnOptions, type StdioMode, type Subprocess } from "./process.ts";
export { resolvePackage, requireModule } from "./modules.ts";
export { serialize, deserialize } from "./serialize.ts";
export { sleep, sleepSync } from "./sleep.ts";
export { startWorker, serveParent, type WorkerThread, type ThreadErrorEvent } from "./threads.ts";
export { collectGarbage } from "./gc.ts";
export { setNativeEnv } from "./env.ts";
export { withErrnoCode } from "./system-error.ts";
export { FFI_AVAILABLE, FfiUnavailableError } from "./ffi.ts";
