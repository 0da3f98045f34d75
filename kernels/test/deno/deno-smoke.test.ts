/**
 * Runs kernels/test/deno/smoke.ts under Deno (`node_modules/.bin/deno run --allow-read`), i.e. the
 * WebGpuBackend on Deno's built-in navigator.gpu against the CpuBackend, and requires exit code 0
 * with every check line "ok".
 */
import { expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";

const root = join(import.meta.dir, "..", "..", "..");
const deno = join(root, "node_modules", ".bin", "deno");

test("WebGpuBackend on Deno's navigator.gpu matches the cpu backend (matmul, softmax, adamw, attention forward and backward)", async () => {
  expect(existsSync(deno) ? "deno present" : `missing ${deno} (run bun install)`).toBe("deno present");
  const proc = Bun.spawn([deno, "run", "--allow-read", "--no-prompt", join(root, "kernels/test/deno/smoke.ts")], {
    cwd: root,
    env: { ...process.env, XDG_RUNTIME_DIR: process.env.XDG_RUNTIME_DIR ?? "/tmp", NO_COLOR: "1" },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  console.log(out.trim());
  if (code !== 0) console.error(err.trim());
  const checks = out.split("\n").filter((l) => /^(ok  |FAIL) /.test(l));
  expect(checks.length).toBeGreaterThanOrEqual(14);
  expect(checks.filter((l) => l.startsWith("FAIL"))).toEqual([]);
  expect(code).toBe(0);
}, 300_000);
