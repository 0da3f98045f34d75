/**
 * The tiled cross-entropy ops (crossEntropyTileStats/Finish/Backward) on buffers held in several
 * segments (webgpu/segments.ts): the same random inputs on a backend with the device's binding and
 * on one whose segments hold 1024 elements give bit-identical outputs — each row is computed by
 * the same kernel either way; seam rows (a row straddling a segment boundary: 97 columns do not
 * divide 1024) run on one-row temporaries.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Backend } from "../../src/backend.ts";
import { createGPU } from "../../src/ffi/index.ts";
import { WebGpuBackend } from "../../src/webgpu/index.ts";
import { xorshift32 } from "../../src/testing.ts";

const S = 1024;
let one: WebGpuBackend;
let seg: WebGpuBackend;

beforeAll(async () => {
  const g = createGPU();
  one = await WebGpuBackend.create(g);
  seg = await WebGpuBackend.create(g, { maxBindingBytes: 4 * S });
});
afterAll(() => {
  one.destroy();
  seg.destroy();
});

/** Run stats over two tiles, finish, then backward of both tiles; return every output. */
async function run(be: Backend, rows: number, cols: number, logits: Float32Array[], targets: Int32Array, off: number): Promise<number[][]> {
  const f = (n: number) => be.alloc("f32", n + off, "other");
  const tgt = be.alloc("i32", rows + off, "other");
  be.write({ buf: tgt, off }, targets);
  const tiles = logits.map((l) => {
    const b = f(rows * cols);
    be.write({ buf: b, off }, l);
    return b;
  });
  const stats = f(3 * rows);
  const lse = f(rows);
  const losses = f(rows);
  const g = f(1);
  be.write({ buf: g, off }, Float32Array.of(1.3));
  tiles.forEach((t, i) => be.crossEntropyTileStats({ buf: t, off }, { buf: tgt, off }, { buf: stats, off }, rows, cols, i * cols, -100, i === 0));
  be.crossEntropyTileFinish({ buf: stats, off }, { buf: tgt, off }, { buf: lse, off }, { buf: losses, off }, rows, 2 * cols, -100, 0.01);
  tiles.forEach((t, i) => be.crossEntropyTileBackward({ buf: t, off }, { buf: tgt, off }, { buf: lse, off }, { buf: g, off }, rows, cols, i * cols, -100, 0.25, 0.01));
  const out: number[][] = [];
  for (const [b, n] of [[stats, 3 * rows], [lse, rows], [losses, rows], ...tiles.map((t) => [t, rows * cols] as const)] as const) out.push(Array.from((await be.read({ buf: b, off }, n)) as Float32Array));
  for (const b of [tgt, stats, lse, losses, g, ...tiles]) be.free(b);
  return out;
}

describe("tiled cross-entropy on segmented buffers", () => {
  test("stats, finish and backward over rows crossing segment boundaries equal one binding bit for bit", async () => {
    const rows = 37;
    const cols = 97;
    const next = xorshift32(4242);
    const logits = [0, 1].map(() => Float32Array.from({ length: rows * cols }, () => 12 * (next() / 2 ** 32) - 6));
    const targets = Int32Array.from({ length: rows }, (_, i) => (i % 6 === 2 ? -100 : next() % (2 * cols)));
    const off = 301; // rows start mid-segment
    const a = await run(one, rows, cols, logits, targets, off);
    const b = await run(seg, rows, cols, logits, targets, off);
    expect(rows * cols + off).toBeGreaterThan(3 * S); // the tiles span 4 segments
    for (let k = 0; k < a.length; k++) expect(b[k]!.every((v, i) => Object.is(v, a[k]![i]))).toBe(true);
    expect(a[2]!.some((v) => v > 0)).toBe(true); // losses were computed
  });
});
