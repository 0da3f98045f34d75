/**
 * Elementwise unary ops and their backward (f32), one invocation per element.
 *
 * Formulas match the cpu backend: GELU tanh approximation and exact GELU (Hendrycks & Gimpel 2016),
 * SiLU x·σ(x), relu'(0) = 0, abs'(0) = 0. tanh and σ are written in overflow-safe forms (WGSL's
 * builtin tanh may return NaN for large |x| on some drivers). erf uses Abramowitz & Stegun 7.1.26
 * refined: |error| < 1.5e-7, below f32 resolution of the GELU output.
 */
import type { Buf, UnaryOp } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { entry, EW_WG, groups, u32s, memoKernel } from "./launch.ts";

const MATH = /* wgsl */ `
const SQRT_2_OVER_PI: f32 = 0.7978845608028654;
const GELU_C: f32 = 0.044715;
const INV_SQRT2: f32 = 0.7071067811865476;
const INV_SQRT_2PI: f32 = 0.3989422804014327;
fn tanh_s(x: f32) -> f32 { let e = exp(-2.0 * abs(x)); let t = (1.0 - e) / (1.0 + e); return select(t, -t, x < 0.0); }
fn sigmoid_s(x: f32) -> f32 { if (x >= 0.0) { return 1.0 / (1.0 + exp(-x)); } let e = exp(x); return e / (1.0 + e); }
fn erf_s(x: f32) -> f32 {
  let a = abs(x);
  let t = 1.0 / (1.0 + 0.3275911 * a);
  let y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * exp(-a * a);
  return select(y, -y, x < 0.0);
}
`;

/** WGSL expression of op(x) in terms of `x`. */
function fwdExpr(op: UnaryOp): string {
  switch (op) {
    case "neg": return "-x";
    case "exp": return "exp(x)";
    case "log": return "log(x)";
    case "sqrt": return "sqrt(x)";
    case "rsqrt": return "1.0 / sqrt(x)";
    case "gelu_tanh": return "0.5 * x * (1.0 + tanh_s(SQRT_2_OVER_PI * (x + GELU_C * x * x * x)))";
    case "gelu_erf": return "0.5 * x * (1.0 + erf_s(x * INV_SQRT2))";
    case "silu": return "x * sigmoid_s(x)";
    case "relu": return "select(0.0, x, x > 0.0)";
    case "sigmoid": return "sigmoid_s(x)";
    case "square": return "x * x";
    case "abs": return "abs(x)";
    default: throw new Error(`webgpu unary: unknown op "${op as string}"`);
  }
}

/** WGSL statements computing `d`, the derivative op'(x) times dy (`dy` in scope). */
function bwdBody(op: UnaryOp): string {
  switch (op) {
    case "neg": return "let d = -dy;";
    case "exp": return "let d = dy * exp(x);";
    case "log": return "let d = dy / x;";
    case "sqrt": return "let d = 0.5 * dy / sqrt(x);";
    case "rsqrt": return "let d = -0.5 * dy / (x * sqrt(x));";
    case "gelu_tanh": return "let t = tanh_s(SQRT_2_OVER_PI * (x + GELU_C * x * x * x));\n  let d = dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_C * x * x));";
    case "gelu_erf": return "let d = dy * (0.5 * (1.0 + erf_s(x * INV_SQRT2)) + x * INV_SQRT_2PI * exp(-0.5 * x * x));";
    case "silu": return "let s = sigmoid_s(x);\n  let d = dy * s * (1.0 + x * (1.0 - s));";
    case "relu": return "let d = select(0.0, dy, x > 0.0);";
    case "sigmoid": return "let s = sigmoid_s(x);\n  let d = dy * s * (1.0 - s);";
    case "square": return "let d = 2.0 * x * dy;";
    case "abs": return "let d = select(select(0.0, -dy, x < 0.0), dy, x > 0.0);";
    default: throw new Error(`webgpu unaryBackward: unknown op "${op as string}"`);
  }
}

/** Launch y[yoff+i] = op(x[xoff+i]), i < n. */
export function unaryLaunch(op: UnaryOp, x: Buf, xoff: number, y: Buf, yoff: number, n: number): Launch {
  const kernel: Kernel = memoKernel(`unary_${op}`, () => ({
    label: `unary_${op}`,
    buffers: [
      { name: "b_x", type: "f32", write: false },
      { name: "b_y", type: "f32", write: true },
    ],
    params: u32s("xoff", "yoff", "n"),
    code: `${MATH}${entry(EW_WG)} {
  let i = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (i >= P.n) { return; }
  let x = b_x[P.xoff + i];
  b_y[P.yoff + i] = ${fwdExpr(op)};
}`,
  }));
  return { kernel, bufs: [x, y], params: [xoff, yoff, n], workgroups: groups(n) };
}

/** Launch dx[i] = dy[i] · op'(x[i]), i < n. */
export function unaryBackwardLaunch(op: UnaryOp, x: Buf, xoff: number, dy: Buf, dyoff: number, dx: Buf, dxoff: number, n: number): Launch {
  const kernel: Kernel = memoKernel(`unary_bwd_${op}`, () => ({
    label: `unary_bwd_${op}`,
    buffers: [
      { name: "b_x", type: "f32", write: false },
      { name: "b_dy", type: "f32", write: false },
      { name: "b_dx", type: "f32", write: true },
    ],
    params: u32s("xoff", "dyoff", "dxoff", "n"),
    code: `${MATH}${entry(EW_WG)} {
  let i = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (i >= P.n) { return; }
  let x = b_x[P.xoff + i];
  let dy = b_dy[P.dyoff + i];
  ${bwdBody(op)}
  b_dx[P.dxoff + i] = d;
}`,
  }));
  return { kernel, bufs: [x, dy, dx], params: [xoff, dyoff, dxoff, n], workgroups: groups(n) };
}
