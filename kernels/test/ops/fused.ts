/** Conformance: fused elementwise ops — siluMul (SwiGLU's activation) and its backward. */

import { refUnary1, refUnaryDeriv1 } from "../reference/elementwise.ts";
import { Rng } from "./harness.ts";
import type { T } from "./index.ts";

/** Registers the fused-op tests. */
export function fusedTests(t: T): void {
  t("siluMul out = silu(gate)·up and its backward, vs the float64 reference and vs unary silu + binary mul", async (c) => {
    const r = new Rng(401);
    for (const n of [1, 2, 7, 61, 257, c.large(1031), c.large(4099)]) {
      const g = r.f32(n, -5, 5);
      // saturating gates: σ must not overflow into NaN
      [-30, 30, -12, 12, 0].forEach((v, i) => i + 1 < n && (g[i + 1] = v));
      const u = r.f32(n, -3, 3);
      const dy = r.f32(n, -1, 1);
      const gv = c.input(g);
      const uv = c.input(u);
      const dyv = c.input(dy);
      const out = c.output(n);
      c.be.siluMul(gv, uv, out.view, n);
      const got = await out.read();
      // one f32 rounding of silu(g), one of the product, plus the kernel's exp error
      c.close(`siluMul n=${n}`, got, Array.from(g, (x, i) => refUnary1("silu", x) * u[i]!), { factor: 2 });
      await out.checkGuards();
      const dg = c.output(n);
      const du = c.output(n);
      c.be.siluMulBackward(gv, uv, dyv, dg.view, du.view, n);
      const gotDg = await dg.read();
      const gotDu = await du.read();
      c.close(`siluMulBackward dGate n=${n}`, gotDg, Array.from(g, (x, i) => dy[i]! * u[i]! * refUnaryDeriv1("silu", x)), { factor: 4 });
      c.close(`siluMulBackward dUp n=${n}`, gotDu, Array.from(g, (x, i) => dy[i]! * refUnary1("silu", x)), { factor: 2 });
      await dg.checkGuards();
      await du.checkGuards();

      // the unfused sequence the op replaces: silu, mul; backward mul, mul, silu'
      const s = c.output(n);
      c.be.unary("silu", gv, s.view, n);
      const y = c.output(n);
      c.be.binary("mul", s.view, [n], uv, [n], y.view);
      const ds = c.output(n);
      c.be.binary("mul", dyv, [n], uv, [n], ds.view);
      const dg2 = c.output(n);
      c.be.unaryBackward("silu", gv, ds.view, dg2.view, n);
      const du2 = c.output(n);
      c.be.binary("mul", dyv, [n], s.view, [n], du2.view);
      const [y2, dgU, duU] = [await y.read(), await dg2.read(), await du2.read()];
      if (c.be.info.name === "cpu") {
        // the cpu backend rounds the same intermediates: bit for bit
        c.exact(`siluMul = mul(silu) n=${n}`, got, y2);
        c.exact(`siluMulBackward dGate = silu'(dy·up) n=${n}`, gotDg, dgU);
        c.exact(`siluMulBackward dUp = dy·silu n=${n}`, gotDu, duU);
      } else {
        c.close(`siluMul vs unfused n=${n}`, got, y2, { factor: 2 });
        c.close(`siluMulBackward dGate vs unfused n=${n}`, gotDg, dgU, { factor: 4 });
        c.close(`siluMulBackward dUp vs unfused n=${n}`, gotDu, duU, { factor: 2 });
      }
    }
  });

  t("siluMul / siluMulBackward with n = 0 write nothing; in-buffer offsets of one shared buffer", async (c) => {
    const out = c.output(4);
    c.be.siluMul(c.input(new Float32Array([1, 2, 3, 4])), c.input(new Float32Array([1, 1, 1, 1])), out.view, 0);
    await out.checkGuards();
    // gate, up and both gradients in one buffer (an arena): halves of [g | u] and [dg | du]
    const r = new Rng(402);
    const n = 37;
    const gu = r.f32(2 * n, -4, 4);
    const dy = r.f32(n, -1, 1);
    const both = c.input(gu);
    const gv = both;
    const uv = { buf: both.buf, off: both.off + n };
    const grads = c.output(2 * n);
    c.be.siluMulBackward(gv, uv, c.input(dy), grads.view, { buf: grads.view.buf, off: grads.view.off + n }, n);
    const got = await grads.read();
    c.close("dGate (shared buffer)", got.subarray(0, n), Array.from({ length: n }, (_, i) => dy[i]! * gu[n + i]! * refUnaryDeriv1("silu", gu[i]!)), { factor: 4 });
    c.close("dUp (shared buffer)", got.subarray(n), Array.from({ length: n }, (_, i) => dy[i]! * refUnary1("silu", gu[i]!)), { factor: 2 });
    await grads.checkGuards();
  });
}
