/**
 * Vulkan drivers probe window-system integration when an instance is created; Mesa (lavapipe) then
 * prints "error: XDG_RUNTIME_DIR is invalid or not set in the environment." to stderr when that
 * variable is missing (CI, containers, cron). A compute-only engine has no windows, so before
 * wgpu-native is loaded we point XDG_RUNTIME_DIR at a private 0700 directory — in the *native*
 * environment (libc `setenv`), since assigning `process.env` in Bun does not reach C `getenv`.
 * An existing value is never replaced. kernels/src/runtime/env.ts sets it for both runtimes;
 * kernels/src/select.ts calls this before Deno's navigator.gpu is first read.
 */
import { mkdirSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { setNativeEnv } from "../runtime/env.ts";

let done = false;

/** Ensure XDG_RUNTIME_DIR is set for native code (idempotent; failures are ignored: the variable
 * only silences a driver warning). */
export function ensureRuntimeDir(): void {
  if (done) return;
  done = true;
  if (process.env.XDG_RUNTIME_DIR) return;
  try {
    const dir = join(tmpdir(), `zeromoe-runtime-${userInfo().uid}`);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    setNativeEnv("XDG_RUNTIME_DIR", dir);
  } catch {
    // best effort
  }
}
