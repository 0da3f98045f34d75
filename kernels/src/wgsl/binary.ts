/**
 * Binary ops with numpy broadcasting (f32), one invocation per output element.
 *
 * The host right-aligns both shapes, computes element strides (0 on broadcast axes), drops size-1
 * axes and merges adjacent axes that are contiguous in both inputs, so most calls run at rank 1–3.
 * The rank is baked into the WGSL (one pipeline per op and rank); dims and strides are parameters.
 */
import type { BinaryOp, Buf } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { entry, EW_WG, groups, u32s, memoKernel } from "./launch.ts";

/** Largest rank after merging that the kernel supports. */
export const MAX_BINARY_RANK = 8;

function opExpr(op: BinaryOp): string {
  switch (op) {
    case "add": return "a + b";
    case "sub": return "a - b";
    case "mul": return "a * b";
    case "div": return "a / b";
    case "max": return "max(a, b)";
    case "min": return "min(a, b)";
    default: throw new Error(`webgpu binary: unknown op "${op as string}"`);
  }
}

/** Broadcast shape of a and b (right-aligned). Throws naming both shapes when they don't broadcast. */
export function broadcastShapes(aShape: readonly number[], bShape: readonly number[]): number[] {
  const r = Math.max(aShape.length, bShape.length);
  const out: number[] = [];
  for (let i = 0; i < r; i++) {
    const da = aShape[aShape.length - r + i] ?? 1;
    const db = bShape[bShape.length - r + i] ?? 1;
    if (!Number.isInteger(da) || da < 0 || !Number.isInteger(db) || db < 0) throw new Error(`webgpu binary: shapes must hold non-negative integers, got [${aShape}] and [${bShape}]`);
    if (da !== db && da !== 1 && db !== 1) throw new Error(`webgpu binary: shapes [${aShape}] and [${bShape}] do not broadcast (axis ${i - r} is ${da} vs ${db})`);
    out.push(da === 1 ? db : da);
  }
  return out;
}

/** Collapsed iteration space: dims plus strides of a and b (innermost last). */
export interface BroadcastPlan {
  dims: number[];
  sa: number[];
  sb: number[];
  total: number;
}

/** Strides of a and b over the broadcast shape, size-1 axes dropped, mergeable axes merged. */
export function planBroadcast(aShape: readonly number[], bShape: readonly number[]): BroadcastPlan {
  const os = broadcastShapes(aShape, bShape);
  const r = os.length;
  const strides = (shape: readonly number[]): number[] => {
    const s = new Array<number>(r).fill(0);
    let acc = 1;
    for (let i = r - 1; i >= 0; i--) {
      const d = shape[shape.length - r + i] ?? 1;
      s[i] = d === 1 ? 0 : acc;
      acc *= d;
    }
    return s;
  };
  const sa0 = strides(aShape);
  const sb0 = strides(bShape);
  const dims: number[] = [];
  const sa: number[] = [];
  const sb: number[] = [];
  for (let i = 0; i < r; i++) {
    if (os[i] === 1) continue;
    const k = dims.length - 1;
    if (k >= 0 && sa[k] === sa0[i]! * os[i]! && sb[k] === sb0[i]! * os[i]!) {
      // previous (outer) axis continues this one contiguously in both: merge
      dims[k] = dims[k]! * os[i]!;
      sa[k] = sa0[i]!;
      sb[k] = sb0[i]!;
    } else {
      dims.push(os[i]!);
      sa.push(sa0[i]!);
      sb.push(sb0[i]!);
    }
  }
  const total = os.reduce((p, d) => p * d, 1);
  return { dims, sa, sb, total };
}

/** Launch out = a op b with broadcasting (null when the output is empty). Throws if the merged
 * rank exceeds {@link MAX_BINARY_RANK}. */
export function binaryLaunch(op: BinaryOp, a: Buf, aoff: number, aShape: readonly number[], b: Buf, boff: number, bShape: readonly number[], out: Buf, ooff: number): Launch | null {
  const plan = planBroadcast(aShape, bShape);
  if (plan.total === 0) return null;
  const r = plan.dims.length;
  if (r > MAX_BINARY_RANK) throw new Error(`webgpu binary: broadcast of [${aShape}] and [${bShape}] needs rank ${r} after merging axes; at most ${MAX_BINARY_RANK}`);
  const names: string[] = ["aoff", "boff", "ooff", "n"];
  for (let k = 0; k < r; k++) names.push(`d${k}`, `sa${k}`, `sb${k}`);
  const params: number[] = [aoff, boff, ooff, plan.total];
  for (let k = 0; k < r; k++) params.push(plan.dims[k]!, plan.sa[k]!, plan.sb[k]!);
  let idx = "";
  for (let k = r - 1; k >= 0; k--) {
    idx += `  { let c = rem % P.d${k}; rem = rem / P.d${k}; ia = ia + c * P.sa${k}; ib = ib + c * P.sb${k}; }\n`;
  }
  const kernel: Kernel = memoKernel(`binary_${op}_r${r}`, () => ({
    label: `binary_${op}_r${r}`,
    buffers: [
      { name: "b_a", type: "f32", write: false },
      { name: "b_b", type: "f32", write: false },
      { name: "b_out", type: "f32", write: true },
    ],
    params: u32s(...names),
    code: `${entry(EW_WG)} {
  let i = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (i >= P.n) { return; }
  var rem = i;
  var ia = P.aoff;
  var ib = P.boff;
${idx}  let a = b_a[ia];
  let b = b_b[ib];
  b_out[P.ooff + i] = ${opExpr(op)};
}`,
  }));
  return { kernel, bufs: [a, b, out], params, workgroups: groups(plan.total) };
}
