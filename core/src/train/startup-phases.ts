/**
 * Wall-clock phases of a rank's start-up, from the process's start to the end of the first training
 * step, printed by rank 0 as one `startup` line, e.g.
 *
 *   startup    step 1 done 12.4 s after start: launch 1.1, backend 0.8, plugins + memory check 0.1,
 *              data 0.3, model build 0.0, plugin set-up 0.0, parameters + states 2.1, master weights 0.2,
 *              first step 7.8 (pipeline compiles 6.5 s, 57 pipelines)
 *
 * A phase ends when {@link StartupPhases.mark} is called; the caller waits for the device first
 * (`Backend.flush`), so enqueued GPU work is counted in the phase that enqueued it. `launch` is the
 * time from the process's start (bun start-up, config, plugin loading, the launcher) to the rank's
 * first line of code.
 */

/** One finished phase. */
export interface StartupPhase {
  name: string;
  seconds: number;
}

/** Pipeline compile figures of a backend that keeps them (the webgpu backend's `stats()`). */
function pipelineStats(be: unknown): { ms: number; count: number } | null {
  const s = (be as { stats?: () => { pipelineMs?: number; pipelines?: number } }).stats;
  if (typeof s !== "function") return null;
  const st = s.call(be);
  return typeof st.pipelineMs === "number" ? { ms: st.pipelineMs, count: st.pipelines ?? 0 } : null;
}

/** The phases of one rank's start-up (see the module comment). */
export class StartupPhases {
  readonly phases: StartupPhase[] = [];
  private last: number;
  private pipelines0: { ms: number; count: number } | null = null;

  /**
   * @param processStartMs epoch milliseconds of the process's start (a rank in a worker thread gets
   *   it from its launcher: the worker's own clock starts later); default: this thread's start.
   */
  constructor(processStartMs?: number) {
    const now = Date.now();
    const start = processStartMs ?? now - process.uptime() * 1000;
    this.last = now;
    this.phases.push({ name: "launch", seconds: Math.max(0, (now - start) / 1000) });
  }

  /** End the current phase as `name` (now minus the previous mark). */
  mark(name: string): void {
    const now = Date.now();
    this.phases.push({ name, seconds: (now - this.last) / 1000 });
    this.last = now;
  }

  /** Remember the backend's pipeline-compile figures at the start of the first step. */
  beforeFirstStep(be: unknown): void {
    this.pipelines0 = pipelineStats(be);
  }

  /** Seconds from the process's start to the last mark. */
  get total(): number {
    return this.phases.reduce((s, p) => s + p.seconds, 0);
  }

  /** The `startup` log line; call after marking "first step". `be` gives the pipeline figures. */
  line(be: unknown): string {
    const parts = this.phases.map((p) => `${p.name} ${p.seconds.toFixed(1)}`);
    const p1 = pipelineStats(be);
    if (p1 && this.pipelines0 && parts.length > 0) {
      const ms = p1.ms - this.pipelines0.ms;
      parts[parts.length - 1] += ` (pipeline compiles ${(ms / 1000).toFixed(1)} s, ${p1.count - this.pipelines0.count} pipelines)`;
    }
    const before = p1 ? `, ${((this.pipelines0?.ms ?? 0) / 1000).toFixed(1)} s of pipeline compiles before it` : "";
    return `startup    step 1 done ${this.total.toFixed(1)} s after start${before}: ${parts.join(", ")}`;
  }
}
