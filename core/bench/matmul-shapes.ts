/**
 * The matmuls of a mixtral-med training step (core/bench/train.ts: hidden 1024, intermediate 2816,
 * 16 heads / 8 kv heads of 64, vocab 256, 8 × 1024 tokens; experts at the even-routing 2048 rows
 * each) and 4096³, through the webgpu backend's matmul op: GPU time per call from timestamp queries
 * (`profile: true`), TFLOP/s. The PyTorch counterpart with the same shapes is
 * core/bench/torch_matmul_shapes.py (same names).
 *
 *   bun core/bench/matmul-shapes.ts [--reps 10] [--split-k both|on|off]
 *
 * Operands are random in [-1, 1); `acc` shapes accumulate into the output (parameter gradients).
 */
import { createBackend, type MatmulSpec, type View, type WebGpuBackend } from "@zeromoe/kernels";

/** name → spec; shared with torch_matmul_shapes.py by name. */
export const STEP_MATMULS: Readonly<Record<string, MatmulSpec>> = {
  "qo_proj_fwd": { M: 8192, N: 1024, K: 1024, transB: true },
  "kv_proj_fwd": { M: 8192, N: 512, K: 1024, transB: true },
  "proj_dX": { M: 8192, N: 1024, K: 1024 },
  "qo_proj_dW": { M: 1024, N: 1024, K: 8192, transA: true, accumulate: true },
  "kv_proj_dW": { M: 512, N: 1024, K: 8192, transA: true, accumulate: true },
  "head_fwd": { M: 8192, N: 256, K: 1024, transB: true },
  "head_dX": { M: 8192, N: 1024, K: 256 },
  "head_dW": { M: 256, N: 1024, K: 8192, transA: true, accumulate: true },
  "expert_fwd": { M: 2048, N: 2816, K: 1024, transB: true },
  "expert_dX": { M: 2048, N: 1024, K: 2816 },
  "expert_dW": { M: 2816, N: 1024, K: 2048, transA: true, accumulate: true },
  "square_4096": { M: 4096, N: 4096, K: 4096 },
};

function arg(name: string, def: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1]! : def;
}

if (import.meta.main) {
  const reps = Number(arg("reps", "10"));
  const sk = arg("split-k", "both");
  for (const split of sk === "both" ? [true, false] : [sk === "on"]) {
    const be = (await createBackend("webgpu", { profile: true, matmulSplitK: split })).backend as WebGpuBackend;
    console.log(`adapter ${be.info.adapter}; split-K ${split ? "on" : "off"}`);
    for (const [name, spec] of Object.entries(STEP_MATMULS)) {
      const { M, N, K } = spec;
      const put = (n: number, seed: number): View => {
        const v = { buf: be.alloc("f32", n, "other"), off: 0 };
        let s = seed;
        be.write(v, Float32Array.from({ length: n }, () => ((s = (s * 1103515245 + 12345) >>> 0) / 2 ** 32) * 2 - 1));
        return v;
      };
      const a = put(M * K, 1), b = put(K * N, 2), c = put(M * N, 3);
      be.matmul(a, b, c, spec);
      await be.profile();
      be.resetProfile();
      for (let r = 0; r < reps; r++) be.matmul(a, b, c, spec);
      const rows = await be.profile();
      be.resetProfile();
      const ms = rows.reduce((x, r) => x + r.ns, 0) / 1e6 / reps;
      console.log(JSON.stringify({ name, M, N, K, transA: !!spec.transA, transB: !!spec.transB, acc: !!spec.accumulate, split, ms: +ms.toFixed(4), tflops: +((2 * M * N * K) / ms / 1e9).toFixed(2), kernels: rows.map((r) => r.label) }));
      for (const v of [a, b, c]) be.free(v.buf);
    }
    be.destroy();
  }
}
