/**
 * The per-kernel GPU profile of a training run (`ZEROMOE_PROFILE_KERNELS=FILE`,
 * core/src/train/backend.ts): the backend was created with `profile: true`, so every dispatch ran
 * in its own compute pass with timestamp queries (kernels/src/webgpu/profiler.ts). The first step
 * (pipeline compilation, first-touch allocations) is left out: its totals are reset when it ends,
 * and what is written covers the steps after it.
 */
import { writeFileSync } from "node:fs";
import type { Backend } from "@zeromoe/kernels";

/** One kernel label's totals over the profiled steps. */
export interface KernelProfileRow {
  label: string;
  /** GPU milliseconds per step (sum of its passes' end − begin, divided by `steps`). */
  ms_per_step: number;
  dispatches_per_step: number;
  /** Its share of all profiled GPU time, 0..1. */
  share: number;
}

/** The file's content. */
export interface KernelProfile {
  steps: number;
  gpu_ms_per_step: number;
  dispatches_per_step: number;
  kernels: KernelProfileRow[];
}

type ProfilingBackend = Backend & { profile(): Promise<{ label: string; dispatches: number; ns: number }[]>; resetProfile(): void };

function profiling(be: Backend): ProfilingBackend | null {
  const b = be as Partial<ProfilingBackend>;
  return typeof b.profile === "function" && typeof b.resetProfile === "function" ? (be as ProfilingBackend) : null;
}

/** Forget the totals so far (called after the first step). A no-op on backends without a profiler. */
export async function resetKernelProfile(be: Backend): Promise<void> {
  const p = profiling(be);
  if (!p) return;
  await p.profile();
  p.resetProfile();
}

/**
 * Read the totals since the last reset and write them to `path` as {@link KernelProfile} JSON,
 * longest kernel first. `steps`: how many steps they cover (≥ 1).
 * @returns the profile, or null when `be` has no profiler (cpu backend: nothing is written).
 * @throws Error from the file system (naming the path).
 */
export async function writeKernelProfile(be: Backend, path: string, steps: number): Promise<KernelProfile | null> {
  const p = profiling(be);
  if (!p) return null;
  const rows = await p.profile();
  const n = Math.max(1, steps);
  const totalNs = rows.reduce((a, r) => a + r.ns, 0);
  const profile: KernelProfile = {
    steps: n,
    gpu_ms_per_step: totalNs / 1e6 / n,
    dispatches_per_step: rows.reduce((a, r) => a + r.dispatches, 0) / n,
    kernels: rows.map((r) => ({ label: r.label, ms_per_step: r.ns / 1e6 / n, dispatches_per_step: r.dispatches / n, share: totalNs > 0 ? r.ns / totalNs : 0 })),
  };
  writeFileSync(path, JSON.stringify(profile, null, 1) + "\n");
  return profile;
}
