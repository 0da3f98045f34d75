/** Conformance: fused ops — siluMul (SwiGLU's activation) and residual add + RMSNorm, forward and
 * backward. */

import { refUnary1, refUnaryDeriv1 } from "../reference/elementwise.ts";
import { refRmsnorm, refRmsnormBackward } from "../reference/rows.ts";
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

  t("addRmsnorm sum = x + r, y = rmsnorm(sum)·w and its backward with the sum's gradient added (also in place), vs the float64 reference and vs add + rmsnorm (+ axpy)", async (c) => {
    const r = new Rng(403);
    const eps = 1e-5;
    const shapes: [number, number][] = [[1, 1], [3, 7], [5, 61], [4, 64], [2, 257], [c.large(17, 2), c.large(1031, 3)]];
    for (const [rows, cols] of shapes) {
      const n = rows * cols;
      const x = r.f32(n, -2, 2);
      const res = r.f32(n, -1, 1);
      const w = r.f32(cols, 0.5, 1.5);
      const s64 = Array.from(x, (v, i) => v + res[i]!); // exact in f64
      const ref = refRmsnorm(s64, w, rows, cols, eps);
      const [xv, rv, wv] = [c.input(x), c.input(res), c.input(w)];
      const sum = c.output(n);
      const y = c.output(n);
      const rstd = c.output(rows);
      c.be.addRmsnorm(xv, rv, wv, sum.view, y.view, rstd.view, rows, cols, eps);
      const [gotS, gotY, gotR] = [await sum.read(), await y.read(), await rstd.read()];
      c.close(`addRmsnorm sum [${rows},${cols}]`, gotS, s64, { mag: Array.from(x, (v, i) => Math.abs(v) + Math.abs(res[i]!)) });
      c.close(`addRmsnorm y [${rows},${cols}]`, gotY, ref.y, { factor: 2 });
      c.close(`addRmsnorm rstd [${rows},${cols}]`, gotR, ref.rstd, { factor: 2 });
      for (const o of [sum, y, rstd]) await o.checkGuards();

      const dy = r.f32(n);
      const dSum = r.f32(n);
      const dw0 = r.f32(cols);
      const rb = refRmsnormBackward(s64, w, dy, rows, cols, eps);
      const dx = c.output(n);
      const dw = c.output(cols, "f32", dw0);
      const dyv = c.input(dy);
      c.be.addRmsnormBackward(sum.view, wv, rstd.view, dyv, c.input(dSum), dx.view, dw.view, rows, cols);
      const gotDx = await dx.read();
      const gotDw = await dw.read();
      c.close(`addRmsnormBackward dx [${rows},${cols}]`, gotDx, Array.from(rb.dx, (v, i) => v + dSum[i]!), { normwise: true, factor: 4 });
      c.close(`addRmsnormBackward dw [${rows},${cols}]`, gotDw, Array.from(rb.dw, (v, j) => v + dw0[j]!), { normwise: true, factor: 4 });
      await dx.checkGuards();
      await dw.checkGuards();
      // in place on dSum, and without dSum
      const inPlace = c.output(n, "f32", dSum);
      const dw2 = c.output(cols, "f32", dw0);
      c.be.addRmsnormBackward(sum.view, wv, rstd.view, dyv, inPlace.view, inPlace.view, dw2.view, rows, cols);
      c.exact(`addRmsnormBackward in place = out of place [${rows},${cols}]`, await inPlace.read(), gotDx);
      await inPlace.checkGuards();
      const dxPlain = c.output(n);
      const dw3 = c.output(cols, "f32", dw0);
      c.be.addRmsnormBackward(sum.view, wv, rstd.view, dyv, null, dxPlain.view, dw3.view, rows, cols);
      const gotPlain = await dxPlain.read();
      c.close(`addRmsnormBackward without dSum [${rows},${cols}]`, gotPlain, rb.dx, { normwise: true, factor: 4 });

      // the unfused ops it replaces
      const s2 = c.output(n);
      c.be.binary("add", xv, [n], rv, [n], s2.view);
      const y2 = c.output(n);
      const rstd2 = c.output(rows);
      c.be.rmsnorm(s2.view, wv, y2.view, rstd2.view, rows, cols, eps);
      const dxn = c.output(n);
      const dw4 = c.output(cols, "f32", dw0);
      c.be.rmsnormBackward(s2.view, wv, rstd2.view, dyv, dxn.view, dw4.view, rows, cols);
      const acc = c.output(n, "f32", dSum);
      c.be.axpy(1, dxn.view, acc.view, n);
      const unfused = [await s2.read(), await y2.read(), await rstd2.read(), await acc.read(), await dw4.read(), await dxn.read()];
      const fused = [gotS, gotY, gotR, gotDx, gotDw, gotPlain];
      const names = ["sum", "y", "rstd", "dx", "dw", "dx without dSum"];
      for (let k = 0; k < names.length; k++) {
        if (c.be.info.name === "cpu") c.exact(`addRmsnorm ${names[k]} = unfused [${rows},${cols}]`, fused[k]!, unfused[k]!);
        else c.close(`addRmsnorm ${names[k]} vs unfused [${rows},${cols}]`, fused[k]!, unfused[k]!, { normwise: true, factor: 4 });
      }
    }
  });
}
