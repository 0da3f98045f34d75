/**
 * Checkpoints of offloaded optimizer states (host memory and NVMe files): a run that saves after 2
 * steps and resumes in a fresh engine continues exactly as the uninterrupted 4-step run (parameters,
 * losses and Adam moments bit-identical, bf16 and fp32 — fp32 keeps no master record: the host
 * master is rebuilt from the loaded parameters), and a checkpoint reshards across offload devices and world
 * sizes: saved with NVMe states at world 2 (ZeRO-3), loaded at world 1 on the device, at world 2
 * with cpu states and at world 4 with NVMe states (ZeRO-1) — every moment element the same.
 */
import { afterAll, describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { launch } from "@zeromoe/core/launch";
import { tinyJob } from "@zeromoe/core/testing";
import type { Op, ResumeArgs, ResumeOut } from "./fixtures/resume-entry.ts";

const ENTRY = join(import.meta.dirname, "fixtures/resume-entry.ts");
const root = mkdtempSync(join(tmpdir(), "offload-resume-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function job(stage: number, device: "none" | "cpu" | "nvme", over: Record<string, unknown> = {}, bf16 = true): Record<string, unknown> {
  return tinyJob({
    bf16: { enabled: bf16 },
    gradient_accumulation_steps: 2,
    zero_optimization: { stage, stage3_param_persistence_threshold: 0, offload_optimizer: { device, ...(device === "nvme" ? { nvme_path: join(root, "nvme") } : {}) } },
    ...over,
  });
}

async function run(world: number, j: Record<string, unknown>, ops: Op[]): Promise<ResumeOut[]> {
  return launch<ResumeOut, ResumeArgs>({ worldSize: world, entry: ENTRY, args: { job: j, ops } });
}

/** Moments of all ranks by unit: element index → value (every element once over the ranks). */
function moments(outs: ResumeOut[]): Map<string, Float64Array> {
  const out = new Map<string, number[]>();
  for (const o of outs) for (const [u, [start, vals]] of Object.entries(o.m)) {
    const a = out.get(u) ?? [];
    vals.forEach((v, i) => (a[start + i] = v));
    out.set(u, a);
  }
  return new Map([...out].map(([k, v]) => [k, Float64Array.from(v)]));
}

describe("offloaded optimizer states in checkpoints", () => {
  for (const [device, bf16] of [["cpu", true], ["nvme", true], ["cpu", false], ["nvme", false]] as const) {
    test(`${device}: save after 2 steps, resume in a fresh engine = 4 steps straight (${bf16 ? "bf16" : "fp32"}, world 2, ZeRO-2)`, async () => {
      const dir = join(root, `ck-${device}-${bf16}`);
      const straight = await run(2, job(2, device, {}, bf16), [{ op: "train", steps: 4 }]);
      await run(2, job(2, device, {}, bf16), [{ op: "train", steps: 2 }, { op: "save", dir, tag: "s2" }]);
      const resumed = await run(2, job(2, device, {}, bf16), [{ op: "load", dir }, { op: "train", steps: 2 }]);
      expect(resumed[0]!.losses).toEqual(straight[0]!.losses.slice(2));
      expect(resumed[0]!.params).toEqual(straight[0]!.params);
      expect([...moments(resumed)]).toEqual([...moments(straight)]);
    }, 300_000);
  }

  for (const device of ["cpu", "nvme"] as const) {
    test(`offload_param ${device} at ZeRO-3: save after 2 steps, resume = 4 steps straight; loads on the device at world 1`, async () => {
      const dir = join(root, `ck-param-${device}`);
      const j = job(3, device, { zero_optimization: { stage: 3, stage3_param_persistence_threshold: 0, offload_optimizer: { device, nvme_path: join(root, "nvme") }, offload_param: { device, nvme_path: join(root, "nvme-p"), max_in_cpu: 2000 } } });
      const straight = await run(2, j, [{ op: "train", steps: 4 }]);
      await run(2, j, [{ op: "train", steps: 2 }, { op: "save", dir, tag: "s2" }]);
      const resumed = await run(2, j, [{ op: "load", dir }, { op: "train", steps: 2 }]);
      expect(resumed[0]!.losses).toEqual(straight[0]!.losses.slice(2));
      expect(resumed[0]!.params).toEqual(straight[0]!.params);
      expect([...moments(resumed)]).toEqual([...moments(straight)]);
      const onDevice = await run(1, job(0, "none"), [{ op: "load", dir }, { op: "train", steps: 2 }]);
      const viaDevice = await run(2, job(3, "none"), [{ op: "load", dir }, { op: "train", steps: 2 }]);
      expect(onDevice[0]!.losses.length).toBe(2);
      expect(viaDevice[0]!.losses).toEqual(resumed[0]!.losses);
    }, 300_000);
  }

  test("reshards across offload devices and world sizes", async () => {
    const dir = join(root, "ck-reshard");
    const saved = await run(2, job(3, "nvme"), [{ op: "train", steps: 2 }, { op: "save", dir, tag: "s2" }]);
    const want = moments(saved);
    for (const [world, j] of [[1, job(1, "none")], [2, job(2, "cpu")], [4, job(1, "nvme", { gradient_accumulation_steps: 1 })]] as const) {
      const got = await run(world, j, [{ op: "load", dir }]);
      expect([...moments(got)]).toEqual([...want]);
      expect(got[0]!.params).toEqual(saved[0]!.params);
    }
  }, 300_000);
});
