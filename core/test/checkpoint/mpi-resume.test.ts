/**
 * Checkpoints on the `mpi` transport (one process per rank under mpirun):
 * - exact resume at world 2 and 4: a run stopped at step K, saved and resumed in fresh processes
 *   reproduces the uninterrupted run's losses K+1…N and final parameters bit for bit, and both
 *   equal the `local` transport's uninterrupted run (ZeRO-1 and ZeRO-3, ep_size 1 and 2, and
 *   ep_size 4 at world 4);
 * - across transports and world sizes: a checkpoint written by an mpi run at world 4 resumes under
 *   `local` at world 1, which trains on and saves; that checkpoint resumes under mpi at world 2.
 *   The global batch is fixed (world × gradient_accumulation_steps = 4); world 4 (accumulation
 *   1) → world 1 (accumulation 4) sums the gradients in the same order, so the continuation is
 *   bit-identical (core/test/engine/equivalence.test.ts); world 2 (accumulation 2) sums them in
 *   another order: stated tolerance 1e-5 on losses and parameters (as reshard.test.ts).
 * Skips with a message when Open MPI is absent.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { launch } from "../../src/launch/index.ts";
import { launchMpi } from "../../src/launch/mpi-launch.ts";
import { MPI_AVAILABLE } from "../comm/mpi/mpi-available.ts";
import { awkwardModel, tinyJob } from "../engine/fixtures.ts";
import { assemble, CKPT_ENTRY, type Run, type RunOut } from "./fixture.ts";

const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-mpi-resume-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));

const MIX4 = { ...awkwardModel(), num_local_experts: 4 };
const N = 4;
const K = 2;

function job(stage: number, ep: number, accum = 1): Record<string, unknown> {
  return tinyJob({
    model: ep > 1 ? MIX4 : awkwardModel(),
    gradient_accumulation_steps: accum,
    zero_optimization: { stage, stage3_param_persistence_threshold: 0 },
    ...(ep > 1 ? { moe: { ep_size: ep } } : {}),
  });
}

interface Case {
  world: number;
  stage: number;
  ep: number;
}
const CASES: Case[] = [
  { world: 2, stage: 1, ep: 1 },
  { world: 2, stage: 3, ep: 2 },
  { world: 4, stage: 1, ep: 2 },
  { world: 4, stage: 3, ep: 4 },
];
const name = (c: Case) => `world ${c.world}, ZeRO-${c.stage}, ep_size ${c.ep}`;

/** exact[i] = { local full run, mpi full run, mpi resumed run } per rank. */
const exact: { localFull: RunOut[]; mpiFull: RunOut[]; mpiResumed: RunOut[] }[] = [];
/** The transport round trip (file comment). */
let trip: { a: RunOut[]; b: RunOut[]; c: RunOut[] } | null = null;

beforeAll(async () => {
  if (!MPI_AVAILABLE) return;
  for (const w of [2, 4]) {
    const idx = CASES.map((c, i) => [c, i] as const).filter(([c]) => c.world === w);
    const full: Run[] = idx.map(([c]) => ({ job: job(c.stage, c.ep), ops: [{ op: "train", steps: N }, { op: "snapshot" }] }));
    const saveThenLoad: Run[] = idx.flatMap(([c, i]) => {
      const dir = join(ROOT, `case${i}`);
      return [
        { job: job(c.stage, c.ep), ops: [{ op: "train", steps: K }, { op: "save", dir, tag: `step${K}` }] },
        { job: job(c.stage, c.ep), ops: [{ op: "load", dir }, { op: "train", steps: N - K }, { op: "snapshot" }] },
      ] as Run[];
    });
    const local = await launch<RunOut[]>({ worldSize: w, entry: CKPT_ENTRY, args: { runs: full }, timeoutS: 120 });
    // one mpirun for the full runs and the save, another (fresh processes) for the resumes
    const runs = [...full, ...saveThenLoad.filter((_, j) => j % 2 === 0)];
    const m1 = await launchMpi<RunOut[]>({ worldSize: w, entry: CKPT_ENTRY, args: { runs }, timeoutS: 120, wallTimeoutS: 300 });
    const m2 = await launchMpi<RunOut[]>({ worldSize: w, entry: CKPT_ENTRY, args: { runs: saveThenLoad.filter((_, j) => j % 2 === 1) }, timeoutS: 120, wallTimeoutS: 300 });
    idx.forEach(([, i], j) => {
      exact[i] = { localFull: local.map((r) => r[j]!), mpiFull: m1.map((r) => r[j]!), mpiResumed: m2.map((r) => r[j]!) };
    });
  }
  // round trip: mpi world 4 → local world 1 → mpi world 2 (global batch 4 throughout)
  const d1 = join(ROOT, "trip-mpi4");
  const d2 = join(ROOT, "trip-local1");
  const a = await launchMpi<RunOut[]>({
    worldSize: 4, entry: CKPT_ENTRY, timeoutS: 120, wallTimeoutS: 300,
    args: { runs: [{ job: job(2, 1, 1), ops: [{ op: "train", steps: K }, { op: "save", dir: d1, tag: "a" }, { op: "train", steps: 2 }, { op: "snapshot" }] }] },
  });
  const b = await launch<RunOut[]>({
    worldSize: 1, entry: CKPT_ENTRY, timeoutS: 120,
    args: { runs: [{ job: job(0, 1, 4), ops: [{ op: "load", dir: d1 }, { op: "train", steps: 2 }, { op: "snapshot" }, { op: "save", dir: d2, tag: "b" }, { op: "train", steps: 2 }, { op: "snapshot" }] }] },
  });
  const c = await launchMpi<RunOut[]>({
    worldSize: 2, entry: CKPT_ENTRY, timeoutS: 120, wallTimeoutS: 300,
    args: { runs: [{ job: job(3, 1, 2), ops: [{ op: "load", dir: d2 }, { op: "train", steps: 2 }, { op: "snapshot" }] }] },
  });
  trip = { a: a.map((r) => r[0]!), b: b.map((r) => r[0]!), c: c.map((r) => r[0]!) };
}, 600_000);

describe.skipIf(!MPI_AVAILABLE)("checkpoints on the mpi transport", () => {
  CASES.forEach((c, i) => {
    test(`exact resume, ${name(c)}: resumed = uninterrupted (mpi) = uninterrupted (local), bit for bit`, () => {
      const { localFull, mpiFull, mpiResumed } = exact[i]!;
      expect(mpiResumed[0]!.loads[0]!.step).toBe(K);
      expect(mpiResumed[0]!.loads[0]!.resharded).toBe(false);
      expect(mpiFull[0]!.losses).toEqual(localFull[0]!.losses);
      expect(mpiResumed[0]!.losses).toEqual(mpiFull[0]!.losses.slice(K));
      expect(new Set(mpiFull[0]!.losses).size).toBe(N); // the losses move
      const l = assemble(localFull.map((r) => r.snapshots[0]!));
      const f = assemble(mpiFull.map((r) => r.snapshots[0]!));
      const r = assemble(mpiResumed.map((x) => x.snapshots[0]!));
      expect([...r.keys()].sort()).toEqual([...l.keys()].sort());
      for (const [k, v] of l) {
        expect(f.get(k)).toEqual(v);
        expect(r.get(k)).toEqual(v);
      }
    });
  });

  test("an mpi checkpoint (world 4) resumes under local (world 1) bit for bit, and local's resumes under mpi (world 2) within 1e-5", () => {
    const { a, b, c } = trip!;
    expect(b[0]!.loads[0]!).toMatchObject({ step: K, resharded: true });
    expect(c[0]!.loads[0]!).toMatchObject({ step: K + 2, resharded: true });
    // mpi world 4 continued vs local world 1 continued from mpi's checkpoint: identical
    expect(b[0]!.losses.slice(0, 2)).toEqual(a[0]!.losses.slice(K));
    const endA = assemble(a.map((r) => r.snapshots[0]!));
    const midB = assemble(b.map((r) => r.snapshots[0]!));
    for (const [k, v] of endA) expect(midB.get(k)).toEqual(v);
    // mpi world 2 continued from local's checkpoint vs local continued: 1e-5
    const endB = assemble(b.map((r) => r.snapshots[1]!));
    const endC = assemble(c.map((r) => r.snapshots[0]!));
    c[0]!.losses.forEach((x, s) => expect(Math.abs(x - b[0]!.losses[2 + s]!)).toBeLessThan(1e-5));
    let maxd = 0;
    let moved = 0;
    for (const [k, v] of endB) {
      v.forEach((x, j) => {
        maxd = Math.max(maxd, Math.abs(x - endC.get(k)![j]!));
        moved = Math.max(moved, Math.abs(x - midB.get(k)![j]!));
      });
    }
    expect(maxd).toBeLessThan(1e-5);
    expect(moved).toBeGreaterThan(1e-4); // training moved the parameters in between
  });
});
