/**
 * Shared machinery of the op conformance suite: seeded random data, buffers at non-zero offsets
 * with guard elements (to catch writes out of range), reading back as float64, and tolerance
 * comparison with a readable failure message.
 */

import { expect } from "../../src/runtime/bdd.ts";
import type { Backend, Buf, DType, HostArray, MemTag, View } from "../../src/backend.ts";
import { xorshift32 } from "../../src/testing.ts";

/** Tolerance: an element passes when |got − want| ≤ atol + rtol·scale, where scale is |want| (or
 * the caller's magnitude, see {@link Ctx.close}). */
export interface Tol {
  rtol: number;
  atol: number;
}

/** Options of {@link runOpSuite} (see index.ts). */
export interface OpSuiteOptions {
  /** Base tolerance for f32 results; ops needing more (long sums, exp chains) multiply it by a
   * factor stated in their test. CPU f32: { rtol: 1e-5, atol: 1e-6 }; CPU f64: { rtol: 1e-10,
   * atol: 1e-12 }; an f32 GPU backend: about { rtol: 1e-4, atol: 1e-5 }. */
  tol: Tol;
  /** Multiplier for the "large" sizes (≤ 1; e.g. 0.25 on a slow software Vulkan driver). Small
   * awkward sizes (1, primes) are always run. Default 1. */
  sizeScale?: number;
  /** Per-test timeout in ms. Default 30000. */
  timeoutMs?: number;
  /** Tests whose title matches are registered as skipped (a backend configuration that refuses
   * those ops by design says so at its call, with the test that checks the refusal). */
  skip?: RegExp;
  /** Called once after the suite to release the backend (optional). */
  dispose?: (be: Backend) => void | Promise<void>;
}

/** Guard elements placed before and after each output region. */
const GUARD = 3;
/** Value written into guard elements of f32 outputs. */
const SENTINEL = -12345.5;

/** Seeded xorshift32 (reproducible failures). */
export class Rng {
  private readonly next: () => number;
  constructor(seed: number) {
    this.next = xorshift32(seed >>> 0 || 0x9e3779b9);
  }
  /** Uniform u32. */
  u32(): number {
    return this.next();
  }
  /** Uniform in [lo, hi). */
  uniform(lo: number, hi: number): number {
    return lo + (hi - lo) * (this.u32() / 2 ** 32);
  }
  /** Integer in [lo, hi). */
  int(lo: number, hi: number): number {
    return lo + (this.u32() % (hi - lo));
  }
  /** n f32 values uniform in [lo, hi). */
  f32(n: number, lo = -1, hi = 1): Float32Array {
    const a = new Float32Array(n);
    for (let i = 0; i < n; i++) a[i] = this.uniform(lo, hi);
    return a;
  }
  /** n i32 values in [lo, hi). */
  i32(n: number, lo: number, hi: number): Int32Array {
    const a = new Int32Array(n);
    for (let i = 0; i < n; i++) a[i] = this.int(lo, hi);
    return a;
  }
}

/** An output region with guards; `check()` asserts the guards were left alone. */
export interface Out {
  view: View;
  n: number;
  /** Read the n elements as float64 (f32) or raw numbers (other dtypes). */
  read(): Promise<Float64Array>;
  /** Assert nothing was written into the guard elements. */
  checkGuards(): Promise<void>;
}

/** Per-test helpers bound to the backend under test; buffers are freed after each test. */
export class Ctx {
  private live: Buf[] = [];
  constructor(
    /** The backend under test. */
    readonly be: Backend,
    readonly tol: Tol,
    readonly sizeScale: number,
  ) {}

  /** Scale a "large" size, at least `min`. */
  large(n: number, min = 1): number {
    return Math.max(min, Math.round(n * this.sizeScale));
  }

  /** Allocate (freed after the test). */
  alloc(dtype: DType, n: number, tag: MemTag = "other"): Buf {
    const b = this.be.alloc(dtype, n, tag);
    this.live.push(b);
    return b;
  }

  /** Upload data into a new buffer at element offset GUARD (exercises offsets). */
  input(data: HostArray, dtype: DType = "f32"): View {
    const b = this.alloc(dtype, data.length + 2 * GUARD);
    const v = { buf: b, off: GUARD };
    this.be.write(v, data);
    return v;
  }

  /** Upload i32 data. */
  ints(data: ArrayLike<number>): View {
    return this.input(Int32Array.from(data), "i32");
  }

  /** An output region of n elements at offset GUARD, guards set to a sentinel; `init` (optional)
   * gives the initial contents (for accumulating ops). */
  output(n: number, dtype: DType = "f32", init?: HostArray): Out {
    const b = this.alloc(dtype, n + 2 * GUARD);
    const be = this.be;
    const isF = dtype === "f32";
    const guardVal = isF ? SENTINEL : 7;
    const guardArr = (): HostArray => (isF ? new Float32Array(GUARD).fill(SENTINEL) : dtype === "i32" ? new Int32Array(GUARD).fill(7) : dtype === "u32" ? new Uint32Array(GUARD).fill(7) : new Uint16Array(GUARD).fill(7));
    be.write({ buf: b, off: 0 }, guardArr());
    be.write({ buf: b, off: GUARD + n }, guardArr());
    if (init) be.write({ buf: b, off: GUARD }, init);
    const view = { buf: b, off: GUARD };
    return {
      view,
      n,
      read: async () => Float64Array.from((await be.read(view, n)) as ArrayLike<number>),
      checkGuards: async () => {
        const all = Float64Array.from((await be.read({ buf: b, off: 0 }, n + 2 * GUARD)) as ArrayLike<number>);
        const bad: number[] = [];
        for (let i = 0; i < GUARD; i++) {
          if (all[i] !== guardVal) bad.push(i - GUARD);
          if (all[GUARD + n + i] !== guardVal) bad.push(n + i);
        }
        expect(bad.length === 0 ? "guards intact" : `wrote outside [0, ${n}) at relative positions ${bad.join(",")}`).toBe("guards intact");
      },
    };
  }

  /** Read n f32 (or any) elements as float64. */
  async read(v: View, n: number): Promise<Float64Array> {
    return Float64Array.from((await this.be.read(v, n)) as ArrayLike<number>);
  }

  /** Assert got ≈ want elementwise: |got − want| ≤ factor·(atol + rtol·s_i), s_i = |want_i| +
   * mag_i when `mag` is given (the Σ|terms| of a sum, so cancellation is allowed for), or
   * max_j |want_j| when `normwise` (for gradients, whose small entries come from cancellation). */
  close(label: string, got: ArrayLike<number>, want: ArrayLike<number>, o: { factor?: number; mag?: ArrayLike<number>; normwise?: boolean } = {}): void {
    expect(got.length).toBe(want.length);
    const f = o.factor ?? 1;
    let maxAbs = 0;
    if (o.normwise) for (let i = 0; i < want.length; i++) maxAbs = Math.max(maxAbs, Math.abs(want[i]!));
    let worst = -1;
    let worstRatio = 0;
    let nBad = 0;
    for (let i = 0; i < want.length; i++) {
      const w = want[i]!;
      const g = got[i]!;
      if (Number.isNaN(w) || Number.isNaN(g)) {
        if (!(Number.isNaN(w) && Number.isNaN(g))) {
          nBad++;
          worst = i;
          worstRatio = Infinity;
        }
        continue;
      }
      if (w === g) continue; // equal infinities included
      const s = o.normwise ? maxAbs : Math.abs(w) + (o.mag ? o.mag[i]! : 0);
      const bound = f * (this.tol.atol + this.tol.rtol * s);
      const ratio = Math.abs(g - w) / bound;
      if (!(ratio <= 1)) nBad++;
      if (!(ratio <= worstRatio)) {
        worstRatio = ratio;
        worst = i;
      }
    }
    const msg = nBad === 0 ? "ok" : `${label}: ${nBad}/${want.length} elements out of tolerance; worst [${worst}] got ${got[worst]} want ${want[worst]} (${worstRatio.toFixed(2)}× the bound)`;
    expect(msg).toBe("ok");
  }

  /** Assert exact equality (indices, counts, bit patterns). */
  exact(label: string, got: ArrayLike<number>, want: ArrayLike<number>): void {
    expect(got.length).toBe(want.length);
    const bad: string[] = [];
    for (let i = 0; i < want.length && bad.length < 5; i++) if (!Object.is(got[i], want[i])) bad.push(`[${i}] got ${got[i]} want ${want[i]}`);
    expect(bad.length === 0 ? "ok" : `${label}: ${bad.join("; ")}`).toBe("ok");
  }

  /** Free every buffer allocated through this context (called after each test). */
  freeAll(): void {
    for (const b of this.live) this.be.free(b);
    this.live = [];
  }
}

/** Round a float64 array to f32 values (what an f32 backend input holds). */
export function f32(a: ArrayLike<number>): Float32Array {
  return Float32Array.from(a);
}
