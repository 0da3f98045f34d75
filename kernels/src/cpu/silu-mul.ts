/**
 * SwiGLU's activation on the cpu backend (Shazeer 2020): out = silu(gate) ⊙ up and its backward, in
 * one loop each. Every intermediate the unfused ops (`unary("silu")`, `binary("mul")`,
 * `unaryBackward("silu")`) store is rounded to the storage type here too, so f32 results equal that
 * sequence bit for bit (and f64-precision results likewise, where nothing is rounded).
 */
import type { FArr } from "./store.ts";

const keep = (v: number): number => v;

/** out[oo+i] = silu(g[go+i])·u[uo+i] for i < n, silu(x) = x/(1 + e^−x) rounded to out's type first. */
export function siluMulF(g: FArr, go: number, u: FArr, uo: number, out: FArr, oo: number, n: number): void {
  const r = out instanceof Float32Array ? Math.fround : keep;
  for (let i = 0; i < n; i++) {
    const v = g[go + i]!;
    out[oo + i] = r(v / (1 + Math.exp(-v))) * u[uo + i]!;
  }
}

/**
 * Backward of {@link siluMulF} for i < n (outputs overwritten): dUp = dy·silu(g) and
 * dGate = (dy·u)·σ(g)·(1 + g·(1 − σ(g))), σ(g) = 1/(1 + e^−g), with silu(g) and dy·u rounded to the
 * storage type as the unfused ops round them.
 */
export function siluMulBackwardF(g: FArr, go: number, u: FArr, uo: number, dy: FArr, dyo: number, dg: FArr, dgo: number, du: FArr, duo: number, n: number): void {
  const r = dg instanceof Float32Array ? Math.fround : keep;
  for (let i = 0; i < n; i++) {
    const v = g[go + i]!;
    const d = dy[dyo + i]!;
    du[duo + i] = d * r(v / (1 + Math.exp(-v)));
    const ds = r(d * u[uo + i]!);
    const s = 1 / (1 + Math.exp(-v));
    dg[dgo + i] = ds * s * (1 + v * (1 - s));
  }
}
