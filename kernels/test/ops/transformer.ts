/** Conformance: RoPE (forward, inverse, in place) and causal GQA attention (+backward). */

import { refAttention, refAttentionBackward, refRope } from "../reference/transformer.ts";
import { Rng } from "./harness.ts";
import type { T } from "./index.ts";

/** Registers the transformer-piece tests. */
export function transformerTests(t: T): void {
  t("rope forward and inverse (HF rotate_half layout), in place", async (c) => {
    const r = new Rng(900);
    for (const [B, S, H, D, theta] of [[1, 1, 1, 2, 10000], [2, 5, 3, 8, 10000], [1, 17, 2, 6, 500000], [c.large(2, 1), c.large(67, 3), 3, 34, 10000]] as [number, number, number, number, number][]) {
      const n = B * S * H * D;
      const x = r.f32(n);
      for (const inverse of [false, true]) {
        const y = c.output(n);
        c.be.rope(c.input(x), y.view, B, S, H, D, theta, inverse);
        // angles up to S·1 rad computed in f32 on a GPU: absolute error grows with position → normwise
        c.close(`rope [${B},${S},${H},${D}] inverse=${inverse}`, await y.read(), refRope(x, B, S, H, D, theta, inverse), { factor: 4 + S / 8, normwise: true });
        await y.checkGuards();
      }
      const xv = c.input(x);
      c.be.rope(xv, xv, B, S, H, D, theta, false);
      c.be.rope(xv, xv, B, S, H, D, theta, true);
      c.close(`rope round trip in place [${B},${S},${H},${D}]`, await c.read(xv, n), x, { factor: 4 + S / 8, normwise: true });
    }
    // a table of inverse frequencies (scaled RoPE: here Llama 3.1's llama3 shape on a short context),
    // forward and inverse, at an awkward size
    for (const [B, S, H, D] of [[2, 13, 3, 10], [1, c.large(61, 5), 2, 34]] as [number, number, number, number][]) {
      const table = Float64Array.from({ length: D / 2 }, (_, i) => {
        const f = Math.pow(500000, (-2 * i) / D);
        const wl = (2 * Math.PI) / f;
        return wl > 16 ? f / 8 : wl < 4 ? f : (1 - (16 / wl - 1) / 3) * (f / 8) + ((16 / wl - 1) / 3) * f;
      });
      const n = B * S * H * D;
      const x = r.f32(n);
      for (const inverse of [false, true]) {
        const y = c.output(n);
        c.be.rope(c.input(x), y.view, B, S, H, D, table, inverse);
        c.close(`rope table [${B},${S},${H},${D}] inverse=${inverse}`, await y.read(), refRope(x, B, S, H, D, table, inverse), { factor: 4 + S / 8, normwise: true });
        await y.checkGuards();
      }
    }
  });

  const shapes = (c: { large(n: number, min?: number): number }): [number, number, number, number, number][] => [
    [1, 1, 1, 1, 1],
    [2, 5, 4, 2, 3], // GQA 2 query heads per kv head
    [1, 17, 6, 2, 8],
    [1, 13, 4, 1, 16], // multi-query
    [1, 7, 3, 3, 5], // plain MHA
    [1, c.large(67, 3), 4, 2, 32],
  ];
  t("attention forward (causal, GQA) with lse", async (c) => {
    const r = new Rng(910);
    for (const [B, S, H, Hkv, D] of shapes(c)) {
      const sh = { B, S, H, Hkv, D, scale: 1 / Math.sqrt(D) };
      const q = r.f32(B * S * H * D, -2, 2);
      const k = r.f32(B * S * Hkv * D, -2, 2);
      const v = r.f32(B * S * Hkv * D);
      const ref = refAttention(q, k, v, sh);
      const out = c.output(B * S * H * D);
      const lse = c.output(B * H * S);
      c.be.attention(c.input(q), c.input(k), c.input(v), out.view, lse.view, B, S, H, Hkv, D, sh.scale);
      c.close(`attention out [${B},${S},${H},${Hkv},${D}]`, await out.read(), ref.out, { factor: 8, normwise: true });
      c.close(`attention lse [${B},${S},${H},${Hkv},${D}]`, await lse.read(), ref.lse, { factor: 8, normwise: true });
      await out.checkGuards();
      await lse.checkGuards();
    }
  });

  t("attention backward (dq, dk, dv; dk/dv summed over the query heads of a group)", async (c) => {
    const r = new Rng(920);
    for (const [B, S, H, Hkv, D] of shapes(c)) {
      const sh = { B, S, H, Hkv, D, scale: 1 / Math.sqrt(D) };
      const nq = B * S * H * D;
      const nkv = B * S * Hkv * D;
      const q = r.f32(nq, -2, 2);
      const k = r.f32(nkv, -2, 2);
      const v = r.f32(nkv);
      const dout = r.f32(nq);
      const qv = c.input(q);
      const kv = c.input(k);
      const vv = c.input(v);
      const out = c.output(nq);
      const lse = c.output(B * H * S);
      c.be.attention(qv, kv, vv, out.view, lse.view, B, S, H, Hkv, D, sh.scale);
      // dq/dk/dv are overwritten: start them non-zero
      const dq = c.output(nq, "f32", r.f32(nq));
      const dk = c.output(nkv, "f32", r.f32(nkv));
      const dv = c.output(nkv, "f32", r.f32(nkv));
      c.be.attentionBackward(qv, kv, vv, out.view, lse.view, c.input(dout), dq.view, dk.view, dv.view, B, S, H, Hkv, D, sh.scale);
      const ref = refAttentionBackward(q, k, v, dout, sh);
      const label = `[${B},${S},${H},${Hkv},${D}]`;
      c.close(`attentionBackward dq ${label}`, await dq.read(), ref.dq, { factor: 16, normwise: true });
      c.close(`attentionBackward dk ${label}`, await dk.read(), ref.dk, { factor: 16, normwise: true });
      c.close(`attentionBackward dv ${label}`, await dv.read(), ref.dv, { factor: 16, normwise: true });
      await dq.checkGuards();
      await dk.checkGuards();
      await dv.checkGuards();
    }
  });
}
