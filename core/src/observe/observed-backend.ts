/**
 * A Backend that times host↔device copies for the wall-clock breakdown (`read`/`write` →
 * the `transfer` phase, phase-timer.ts) and counts the floating-point operations of the
 * compute-heavy kernels for the FLOPs profiler (flops-profiler.ts). Every other member is the
 * backend's own. On the webgpu backend `read` also waits for the queued kernels, so its time
 * includes theirs (documented in docs/summary.md).
 *
 * FLOP counts (one multiply-add = 2 FLOPs, as DeepSpeed's profiler's "FLOPS = 2 × MACs"):
 * - matmul: 2·M·N·K·batch; groupedMatmul: 2·R·N·K (R = rows of all groups).
 * - attention (causal): 2·B·H·S²·D (QKᵀ and PV over the lower triangle: 2 × 2·B·H·S·S·D / 2);
 *   attentionBackward: 2.5 × that (dQ, dK, dV and the recomputed scores; FlashAttention-2 §3.1).
 * Elementwise kernels (norms, activations, softmax, AdamW) are not counted (DeepSpeed counts them
 * as a negligible share; here they are left out and the total says "matmul and attention FLOPs").
 */
import type { Backend, GroupedMatmulSpec, MatmulSpec } from "@zeromoe/kernels";
import type { PhaseTimer } from "./phase-timer.ts";

/** Receives counted FLOPs (the profiler attributes them to the current module). */
export interface FlopSink {
  add(flops: number): void;
}

/** The counters an observed backend feeds (set or cleared at any time). */
export interface BackendObservers {
  timer: PhaseTimer | null;
  flops: FlopSink | null;
}

/** FLOPs of a matmul spec. */
export function matmulFlops(s: MatmulSpec): number {
  return 2 * s.M * s.N * s.K * (s.batch ?? 1);
}

/** FLOPs of a grouped matmul spec. */
export function groupedMatmulFlops(s: GroupedMatmulSpec): number {
  const R = s.offsets[s.offsets.length - 1] ?? 0;
  return 2 * R * s.N * s.K;
}

/** FLOPs of a causal attention forward. */
export function attentionFlops(B: number, S: number, H: number, D: number): number {
  return 2 * B * H * S * S * D;
}

/**
 * `be` observed by `obs` (module comment). `obs` is read at every call, so its fields may change.
 */
export function observeBackend<B extends Backend>(be: B, obs: BackendObservers): B {
  const bound = new Map<PropertyKey, unknown>();
  const wrap: Record<string, (f: (...a: unknown[]) => unknown) => (...a: unknown[]) => unknown> = {
    read: (f) => (...a) => (obs.timer ? obs.timer.time("transfer", () => f(...a)) : f(...a)),
    write: (f) => (...a) => (obs.timer ? obs.timer.time("transfer", () => f(...a)) : f(...a)),
    matmul: (f) => (...a) => {
      obs.flops?.add(matmulFlops(a[3] as MatmulSpec));
      return f(...a);
    },
    groupedMatmul: (f) => (...a) => {
      obs.flops?.add(groupedMatmulFlops(a[3] as GroupedMatmulSpec));
      return f(...a);
    },
    attention: (f) => (...a) => {
      obs.flops?.add(attentionFlops(a[5] as number, a[6] as number, a[7] as number, a[9] as number));
      return f(...a);
    },
    attentionBackward: (f) => (...a) => {
      obs.flops?.add(2.5 * attentionFlops(a[9] as number, a[10] as number, a[11] as number, a[13] as number));
      return f(...a);
    },
  };
  return new Proxy(be, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target);
      if (typeof v !== "function") return v;
      let f = bound.get(prop);
      if (!f) {
        const b = (v as (...a: unknown[]) => unknown).bind(target);
        const w = typeof prop === "string" ? wrap[prop] : undefined;
        f = w ? w(b) : b;
        bound.set(prop, f);
      }
      return f;
    },
  });
}

