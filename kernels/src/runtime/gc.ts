/**
 * A full garbage collection now, where the runtime allows it: `Bun.gc(true)` on Bun; on Deno the V8
 * `gc()` function exists only when Deno was started with `--v8-flags=--expose-gc`, else this does
 * nothing (returns false) — callers use it to lower a peak or run finalizers sooner, never for
 * correctness.
 */
import { RUNTIME } from "./detect.ts";

/** Collect garbage synchronously; true when a collection ran. */
export function collectGarbage(): boolean {
  if (RUNTIME === "bun") {
    Bun.gc(true);
    return true;
  }
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) return false;
  gc();
  return true;
}
