/**
 * The start-up phase timer (core/src/train/startup-phases.ts): phases are the time between marks,
 * `launch` is the time since the given process start, the total is their sum, and the line names
 * every phase and, for a backend with pipeline figures, the compiles during the first step.
 */
import { describe, expect, test } from "bun:test";
import { StartupPhases } from "../../src/train/startup-phases.ts";

describe("StartupPhases", () => {
  test("phases between marks, launch from the process start, pipeline compiles of the first step", () => {
    const s = new StartupPhases(Date.now() - 1500);
    Bun.sleepSync(30);
    s.mark("backend");
    let stats = { pipelineMs: 400, pipelines: 3 };
    const be = { stats: () => stats };
    s.beforeFirstStep(be);
    stats = { pipelineMs: 2900, pipelines: 40 };
    Bun.sleepSync(20);
    s.mark("first step");
    expect(s.phases.map((p) => p.name)).toEqual(["launch", "backend", "first step"]);
    expect(s.phases[0]!.seconds).toBeGreaterThanOrEqual(1.4);
    expect(s.phases[1]!.seconds).toBeGreaterThanOrEqual(0.02);
    expect(s.total).toBeCloseTo(s.phases.reduce((a, p) => a + p.seconds, 0), 9);
    const line = s.line(be);
    expect(line).toMatch(/^startup {4}step 1 done \d+\.\d s after start, 0\.4 s of pipeline compiles before it: launch 1\.\d, backend 0\.\d, first step 0\.\d \(pipeline compiles 2\.5 s, 37 pipelines\)$/);
  });

  test("a backend without pipeline figures (cpu) gives the phases only", () => {
    const s = new StartupPhases();
    s.beforeFirstStep({});
    s.mark("first step");
    expect(s.line({})).toMatch(/^startup {4}step 1 done \d+\.\d s after start: launch \d+\.\d, first step 0\.0$/);
  });
});
