/**
 * AutoEP resume across autoep_size: a qwen3_moe job (4 experts, MoE layers 0 and 2, layer 1 dense)
 * with `expert_parallel` saved at one autoep_size / world size / ZeRO stage loads at another with
 * the same parameters (bit for bit), and continues as the saving run does: losses and parameters
 * within 1e-5 after 2 more steps (expert gradients are summed in another order across ep sizes,
 * docs/moe.md). Cases: autoep 2 (world 2, ZeRO-2) → autoep 4 (world 4, ZeRO-3); autoep 4 (world 4,
 * ZeRO-1) → autoep 1 (world 2, ZeRO-0).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { launch } from "../../src/launch/index.ts";
import { tinyJob } from "../engine/fixtures.ts";
import { assemble, CKPT_ENTRY, type RunOut } from "./fixture.ts";

const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-autoep-reshard-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));

const QWEN = {
  model_type: "qwen3_moe", vocab_size: 256, hidden_size: 16, intermediate_size: 7, num_hidden_layers: 3,
  num_attention_heads: 2, num_key_value_heads: 1, head_dim: 6, num_local_experts: 4, num_experts_per_tok: 2,
  moe_intermediate_size: 5, norm_topk_prob: true, mlp_only_layers: [1], output_router_logits: true, router_aux_loss_coef: 0.02,
  max_position_embeddings: 64,
};
interface Side { world: number; stage: number; size: number }
const K = 2;
const MORE = 2;
const CASES: { from: Side; to: Side }[] = [
  { from: { world: 2, stage: 2, size: 2 }, to: { world: 4, stage: 3, size: 4 } },
  { from: { world: 4, stage: 1, size: 4 }, to: { world: 2, stage: 0, size: 1 } },
];
const job = (s: Side) => tinyJob({
  model: QWEN, gradient_accumulation_steps: 4 / s.world, zero_optimization: { stage: s.stage, stage3_param_persistence_threshold: 0 },
  expert_parallel: { enabled: true, autoep_size: s.size, preset_model: "qwen3_moe" },
});

describe("AutoEP: resume across autoep_size", () => {
  CASES.forEach((c, i) => {
    test(`autoep ${c.from.size} (world ${c.from.world}, ZeRO-${c.from.stage}) → autoep ${c.to.size} (world ${c.to.world}, ZeRO-${c.to.stage})`, async () => {
      const dir = join(ROOT, `case${i}`);
      const src = await launch<RunOut[]>({ worldSize: c.from.world, entry: CKPT_ENTRY, timeoutS: 240, args: { runs: [
        { job: job(c.from), ops: [{ op: "train", steps: K }, { op: "save", dir, tag: "t" }, { op: "snapshot" }, { op: "train", steps: MORE }, { op: "snapshot" }] },
      ] } });
      const dst = await launch<RunOut[]>({ worldSize: c.to.world, entry: CKPT_ENTRY, timeoutS: 240, args: { runs: [
        { job: job(c.to), ops: [{ op: "load", dir }, { op: "snapshot" }, { op: "train", steps: MORE }, { op: "snapshot" }] },
      ] } });
      const s = src.map((r) => r[0]!);
      const d = dst.map((r) => r[0]!);
      expect(d[0]!.loads[0]!.resharded).toBe(true);
      expect(d[0]!.errors).toEqual([]);
      const saved = assemble(s.map((r) => r.snapshots[0]!));
      const loaded = assemble(d.map((r) => r.snapshots[0]!));
      expect([...loaded.keys()].sort()).toEqual([...saved.keys()].sort());
      expect([...saved.keys()].some((k) => k.includes("experts"))).toBe(true);
      for (const [k, v] of saved) expect(loaded.get(k)).toEqual(v);
      for (let t = 0; t < MORE; t++) expect(Math.abs(d[0]!.losses[t]! - s[0]!.losses[K + t]!)).toBeLessThan(1e-5);
      const endA = assemble(s.map((r) => r.snapshots[1]!));
      const endB = assemble(d.map((r) => r.snapshots[1]!));
      let maxd = 0;
      let moved = 0;
      for (const [k, v] of endA) v.forEach((x, j) => {
        maxd = Math.max(maxd, Math.abs(x - endB.get(k)![j]!));
        moved = Math.max(moved, Math.abs(saved.get(k)![j]! - endB.get(k)![j]!));
      });
      console.log(`case ${i}: max |Δparam| after ${MORE} more steps ${maxd.toExponential(2)}`);
      expect(maxd).toBeLessThan(1e-5);
      expect(moved).toBeGreaterThan(1e-4);
    }, 300_000);
  });
});
