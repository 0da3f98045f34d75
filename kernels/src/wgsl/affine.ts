/**
 * affine (y = α·x + β) and axpy (y += α·x), f32, one invocation per element.
 */
import type { Buf } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { entry, EW_WG, f32s, groups, u32s, memoKernel } from "./launch.ts";

/** Launch y[yoff+i] = alpha·x[xoff+i] + beta, i < n (x and y may be the same view). */
export function affineLaunch(x: Buf, xoff: number, y: Buf, yoff: number, n: number, alpha: number, beta: number): Launch {
  const kernel: Kernel = memoKernel("affine", () => ({
    label: "affine",
    buffers: [
      { name: "b_x", type: "f32", write: false },
      { name: "b_y", type: "f32", write: true },
    ],
    params: [...u32s("xoff", "yoff", "n"), ...f32s("alpha", "beta")],
    code: `${entry(EW_WG)} {
  let i = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (i >= P.n) { return; }
  b_y[P.yoff + i] = P.alpha * b_x[P.xoff + i] + P.beta;
}`,
  }));
  return { kernel, bufs: [x, y], params: [xoff, yoff, n, alpha, beta], workgroups: groups(n) };
}

/** Launch y[yoff+i] += alpha·x[xoff+i], i < n. */
export function axpyLaunch(alpha: number, x: Buf, xoff: number, y: Buf, yoff: number, n: number): Launch {
  const kernel: Kernel = memoKernel("axpy", () => ({
    label: "axpy",
    buffers: [
      { name: "b_x", type: "f32", write: false },
      { name: "b_y", type: "f32", write: true },
    ],
    params: [...u32s("xoff", "yoff", "n"), ...f32s("alpha")],
    code: `${entry(EW_WG)} {
  let i = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (i >= P.n) { return; }
  b_y[P.yoff + i] = b_y[P.yoff + i] + P.alpha * b_x[P.xoff + i];
}`,
  }));
  return { kernel, bufs: [x, y], params: [xoff, yoff, n, alpha], workgroups: groups(n) };
}
