/**
 * CpuBackend: the op conformance suite in both precisions, plus cpu-specific properties
 * (f64 storage, determinism, error messages).
 */

import { describe, expect, test } from "bun:test";
import { CpuBackend } from "../src/cpu/index.ts";
import { runOpSuite } from "./ops/index.ts";

// f32 storage, float64 arithmetic inside each op: one f32 rounding per stored value.
runOpSuite("cpu f32", () => new CpuBackend({ precision: "f32" }), { tol: { rtol: 1e-5, atol: 1e-6 } });
// f64 everywhere: differences to the reference are summation-order effects only (~1e-15); the
// reference's Simpson-integrated erf is good to ~1e-13.
runOpSuite("cpu f64", () => new CpuBackend({ precision: "f64" }), { tol: { rtol: 1e-10, atol: 1e-12 } });

describe("CpuBackend specifics", () => {
  test("f64 precision stores f32 buffers as Float64Array without rounding", async () => {
    const be = new CpuBackend({ precision: "f64" });
    const b = be.alloc("f32", 3, "param");
    be.write({ buf: b, off: 0 }, new Float64Array([0.1, 1 / 3, Math.PI]));
    const got = await be.read({ buf: b, off: 0 }, 3);
    expect(got).toBeInstanceOf(Float64Array);
    expect(Array.from(got)).toEqual([0.1, 1 / 3, Math.PI]);
    expect(be.memory().current.param).toBe(12); // accounted as f32: 4 bytes per element
    const f = new CpuBackend();
    const c = f.alloc("f32", 1, "param");
    f.write({ buf: c, off: 0 }, new Float64Array([0.1]));
    expect((await f.read({ buf: c, off: 0 }, 1))[0]).toBe(Math.fround(0.1));
  });

  test("ops are deterministic: repeated runs give identical bits", async () => {
    const be = new CpuBackend();
    const n = 97;
    const a = be.alloc("f32", n * n, "other");
    be.write({ buf: a, off: 0 }, Float32Array.from({ length: n * n }, (_, i) => Math.sin(i * 1.7)));
    const o1 = be.alloc("f32", n * n, "other");
    const o2 = be.alloc("f32", n * n, "other");
    be.matmul({ buf: a, off: 0 }, { buf: a, off: 0 }, { buf: o1, off: 0 }, { M: n, N: n, K: n, transB: true });
    be.matmul({ buf: a, off: 0 }, { buf: a, off: 0 }, { buf: o2, off: 0 }, { M: n, N: n, K: n, transB: true });
    expect(Array.from(await be.read({ buf: o1, off: 0 }, n * n))).toEqual(Array.from(await be.read({ buf: o2, off: 0 }, n * n)));
  });

  test("errors name the op, the argument and what was expected", () => {
    const be = new CpuBackend();
    const x = be.alloc("f32", 4, "other");
    const i = be.alloc("i32", 4, "other");
    expect(() => be.unary("exp", { buf: x, off: 2 }, { buf: x, off: 0 }, 4)).toThrow(/cpu unary: x needs elements \[2, 6\) but buffer #\d+ has 4/);
    expect(() => be.unary("exp", { buf: i, off: 0 }, { buf: x, off: 0 }, 4)).toThrow(/cpu unary: x has dtype i32, expected f32/);
    expect(() => be.write({ buf: i, off: 0 }, new Float32Array(1))).toThrow(/cpu write: .* is i32 but data is Float32Array/);
    expect(() => be.topk({ buf: x, off: 0 }, { buf: x, off: 0 }, { buf: i, off: 0 }, 1, 4, 9)).toThrow(/cpu topk: k must be/);
    expect(() => new CpuBackend({ precision: "f16" as never })).toThrow(/precision must be/);
    const other = new CpuBackend();
    expect(() => other.free(x)).toThrow(/does not belong/);
  });
});
