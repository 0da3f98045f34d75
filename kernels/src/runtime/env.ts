/**
 * Setting an environment variable for native code in this process (C `getenv`, e.g. a Vulkan
 * driver's). Neither runtime's `process.env` does that everywhere: Bun's assignment stays in
 * JavaScript, and in a Deno worker thread `process.env` is the thread's own copy (Node's worker
 * semantics). So: libc `setenv` through bun:ffi on Bun, `Deno.env.set` (the process environment) on
 * Deno; `process.env` of the calling thread is updated too.
 */
import { RUNTIME } from "./detect.ts";
import { dlopen, FFIType, ptr } from "./ffi.ts";

/** Set `name` to `value` in the native environment of the whole process (replacing a value).
 * @throws when libc cannot be opened (Bun) or the name is not a valid variable name. */
export function setNativeEnv(name: string, value: string): void {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new Error(`setNativeEnv: invalid environment variable name ${JSON.stringify(name)}`);
  if (RUNTIME === "deno") {
    (globalThis as unknown as { Deno: { env: { set(k: string, v: string): void } } }).Deno.env.set(name, value);
  } else {
    const libc = dlopen(process.platform === "darwin" ? "libc.dylib" : "libc.so.6", {
      setenv: { args: [FFIType.ptr, FFIType.ptr, FFIType.i32], returns: FFIType.i32 },
    });
    try {
      libc.symbols.setenv(ptr(Buffer.from(`${name}\0`, "utf8")), ptr(Buffer.from(`${value}\0`, "utf8")), 1);
    } finally {
      libc.close();
    }
  }
  process.env[name] = value;
}
