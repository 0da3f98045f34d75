/**
 * Re-signed manifests (issue 32): a manifest edited and given a fresh `manifest_sha256` passes the
 * checksum, so every field the loaders use must be checked against what the rank files and the
 * model hold. Before: an ep_size edited from 2 to 4 resumed and trained as if nothing were wrong,
 * and a parameter shape edited in the shard plan reached `writeParam` (a bare Error from
 * nn/state-dict.ts through cli/model-source.ts, or, with the same element count, a silent load into
 * the wrong layout). Now: the rank files record the layout they were written under (zero_stage,
 * ep_size, the expert placement's digest) and each load refuses a disagreement naming the manifest
 * field; eval/generate and zero-to-fp32 compare every parameter's name and shape with the model of
 * the manifest's config before reading or allocating (zero-to-fp32 wrote an edited shape or name
 * out as it was);
 * a model the host memory budget cannot hold is refused before it is built.
 * The checkpoint: a real world-2 ZeRO-2 run of a 4-expert Mixtral with ep_size 2 (fixture.ts).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { zeroToFp32 } from "../../src/checkpoint/consolidate.ts";
import { CheckpointError } from "../../src/checkpoint/errors.ts";
import { manifestText, readManifest, type CheckpointManifest } from "../../src/checkpoint/manifest.ts";
import { loadInferenceModel, UsageError } from "../../src/cli/model-source.ts";
import { launch } from "../../src/launch/index.ts";
import { awkwardModel, tinyJob } from "../engine/fixtures.ts";
import { CKPT_ENTRY, type RunOut } from "./fixture.ts";

const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-resigned-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));
const GOOD = join(ROOT, "good");
const JOB = tinyJob({ model: { ...awkwardModel(), num_local_experts: 4 }, moe: { ep_size: 2 }, zero_optimization: { stage: 2 } });
const saved = launch<RunOut[]>({
  worldSize: 2, entry: CKPT_ENTRY, timeoutS: 120,
  args: { runs: [{ job: JOB, ops: [{ op: "train", steps: 1 }, { op: "save", dir: GOOD, tag: "t1" }] }] },
});

let n = 0;
/** A copy of the checkpoint whose manifest is edited by `edit` and re-signed. */
function resigned(edit: (m: CheckpointManifest & Record<string, any>) => void): string {
  const d = join(ROOT, `c${n++}`);
  cpSync(GOOD, d, { recursive: true });
  const tagDir = join(d, "t1");
  const m = JSON.parse(readFileSync(join(tagDir, "manifest.json"), "utf8"));
  edit(m);
  writeFileSync(join(tagDir, "manifest.json"), manifestText(m));
  readManifest(tagDir); // the signature passes
  return d;
}

async function errorOf(f: () => unknown): Promise<Error> {
  try {
    await f();
  } catch (e) {
    return e as Error;
  }
  throw new Error("expected an error, none was thrown");
}

async function refusedEverywhere(dir: string, ...parts: string[]): Promise<void> {
  // zero-to-fp32, eval/generate, resume
  const z = await errorOf(() => zeroToFp32(dir, join(ROOT, `out${n++}.safetensors`)));
  const e = await errorOf(() => loadInferenceModel({ from: dir, backend: "cpu", probeTokens: 1 }));
  const r = await errorOf(() => launch<RunOut[]>({ worldSize: 2, entry: CKPT_ENTRY, timeoutS: 120, args: { runs: [{ job: JOB, ops: [{ op: "load", dir }] }] } }));
  for (const [what, err] of [["zero-to-fp32", z], ["eval", e]] as const) {
    expect(err, `${what}: ${err.message}`).toBeInstanceOf(CheckpointError);
    expect(err.message).toContain(join(dir, "t1", "manifest.json"));
  }
  for (const err of [z, e, r]) for (const p of parts) expect(err.message).toContain(p);
}

describe("a re-signed manifest's layout is checked against the rank files", () => {
  test("the intact checkpoint loads (control)", async () => {
    await saved;
    const out = await launch<RunOut[]>({ worldSize: 2, entry: CKPT_ENTRY, timeoutS: 120, args: { runs: [{ job: JOB, ops: [{ op: "load", dir: GOOD }] }] } });
    expect(out[0]![0]!.loads[0]!.tag).toBe("t1");
  }, 300_000);

  test("ep_size edited 2 → 4: refused naming field ep_size (it resumed and trained before)", async () => {
    await saved;
    await refusedEverywhere(resigned((m) => (m.ep_size = 4)), "field ep_size is 4", "written at ep_size 2");
  }, 300_000);

  test("zero_stage edited 2 → 3: refused naming field zero_stage", async () => {
    await saved;
    await refusedEverywhere(resigned((m) => (m.zero_stage = 3)), "field zero_stage is 3", "ZeRO stage 2");
  }, 300_000);

  test("the expert placement edited: refused naming plugins.moe.placement", async () => {
    await saved;
    const d = resigned((m) => {
      // layer 0's experts moved: [0, 0, 1, 1] → [1, 1, 0, 0]
      const owner = (m.plugins as { moe: { placement: { owner: number[][] } } }).moe.placement.owner;
      owner[0] = owner[0]!.map((r) => 1 - r);
    });
    await refusedEverywhere(d, "plugins.moe.placement");
  }, 300_000);
});

describe("a re-signed manifest's shard plan is checked against the model", () => {
  test("a parameter shape with its dimensions swapped: eval, zero-to-fp32 and resume name the field and both shapes", async () => {
    await saved;
    let at = "";
    const d = resigned((m) => {
      for (const [i, u] of m.units.entries())
        for (const [j, p] of u.params.entries())
          if (at === "" && p.shape.length === 2 && p.shape[0] !== p.shape[1]) {
            p.shape = [p.shape[1], p.shape[0]];
            at = `units[${i}].params[${j}]`;
          }
    });
    // zero-to-fp32 wrote the swapped tensor out as it was (exit 0) before
    await refusedEverywhere(d, `field ${at}`);
    const e = await errorOf(() => loadInferenceModel({ from: d, backend: "cpu", probeTokens: 1 }));
    expect(e.message).toContain(`field ${at}.shape`);
    expect(e.message).toContain("the model's is");
  }, 300_000);

  test("a parameter renamed to a name the model does not have: every load names the field, quoted", async () => {
    await saved;
    const d = resigned((m) => (m.units[1].params[0].name = "model.layers.0.\u001b[31mforged.weight"));
    // zero-to-fp32 wrote a tensor of that name (exit 0) before
    await refusedEverywhere(d, "field units[1].params[0]", '"model.layers.0.\\u001b[31mforged.weight"');
  }, 300_000);

  test("a parameter name used twice in the plan: readManifest names it", async () => {
    await saved;
    const d = join(ROOT, "dupname");
    cpSync(GOOD, d, { recursive: true });
    const m = JSON.parse(readFileSync(join(d, "t1", "manifest.json"), "utf8"));
    m.units[1].params[0].name = m.units[0].params[0].name;
    writeFileSync(join(d, "t1", "manifest.json"), manifestText(m));
    const e = await errorOf(() => readManifest(join(d, "t1")));
    expect(e).toBeInstanceOf(CheckpointError);
    expect(e.message).toContain("units[1].params[0].name");
  }, 300_000);

  test("num_hidden_layers 4096 under a 64 MiB host budget: refused before the model is built, naming the estimate", async () => {
    await saved;
    const d = resigned((m) => (m.config.model = { ...m.config.model, num_hidden_layers: 4096, hidden_size: 256, intermediate_size: 688, head_dim: 128 }));
    const prev = process.env.ZEROMOE_HOST_MEMORY_LIMIT;
    process.env.ZEROMOE_HOST_MEMORY_LIMIT = "64MiB";
    try {
      const e = await errorOf(() => loadInferenceModel({ from: d, backend: "cpu", probeTokens: 1 }));
      expect(e).toBeInstanceOf(UsageError);
      expect(e.message).toContain("f32 parameters need");
      expect(e.message).toContain("num_hidden_layers 4096");
      expect(e.message).toContain("ZEROMOE_HOST_MEMORY_LIMIT");
    } finally {
      if (prev === undefined) delete process.env.ZEROMOE_HOST_MEMORY_LIMIT;
      else process.env.ZEROMOE_HOST_MEMORY_LIMIT = prev;
    }
  }, 300_000);

  test("config.data.tokenizer edited to a number or removed: eval names the field (a TypeError from path.resolve before)", async () => {
    await saved;
    for (const edit of [(m: Record<string, any>) => (m.config.data.tokenizer = 7), (m: Record<string, any>) => delete m.config.data.tokenizer]) {
      const e = await errorOf(() => loadInferenceModel({ from: resigned(edit), backend: "cpu", probeTokens: 1 }));
      expect(e).toBeInstanceOf(CheckpointError);
      expect(e.message).toContain("field config.data.tokenizer: expected");
    }
  }, 300_000);
});
