/**
 * Test helper: compare autograd gradients with central finite differences in float64 on
 * `new CpuBackend({ precision: "f64" })`. The scalar checked is L = Σ out ⊙ R with a fixed random R,
 * so every output element contributes with a different weight.
 */
import { CpuBackend } from "@zeromoe/kernels";
import type { Backend } from "@zeromoe/kernels";
import { Tensor, Variable, backward, fromArray, mul, noGrad, sum, normalFill, streamKey } from "../src/tensor/index.ts";

/** A float64 cpu backend. */
export function f64Backend(): Backend {
  return new CpuBackend({ precision: "f64" });
}

/** n normal(0, 1) samples from a named deterministic stream. */
export function randn(n: number, name: string, seed = 1): Float64Array {
  const a = new Float64Array(n);
  normalFill(a, streamKey(seed, name), 0, 1);
  return a;
}

/** Result of {@link gradcheck}: worst absolute and relative error over all inputs. */
export interface GradcheckResult {
  maxAbs: number;
  maxRel: number;
  where: string;
}

/**
 * Check d(Σ f(inputs) ⊙ R)/d(inputs) against central differences with step `eps`.
 * `f` receives one tensor per input (Variables) and returns the op's output.
 */
export async function gradcheck(be: Backend, shapes: number[][], f: (...xs: Tensor[]) => Tensor, opts: { seed?: number; eps?: number; init?: (i: number, n: number) => Float64Array } = {}): Promise<GradcheckResult> {
  const eps = opts.eps ?? 1e-6;
  const data = shapes.map((s, i) => (opts.init ? opts.init(i, s.reduce((p, d) => p * d, 1)) : randn(s.reduce((p, d) => p * d, 1), `in${i}`, opts.seed ?? 7)));
  const vars = shapes.map((s, i) => new Variable(be, data[i]!, s, { name: `in${i}` }));
  // Output shape and the random weights R.
  const probe = noGrad(() => {
    const o = f(...vars.map((v) => v.tensor));
    return o;
  });
  const outShape = [...probe.shape];
  probe.dispose();
  const rData = randn(outShape.reduce((p, d) => p * d, 1), "R", 99);
  const lossOf = (): Tensor => {
    const out = f(...vars.map((v) => v.tensor));
    const r = fromArray(be, rData, outShape);
    return sum(mul(out, r));
  };
  const loss = lossOf();
  await backward(loss);
  const analytic = await Promise.all(vars.map((v) => v.grad()));
  let maxAbs = 0;
  let maxRel = 0;
  let where = "";
  for (let i = 0; i < vars.length; i++) {
    const x = data[i]!;
    for (let j = 0; j < x.length; j++) {
      const orig = x[j]!;
      const evalAt = async (v: number): Promise<number> => {
        x[j] = v;
        vars[i]!.set(x);
        const l = noGrad(() => lossOf().retain());
        const val = await l.item();
        l.dispose();
        return val;
      };
      const lp = await evalAt(orig + eps);
      const lm = await evalAt(orig - eps);
      x[j] = orig;
      vars[i]!.set(x);
      const num = (lp - lm) / (2 * eps);
      const ana = Number(analytic[i]![j]);
      const abs = Math.abs(num - ana);
      const rel = abs / Math.max(1e-3, Math.abs(num), Math.abs(ana));
      if (rel > maxRel) {
        maxRel = rel;
        where = `input ${i} element ${j}: numeric ${num}, analytic ${ana}`;
      }
      maxAbs = Math.max(maxAbs, abs);
    }
  }
  for (const v of vars) v.dispose();
  return { maxAbs, maxRel, where };
}
