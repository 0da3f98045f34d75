/**
 * A rank that fails after its engine is built (here: the divergence policy stops the run, exit 4)
 * still removes its NVMe state directories under nvme_path; before, every failed run (a full drive,
 * a diverged run) left its zeromoe-offload-r<rank>-* directories behind, taking more space per retry.
 */
import { afterAll, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { spawnSync } from "node:child_process";
import { scriptArgv } from "@zeromoe/kernels/runtime";

const ROOT = mkdtempSync(join(tmpdir(), "offload-cleanup-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));
const TRAIN = resolve(import.meta.dirname, "../../../core/src/cli/train.ts");

test("a diverged run (exit 4) leaves no NVMe state directories behind", () => {
  const nvme = join(ROOT, "nvme");
  const ds = join(ROOT, "ds.json");
  writeFileSync(ds, JSON.stringify({ train_micro_batch_size_per_gpu: 2, optimizer: { type: "AdamW", params: { lr: 1e10 } }, zero_optimization: { stage: 1, offload_optimizer: { device: "nvme", nvme_path: nvme } } }));
  // the default job (max_bad_steps 10): diverges from the first steps at this learning rate
  const [cmd, ...args] = scriptArgv(TRAIN);
  const r = spawnSync(cmd!, [...args, "--backend", "cpu", "--steps", "40", "--deepspeed", ds], { env: { ...process.env, CI: "1" }, stdio: ["ignore", "pipe", "pipe"] });
  expect(r.status, r.stderr.toString()).toBe(4);
  expect(r.stderr.toString()).toContain("training diverged");
  expect(readdirSync(nvme)).toEqual([]);
}, 300_000);
