/**
 * Outputs allocated without zeroing (`Backend.alloc(…, "any")`, tensor.ts `uninit`, tape.ts
 * `gradTarget(…, "overwrite", fullWrite)`): on the webgpu backend a recycled buffer then keeps what
 * it held, so every op that uses them must set every element. Here the pool is first filled with
 * NaN buffers of the sizes the ops ask for; `linear`, `siluMul` and `groupedLinear` (host and device
 * group offsets, an expert without rows), forward and every gradient, must still equal the cpu
 * backend's (no NaN can leak through an element an op skipped). Awkward sizes, random data.
 */
import { describe, expect, test } from "bun:test";
import { CpuBackend, createBackend, type Backend } from "@zeromoe/kernels";
import { groupedLinear } from "../src/nn/moe/grouped-linear.ts";
import { backward, fromArray, linear, mul, normalFill, siluMul, streamKey, sum, Variable } from "../src/tensor/index.ts";

const ROWS = 37;
const IN = 29;
const OUT = 41;
const COUNTS = [11, 0, 26];

function randn(n: number, name: string): Float32Array {
  const a = new Float32Array(n);
  normalFill(a, streamKey(41, name), 0, 1);
  return a;
}

/** Fill the backend's pool with NaN buffers of every size the ops below allocate. */
async function poison(be: Backend): Promise<void> {
  const G = COUNTS.length;
  const sizes = [ROWS * OUT, ROWS * IN, G * OUT * IN, OUT * IN, ROWS * OUT * 2, 1];
  const bufs = sizes.flatMap((n) => Array.from({ length: 6 }, () => be.alloc("f32", n, "activation")));
  for (const b of bufs) be.fill({ buf: b, off: 0 }, Number.NaN, b.length);
  await be.flush();
  for (const b of bufs) be.free(b);
}

async function run(be: Backend, deviceOffsets: boolean): Promise<Float32Array[]> {
  await poison(be);
  const x = new Variable(be, randn(ROWS * IN, "x"), [ROWS, IN], { name: "x" });
  const w = new Variable(be, randn(OUT * IN, "w"), [OUT, IN], { name: "w" });
  const ws = COUNTS.map((_, g) => new Variable(be, randn(OUT * IN, `w${g}`), [OUT, IN], { name: `w${g}` }));
  const offs = Int32Array.from([0, ...COUNTS.map((_, i) => COUNTS.slice(0, i + 1).reduce((a, b) => a + b, 0))]);
  const y = linear(x.tensor, w.tensor); // [ROWS, OUT]
  const gy = groupedLinear(x.tensor, ws.map((v) => v.tensor), fromArray(be, offs, [offs.length], "i32"), deviceOffsets ? null : COUNTS);
  const s = siluMul(y, gy);
  const ys = Float32Array.from(await s.toArray());
  await backward(sum(mul(s, fromArray(be, randn(ROWS * OUT, "g"), [ROWS, OUT]))));
  const out = [ys, Float32Array.from(await x.grad()), Float32Array.from(await w.grad())];
  for (const v of ws) out.push(Float32Array.from(await v.grad()));
  for (const v of [x, w, ...ws]) v.dispose();
  return out;
}

describe("outputs allocated without zeroing", () => {
  test("webgpu: alloc contents 'any' hands back a recycled buffer as it was; the default zeroes it", async () => {
    const { backend: be } = await createBackend("webgpu");
    const n = 1013;
    const a = be.alloc("f32", n, "activation");
    const data = randn(n, "stale");
    be.write({ buf: a, off: 0 }, data);
    await be.flush();
    be.free(a);
    const b = be.alloc("f32", n, "activation", "any");
    expect(Array.from((await be.read({ buf: b, off: 0 }, n)) as Float32Array)).toEqual(Array.from(data));
    be.free(b);
    const c = be.alloc("f32", n, "activation");
    expect(((await be.read({ buf: c, off: 0 }, n)) as Float32Array).every((v) => v === 0)).toBe(true);
    (be as Backend & { destroy?: () => void }).destroy?.();
    const cpu = new CpuBackend();
    const d = (cpu as Backend).alloc("f32", 7, "activation", "any");
    expect(Array.from((await cpu.read({ buf: d, off: 0 }, 7)) as Float32Array)).toEqual([0, 0, 0, 0, 0, 0, 0]);
  });

  for (const deviceOffsets of [false, true]) {
    test(`linear, siluMul and groupedLinear (${deviceOffsets ? "device" : "host"} offsets, an expert without rows) over a NaN-filled pool equal the cpu backend, forward and gradients`, async () => {
      const { backend: gpu } = await createBackend("webgpu");
      try {
        const want = await run(new CpuBackend(), deviceOffsets);
        const got = await run(gpu, deviceOffsets);
        expect(got.length).toBe(want.length);
        got.forEach((g, i) => {
          expect(g.length).toBe(want[i]!.length);
          for (let j = 0; j < g.length; j++) {
            const tol = 1e-4 * (1 + Math.abs(want[i]![j]!));
            if (!(Math.abs(g[j]! - want[i]![j]!) <= tol)) throw new Error(`result ${i} element ${j}: webgpu ${g[j]}, cpu ${want[i]![j]}`);
          }
        });
      } finally {
        (gpu as Backend & { destroy?: () => void }).destroy?.();
      }
    });
  }
});
