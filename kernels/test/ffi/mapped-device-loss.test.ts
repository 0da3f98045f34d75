/**
 * Mapped buffers of a destroyed device (kernels/src/ffi/buffer.ts): getMappedRange throws an
 * OperationError, unmap and destroy are no-ops for the mapping, and earlier views are detached —
 * instead of wgpu-native aborting the whole process.
 *
 * Regression: when one rank of a multi-rank webgpu run failed, its backend was torn down while a
 * shard read had just finished mapping; the getMappedRange that followed called
 * wgpuBufferGetConstMappedRange on a destroyed buffer, wgpu-native panicked ("Buffer with 'zeromoe
 * staging' label has been destroyed") and Bun died with SIGABRT, hiding the real error. The
 * scenario runs in a child process so that a regression fails this test instead of killing the
 * test runner.
 */
import { expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const SCRIPT = `
import { openDevice, randomArray } from ${JSON.stringify(resolve(import.meta.dir, "setup.ts"))};
const { device } = await openDevice();
const data = randomArray(13, 5);
const a = device.createBuffer({ size: 52, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
const b = device.createBuffer({ size: 52, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
device.queue.writeBuffer(a, 0, data);
await a.mapAsync(GPUMapMode.READ);
await b.mapAsync(GPUMapMode.READ);
const view = new Float32Array(b.getMappedRange());
const before = view.length;
device.destroy();
let err = "none";
try { a.getMappedRange(); } catch (e) { err = e.name + ": " + e.message; }
a.unmap();
b.destroy();
a.destroy();
console.log(JSON.stringify({ before, after: view.length, err, state: a.mapState }));
`;

test("a buffer mapped when its device is destroyed: getMappedRange throws, no process abort", async () => {
  const dir = mkdtempSync(join(tmpdir(), "zeromoe-mapped-loss-"));
  try {
    const file = join(dir, "scenario.ts");
    writeFileSync(file, SCRIPT);
    const p = Bun.spawn(["bun", file], { stdout: "pipe", stderr: "pipe" });
    const [out, errText, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
    expect(errText).not.toContain("panicked");
    expect(code).toBe(0);
    const r = JSON.parse(out.trim().split("\n").at(-1)!) as { before: number; after: number; err: string; state: string };
    expect(r.before).toBe(13);
    expect(r.after).toBe(0); // detached, not reading freed memory
    expect(r.err).toMatch(/^OperationError: getMappedRange: .*device is lost or destroyed/);
    expect(r.state).toBe("unmapped");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 300_000);
