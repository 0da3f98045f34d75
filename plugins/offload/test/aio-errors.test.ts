/**
 * A write the file system cuts short (a full drive, a file-size limit) reports the system error with
 * its code and the file, not an anonymous "short write": Aio continues a partial write, so the next
 * call returns the errno (here EFBIG under `ulimit -f`, as ENOSPC on a full drive; train then prints
 * it without a stack). Before, the first partial writev threw "nvme offload: short write of 4096 of
 * 16384 bytes at offset 98304" with no code and no path, and train exited 1 with a stack trace.
 */
import { afterAll, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { scriptArgv, spawn } from "@zeromoe/kernels/runtime";

const ROOT = mkdtempSync(join(tmpdir(), "offload-aio-err-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));
const ENTRY = resolve(import.meta.dirname, "fixtures/aio-fsize-entry.ts");

// SIGXFSZ ignored: the write fails with EFBIG instead of ending the process (Bun ignores it
// itself; Deno does not, and Deno also writes its own cache files under the limit)
async function underLimit(kib: number, file: string, bytes: number, via: "aio" | "param" = "aio"): Promise<{ ok?: boolean; code?: string | null; message?: string }> {
  const p = spawn(["bash", "-c", `trap "" XFSZ; ulimit -f ${kib} && exec "$0" "$@"`, ...scriptArgv(ENTRY), file, String(bytes), via], { stdout: "pipe", stderr: "pipe" });
  const [o, e] = await Promise.all([new Response(p.stdout!).text(), new Response(p.stderr!).text()]);
  expect(await p.exited, e).toBe(0);
  return JSON.parse(o.trim().split("\n").pop()!);
}

test("a write past the file-size limit: EFBIG naming the file (partial writes continued)", async () => {
  const file = join(ROOT, "unit.optim");
  // 100 KiB limit, 300 KiB written in 4 KiB blocks, 4 per request over 2 streams: requests straddle the limit
  const r = await underLimit(100, file, 300 * 1024 + 13);
  expect(r.code).toBe("EFBIG");
  expect(r.message).toMatch(/^EFBIG: .*: /);
  expect(r.message).toContain(file);
}, 300_000);

test("within the limit: written whole", async () => {
  const file = join(ROOT, "small.optim");
  expect(await underLimit(100, file, 99 * 1024 + 7)).toEqual({ ok: true });
  expect(statSync(file).size).toBe(99 * 1024 + 7);
}, 300_000);

test("an NVMe parameter shard larger than the file-size limit: refused at creation naming offload_param.nvme_path and the file", async () => {
  // (ftruncate fails with EFBIG; the write path's ENOSPC on a full drive was checked by hand on a
  // 2 MiB tmpfs: "error: ENOSPC: no space left on device, write: <dir>/embed.param", no stack)
  const file = join(ROOT, "unit.param");
  const r = (await underLimit(100, file, 4 * 40_000, "param")) as { name?: string; message?: string };
  expect(r.name).toBe("ConfigError");
  expect(r.message).toContain("zero_optimization.offload_param.nvme_path");
  expect(r.message).toContain(file);
  expect(r.message).toContain("EFBIG");
}, 300_000);
