/**
 * Conformance: run-to-run determinism. The Backend contract promises a fixed order for
 * embeddingBackward, scatterAddRows and sumSquares, and docs/domain.md §5 asks for fixed reduction
 * orders everywhere (ZeRO stages must reproduce data parallelism bit for bit); each op here is run
 * twice on the same inputs (fresh outputs) and the bits must be identical.
 */

import type { View } from "../../src/backend.ts";
import { Rng, type Ctx } from "./harness.ts";
import type { T } from "./index.ts";

/** Run `op` twice into fresh outputs of n f32 elements (initialised from `init`) and compare bits. */
async function twice(c: Ctx, label: string, n: number, init: Float32Array | null, op: (out: View) => void): Promise<void> {
  const res: Float64Array[] = [];
  for (let r = 0; r < 2; r++) {
    const o = c.output(n, "f32", init ?? undefined);
    op(o.view);
    res.push(await o.read());
  }
  c.exact(`${label} (second run vs first)`, res[1]!, res[0]!);
}

/** Registers the determinism tests. */
export function determinismTests(t: T): void {
  t("matmul, reduce, sumSquares, embeddingBackward, scatterAddRows, attentionBackward are bit-reproducible", async (c) => {
    const r = new Rng(1400);
    const [M, N, K] = [c.large(61, 5), c.large(67, 5), c.large(259, 9)];
    const a = c.input(r.f32(M * K));
    const b = c.input(r.f32(K * N));
    await twice(c, "matmul", M * N, null, (o) => c.be.matmul(a, b, o, { M, N, K }));
    const dy = c.input(r.f32(M * N));
    await twice(c, "matmul transA accumulate", K * N, r.f32(K * N), (o) => c.be.matmul(a, dy, o, { M: K, N, K: M, transA: true, accumulate: true }));
    const n = c.large(10007, 100);
    const x = c.input(r.f32(n, -3, 3));
    await twice(c, "reduce sum", 1, null, (o) => c.be.reduce("sum", x, o, 1, n, 1));
    await twice(c, "sumSquares", 1, null, (o) => c.be.sumSquares(x, o, n));
    const [vocab, dim, rows] = [7, 33, c.large(257, 20)];
    const ids = c.ints(Int32Array.from({ length: rows }, () => r.int(0, vocab)));
    const dout = c.input(r.f32(rows * dim));
    const dt0 = r.f32(vocab * dim);
    // dtable must be exactly vocab rows (vocab is inferred from what the view spans)
    const runEmb = async () => {
      const buf = c.alloc("f32", vocab * dim);
      c.be.write({ buf, off: 0 }, dt0);
      c.be.embeddingBackward(dout, ids, { buf, off: 0 }, rows, dim);
      return c.read({ buf, off: 0 }, vocab * dim);
    };
    c.exact("embeddingBackward (second run vs first)", await runEmb(), await runEmb());
    const w = c.input(r.f32(rows));
    const outInit = r.f32(vocab * dim);
    await twice(c, "scatterAddRows", vocab * dim, outInit, (o) => c.be.scatterAddRows(dout, ids, w, o, rows, dim));
    const [B, S, H, Hkv, D] = [1, c.large(33, 5), 4, 2, 8];
    const q = c.input(r.f32(B * S * H * D));
    const k = c.input(r.f32(B * S * Hkv * D));
    const v = c.input(r.f32(B * S * Hkv * D));
    const out = c.output(B * S * H * D);
    const lse = c.output(B * H * S);
    c.be.attention(q, k, v, out.view, lse.view, B, S, H, Hkv, D, 0.3);
    const g = c.input(r.f32(B * S * H * D));
    const nkv = B * S * Hkv * D;
    const runBwd = async () => {
      const dq = c.output(B * S * H * D);
      const dk = c.output(nkv);
      const dv = c.output(nkv);
      c.be.attentionBackward(q, k, v, out.view, lse.view, g, dq.view, dk.view, dv.view, B, S, H, Hkv, D, 0.3);
      return [...(await dq.read()), ...(await dk.read()), ...(await dv.read())];
    };
    c.exact("attentionBackward (second run vs first)", await runBwd(), await runBwd());
  });
}
