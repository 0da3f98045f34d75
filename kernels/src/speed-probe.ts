/**
 * A short measured probe that compares two backends on the shape of a job, for `backend: auto`
 * when the only WebGPU adapter is a software (CPU-type) one such as Mesa's lavapipe: both run on
 * the same CPU cores, and which is faster depends on the job (a software Vulkan driver runs wide
 * matmuls on every core; the TypeScript backend has no per-dispatch overhead). On a hardware
 * adapter no probe is run (select.ts).
 *
 * One probe repetition is the kernel mix of one transformer feed-forward step at the job's sizes:
 * x[T,h]·W1[h,f] → silu → ·W2[f,h] → row softmax, then the backward-like matmuls dW2 = yᵀ·dz and
 * dx = dz·W2ᵀ, and one read-back of a single element (training syncs once per step the same way).
 * Each backend runs one warm-up repetition (pipeline compilation, allocation) and then timed ones;
 * the figure is the fastest repetition, in milliseconds. When two backends are compared their
 * repetitions alternate (select.ts), so a change of load on a shared machine hits both alike.
 */
import type { Backend, Buf } from "./backend.ts";

/** The sizes the probe uses: tokens per micro-batch, hidden size, feed-forward width. */
export interface ProbeShape {
  tokens: number;
  hidden: number;
  ffn: number;
}

/** The default probe shape (the built-in job: 8 × 64 tokens, hidden 64, feed-forward 128). */
export const DEFAULT_PROBE_SHAPE: ProbeShape = { tokens: 512, hidden: 64, ffn: 128 };

/** Largest multiply-adds of one probe matmul (T·h·f); bigger jobs are probed with fewer tokens, so
 * the probe stays well under a second on a slow CPU. */
export const PROBE_MAX_MACS = 2 ** 25;

/**
 * The shape actually probed: every size a positive integer, hidden and ffn capped at 4096, and
 * tokens reduced until tokens·hidden·ffn ≤ {@link PROBE_MAX_MACS} (at least 1 token).
 * @throws Error when a size is not a positive finite number.
 */
export function clampProbeShape(s: ProbeShape): ProbeShape {
  for (const [k, v] of Object.entries(s)) {
    if (!Number.isFinite(v) || v < 1) throw new Error(`probe shape: ${k} must be a positive number, got ${v}`);
  }
  const hidden = Math.min(4096, Math.floor(s.hidden));
  const ffn = Math.min(4096, Math.floor(s.ffn));
  const tokens = Math.max(1, Math.min(Math.floor(s.tokens), Math.floor(PROBE_MAX_MACS / (hidden * ffn))));
  return { tokens, hidden, ffn };
}

/** Deterministic values in [-0.5, 0.5) (no zeros-only inputs: a driver may shortcut those). */
function values(n: number, salt: number): Float32Array {
  const out = new Float32Array(n);
  let s = (salt * 2654435761) >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = s / 2 ** 32 - 0.5;
  }
  return out;
}

/** A probe set up on one backend: `run()` times one repetition (ms); `free()` releases it. */
export interface PreparedProbe {
  run(): Promise<number>;
  free(): void;
}

/**
 * Allocate and fill the probe's buffers on `be` and run the warm-up repetition (pipeline
 * compilation, first allocation). The caller times repetitions with `run()` and must `free()`.
 * @throws whatever the backend throws (allocation refused, device lost); buffers are freed then.
 */
export async function prepareProbe(be: Backend, shape: ProbeShape): Promise<PreparedProbe> {
  const { tokens: T, hidden: h, ffn: f } = clampProbeShape(shape);
  const bufs: Buf[] = [];
  const free = (): void => {
    for (const b of bufs.splice(0)) be.free(b);
  };
  const alloc = (n: number, salt?: number): Buf => {
    const b = be.alloc("f32", n, "other");
    bufs.push(b);
    if (salt !== undefined) be.write({ buf: b, off: 0 }, values(n, salt));
    return b;
  };
  try {
    const x = alloc(T * h, 1);
    const w1 = alloc(h * f, 2);
    const w2 = alloc(f * h, 3);
    const y = alloc(T * f);
    const a = alloc(T * f);
    const z = alloc(T * h);
    const p = alloc(T * h);
    const dw2 = alloc(f * h);
    const dx = alloc(T * f);
    const v = (buf: Buf) => ({ buf, off: 0 });
    const once = async (): Promise<void> => {
      be.matmul(v(x), v(w1), v(y), { M: T, N: f, K: h });
      be.unary("silu", v(y), v(a), T * f);
      be.matmul(v(a), v(w2), v(z), { M: T, N: h, K: f });
      be.softmax(v(z), v(p), T, h, false);
      be.matmul(v(a), v(p), v(dw2), { M: f, N: h, K: T, transA: true });
      be.matmul(v(p), v(w2), v(dx), { M: T, N: f, K: h, transB: true });
      await be.read(v(dx), 1);
    };
    await once();
    return {
      run: async () => {
        const t0 = performance.now();
        await once();
        return performance.now() - t0;
      },
      free,
    };
  } catch (e) {
    free();
    throw e;
  }
}

/**
 * Time the probe on `be` (see the module comment) and return the fastest of `reps` repetitions in
 * ms. Buffers are freed before returning, also on error.
 * @throws whatever the backend throws (allocation refused, device lost).
 */
export async function timeProbe(be: Backend, shape: ProbeShape, reps = 3): Promise<number> {
  const p = await prepareProbe(be, shape);
  try {
    let best = Infinity;
    for (let r = 0; r < reps; r++) best = Math.min(best, await p.run());
    return best;
  } finally {
    p.free();
  }
}
