/**
 * Resharding on load: a checkpoint saved at world size N (and ep_size e) loads at world size M
 * (and another valid ep_size, and another ZeRO stage) with the same parameters, and training
 * continues as it would have at N.
 *
 * The global batch is fixed (W × gradient_accumulation_steps constant, rank r taking micro-batch
 * slots r, r + W, …; fixtures.ts), so at fp32 with one micro-batch per rank at the larger world
 * the continued run matches the run continued at N (core/test/engine/equivalence.test.ts gives
 * bit-identity for world W, accumulation 1 vs world 1, accumulation W; other splits sum the same
 * gradients in another order: stated tolerance 1e-5 on losses and parameters).
 *
 * Cases: 2 → 1 (ZeRO-2 → ZeRO-0), 1 → 3 (ZeRO-0 → ZeRO-3; the awkward mixtral's units are not
 * multiples of 3, so every shard has padding), 4 → 2 with ep_size 2 → 1 (ZeRO-1 → ZeRO-2), and
 * 2 → 4 with ep_size 1 → 2 (ZeRO-3 → ZeRO-3).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { launch } from "../../src/launch/index.ts";
import { awkwardModel, tinyJob } from "../engine/fixtures.ts";
import { assemble, CKPT_ENTRY, type RunOut } from "./fixture.ts";

const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-reshard-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));

const MIX4 = { ...awkwardModel(), num_local_experts: 4 };
const K = 2;
const MORE = 2;

interface Side {
  world: number;
  stage: number;
  ep: number;
  /** Global batch = world × accum (the same on both sides). */
  accum: number;
}
interface Case {
  name: string;
  model: Record<string, unknown>;
  from: Side;
  to: Side;
  /** Bit-identical continuation expected. */
  exact: boolean;
}

const CASES: Case[] = [
  { name: "2 → 1, ZeRO-2 → ZeRO-0", model: awkwardModel(), from: { world: 2, stage: 2, ep: 1, accum: 1 }, to: { world: 1, stage: 0, ep: 1, accum: 2 }, exact: true },
  { name: "1 → 3, ZeRO-0 → ZeRO-3", model: awkwardModel(), from: { world: 1, stage: 0, ep: 1, accum: 3 }, to: { world: 3, stage: 3, ep: 1, accum: 1 }, exact: true },
  { name: "4 → 2, ep_size 2 → 1, ZeRO-1 → ZeRO-2", model: MIX4, from: { world: 4, stage: 1, ep: 2, accum: 1 }, to: { world: 2, stage: 2, ep: 1, accum: 2 }, exact: false },
  { name: "2 → 4, ep_size 1 → 2, ZeRO-3 → ZeRO-3", model: MIX4, from: { world: 2, stage: 3, ep: 1, accum: 2 }, to: { world: 4, stage: 3, ep: 2, accum: 1 }, exact: false },
];

function job(model: Record<string, unknown>, s: Side): Record<string, unknown> {
  return tinyJob({
    model,
    gradient_accumulation_steps: s.accum,
    zero_optimization: { stage: s.stage, stage3_param_persistence_threshold: 0 },
    ...(s.ep > 1 ? { moe: { ep_size: s.ep } } : {}),
  });
}

/** For every case: at the saving world size, train K, save, snapshot, continue MORE steps,
 * snapshot; at the loading world size, load, snapshot, continue MORE steps, snapshot. */
async function runAll(): Promise<{ src: RunOut[]; dst: RunOut[] }[]> {
  const byWorld = new Map<number, { idx: number; side: "src" | "dst"; run: { job: Record<string, unknown>; ops: never[] } }[]>();
  CASES.forEach((c, idx) => {
    const dir = join(ROOT, `case${idx}`);
    const add = (w: number, side: "src" | "dst", run: unknown) => {
      const list = byWorld.get(w) ?? [];
      list.push({ idx, side, run: run as { job: Record<string, unknown>; ops: never[] } });
      byWorld.set(w, list);
    };
    add(c.from.world, "src", { job: job(c.model, c.from), ops: [{ op: "train", steps: K }, { op: "save", dir, tag: "t" }, { op: "snapshot" }, { op: "train", steps: MORE }, { op: "snapshot" }] });
  });
  const out: { src: RunOut[]; dst: RunOut[] }[] = CASES.map(() => ({ src: [], dst: [] }));
  // saves first (all worlds), then loads
  for (const [w, list] of byWorld) {
    const res = await launch<RunOut[]>({ worldSize: w, entry: CKPT_ENTRY, args: { runs: list.map((l) => l.run) }, timeoutS: 120 });
    list.forEach((l, j) => (out[l.idx]!.src = res.map((r) => r[j]!)));
  }
  const loads = new Map<number, number[]>();
  CASES.forEach((c, idx) => loads.set(c.to.world, [...(loads.get(c.to.world) ?? []), idx]));
  for (const [w, idxs] of loads) {
    const runs = idxs.map((idx) => ({ job: job(CASES[idx]!.model, CASES[idx]!.to), ops: [{ op: "load", dir: join(ROOT, `case${idx}`) }, { op: "snapshot" }, { op: "train", steps: MORE }, { op: "snapshot" }] }));
    const res = await launch<RunOut[]>({ worldSize: w, entry: CKPT_ENTRY, args: { runs }, timeoutS: 120 });
    idxs.forEach((idx, j) => (out[idx]!.dst = res.map((r) => r[j]!)));
  }
  return out;
}

const results = runAll();

describe("resharding on load", () => {
  CASES.forEach((c, i) => {
    test(`${c.name}: same parameters after load, training continues as at the saving world size`, async () => {
      const { src, dst } = (await results)[i]!;
      expect(dst[0]!.loads[0]!.resharded).toBe(true);
      expect(dst[0]!.loads[0]!.step).toBe(K);
      // parameters right after loading equal the saved ones, bit for bit
      const saved = assemble(src.map((r) => r.snapshots[0]!));
      const loaded = assemble(dst.map((r) => r.snapshots[0]!));
      expect([...loaded.keys()].sort()).toEqual([...saved.keys()].sort());
      for (const [k, v] of saved) expect(loaded.get(k)).toEqual(v);
      // continuing: the optimizer states (m, v) and counters came across too
      const a = src[0]!.losses.slice(K);
      const b = dst[0]!.losses;
      expect(b.length).toBe(MORE);
      const endA = assemble(src.map((r) => r.snapshots[1]!));
      const endB = assemble(dst.map((r) => r.snapshots[1]!));
      if (c.exact) {
        expect(b).toEqual(a);
        for (const [k, v] of endA) expect(endB.get(k)).toEqual(v);
      } else {
        for (let s = 0; s < MORE; s++) expect(Math.abs(b[s]! - a[s]!)).toBeLessThan(1e-5);
        let maxd = 0;
        for (const [k, v] of endA) v.forEach((x, j) => (maxd = Math.max(maxd, Math.abs(x - endB.get(k)![j]!))));
        expect(maxd).toBeLessThan(1e-5);
      }
      // and training moved the parameters (the comparison is not between untouched copies)
      let moved = 0;
      for (const [k, v] of saved) v.forEach((x, j) => (moved = Math.max(moved, Math.abs(x - endB.get(k)![j]!))));
      expect(moved).toBeGreaterThan(1e-4);
    }, 300_000);
  });

  test("another expert placement at the same ep_size (contiguous → round_robin): same parameters, a warning", async () => {
    const dir = join(ROOT, "placement");
    const j = (placement: string) => tinyJob({ model: MIX4, zero_optimization: { stage: 2 }, moe: { ep_size: 2, placement } });
    await results; // after the other launches (2 cores)
    const res = await launch<RunOut[]>({
      worldSize: 2, entry: CKPT_ENTRY, timeoutS: 120,
      args: { runs: [
        { job: j("contiguous"), ops: [{ op: "train", steps: 1 }, { op: "save", dir, tag: "p" }, { op: "snapshot" }] },
        { job: j("round_robin"), ops: [{ op: "load", dir }, { op: "snapshot" }] },
      ] },
    });
    const saved = assemble(res.map((r) => r[0]!.snapshots[0]!));
    const loaded = assemble(res.map((r) => r[1]!.snapshots[0]!));
    for (const [k, v] of saved) expect(loaded.get(k)).toEqual(v);
    expect(res[0]![1]!.logs.join("\n")).toContain("the expert placement differs from the checkpoint's");
    expect(res[0]![0]!.logs.join("\n")).not.toContain("differs");
  }, 300_000);
});
