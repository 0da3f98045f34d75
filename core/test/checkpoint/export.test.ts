/**
 * Export paths: `save16bitModel` (one safetensors file with HF names; under ZeRO-3 only with
 * `stage3_gather_16bit_weights_on_model_save`, else false and a warning), `zero-to-fp32`
 * (consolidated fp32 equals the gathered parameters: exactly under fp32 training, and under bf16
 * the fp32 master rounds to exactly the bf16 parameters), and `--init-from` (an engine initialised
 * from the exported file holds the same parameters, at another world size and stage).
 * Parameters are compared with snapshots read straight from the ranks' buffers (fixture.ts).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { zeroToFp32 } from "../../src/checkpoint/consolidate.ts";
import { castTo16 } from "../../src/checkpoint/hf-save.ts";
import { SafetensorsReader } from "../../src/checkpoint/safetensors.ts";
import { main as zeroToFp32Cli } from "../../src/cli/zero-to-fp32.ts";
import { launch } from "../../src/launch/index.ts";
import { awkwardModel, tinyJob } from "../engine/fixtures.ts";
import { assemble, CKPT_ENTRY, type Run, type RunOut } from "./fixture.ts";

const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-export-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));

const MIX4 = { ...awkwardModel(), num_local_experts: 4 };
const z3 = (flag: boolean) => ({ stage: 3, stage3_param_persistence_threshold: 0, stage3_gather_16bit_weights_on_model_save: flag });
const JOB_Z3_OFF = tinyJob({ model: MIX4, moe: { ep_size: 2 }, bf16: { enabled: true }, zero_optimization: z3(false) });
const JOB_Z3_ON = tinyJob({ model: MIX4, moe: { ep_size: 2 }, bf16: { enabled: true }, zero_optimization: z3(true) });
const JOB_Z2 = tinyJob({ model: awkwardModel(), zero_optimization: { stage: 2 } });
const D = (s: string) => join(ROOT, s);

const runs2: Run[] = [
  { job: JOB_Z3_OFF, ops: [{ op: "train", steps: 2 }, { op: "save16", dir: D("off") }] },
  { job: JOB_Z3_ON, ops: [{ op: "train", steps: 2 }, { op: "snapshot" }, { op: "save16", dir: D("on") }, { op: "save", dir: D("ck-bf16"), tag: "t" }] },
  { job: JOB_Z2, ops: [{ op: "train", steps: 2 }, { op: "snapshot" }, { op: "save16", dir: D("z2") }, { op: "save", dir: D("ck-fp32"), tag: "t" }] },
];

async function runAll() {
  const first = await launch<RunOut[]>({ worldSize: 2, entry: CKPT_ENTRY, args: { runs: runs2 }, timeoutS: 120 });
  // consolidate the fp32 checkpoint, then initialise engines from the exported files elsewhere
  zeroToFp32(D("ck-fp32"), D("fp32.safetensors"));
  const initBf16: Run = { job: tinyJob({ model: MIX4, bf16: { enabled: true }, zero_optimization: { stage: 1 } }), ops: [{ op: "initFrom", file: join(D("on"), "model.safetensors") }, { op: "snapshot" }] };
  const initFp32: Run = { job: tinyJob({ model: awkwardModel(), zero_optimization: z3(false) }), ops: [{ op: "initFrom", file: D("fp32.safetensors") }, { op: "snapshot" }] };
  const third = await launch<RunOut[]>({ worldSize: 3, entry: CKPT_ENTRY, args: { runs: [initBf16, initFp32] }, timeoutS: 120 });
  return { first, third };
}
const results = runAll();

/** name → f32 values of a safetensors file (BF16 widened). */
function readAll(file: string): Map<string, number[]> {
  const rd = SafetensorsReader.open(file);
  const out = new Map<string, number[]>();
  for (const n of rd.names()) {
    const info = rd.info(n);
    const b = rd.readTensorBytes(n);
    if (info.dtype === "F32") out.set(n, Array.from(new Float32Array(b.buffer, b.byteOffset, info.numel)));
    else if (info.dtype === "BF16") {
      const u = new Uint16Array(b.buffer, b.byteOffset, info.numel);
      out.set(n, Array.from(new Float32Array(Uint32Array.from(u, (x) => x << 16).buffer)));
    } else throw new Error(`unexpected dtype ${info.dtype} of ${n}`);
  }
  rd.close();
  return out;
}

/** HF-name → values from a unit snapshot, using the names/offsets a manifest-free model gives:
 * the checkpoint's manifest lists each unit's parameters. */
function byParam(units: Map<string, number[]>, manifestDir: string): Map<string, number[]> {
  const m = JSON.parse(readFileSync(join(manifestDir, "t", "manifest.json"), "utf8")) as { units: { name: string; params: { name: string; shape: number[]; offset: number }[] }[] };
  const out = new Map<string, number[]>();
  for (const u of m.units) {
    const v = units.get(u.name)!;
    for (const p of u.params) out.set(p.name, v.slice(p.offset, p.offset + p.shape.reduce((a, b) => a * b, 1)));
  }
  return out;
}

describe("save16bitModel", () => {
  test("ZeRO-3 without stage3_gather_16bit_weights_on_model_save: returns false with a warning, writes nothing", async () => {
    const { first } = await results;
    expect(first.map((r) => r[0]!.save16)).toEqual([[false], [false]]);
    expect(first[0]![0]!.logs.join("\n")).toContain("stage3_gather_16bit_weights_on_model_save is false");
    expect(existsSync(D("off"))).toBe(false);
  }, 300_000);

  test("ZeRO-3 with the flag (bf16, ep_size 2): one BF16 file with HF names equal to the gathered parameters", async () => {
    const { first } = await results;
    expect(first.map((r) => r[1]!.save16)).toEqual([[true], [true]]);
    const params = byParam(assemble(first.map((r) => r[1]!.snapshots[0]!)), D("ck-bf16"));
    const file = readAll(join(D("on"), "model.safetensors"));
    expect([...file.keys()].sort()).toEqual([...params.keys()].sort());
    expect(file.has("model.layers.1.block_sparse_moe.experts.3.w2.weight")).toBe(true);
    for (const [k, v] of params) expect(file.get(k)).toEqual(v);
  }, 300_000);

  test("the tensor names are exactly those Transformers' save_pretrained wrote for a 2-layer, 4-expert Mixtral (core/test/fixtures/mixtral)", async () => {
    await results;
    const hf = SafetensorsReader.open(join(import.meta.dir, "..", "fixtures", "mixtral", "model.safetensors"));
    const ours = SafetensorsReader.open(join(D("on"), "model.safetensors"));
    expect(ours.names().sort()).toEqual(hf.names().sort());
    for (const n of hf.names()) expect(ours.info(n).shape.length).toBe(hf.info(n).shape.length);
    expect(ours.header.metadata?.format).toBe("pt");
    hf.close();
    ours.close();
  }, 300_000);

  test("ZeRO-2 fp32: an F32 file equal to the parameters", async () => {
    const { first } = await results;
    expect(first[0]![2]!.save16).toEqual([true]);
    const params = byParam(assemble(first.map((r) => r[2]!.snapshots[0]!)), D("ck-fp32"));
    const file = readAll(join(D("z2"), "model.safetensors"));
    for (const [k, v] of params) expect(file.get(k)).toEqual(v);
  }, 300_000);
});

describe("zero-to-fp32", () => {
  test("fp32 training: the consolidated file equals the gathered parameters exactly", async () => {
    const { first } = await results;
    const params = byParam(assemble(first.map((r) => r[2]!.snapshots[0]!)), D("ck-fp32"));
    const file = readAll(D("fp32.safetensors"));
    expect(file.size).toBe(params.size);
    for (const [k, v] of params) expect(file.get(k)).toEqual(v);
  }, 300_000);

  test("bf16 training: fp32 from the master copy, which rounds to exactly the bf16 parameters; the CLI writes it", async () => {
    const { first } = await results;
    const out = D("bf16-master.safetensors");
    expect(zeroToFp32Cli([D("ck-bf16"), out])).toBe(0);
    const params = byParam(assemble(first.map((r) => r[1]!.snapshots[0]!)), D("ck-bf16"));
    const file = readAll(out);
    let differsFromBf16 = 0;
    for (const [k, v] of params) {
      const master = Float32Array.from(file.get(k)!);
      const rounded = Array.from(new Float32Array(Uint32Array.from(castTo16(master, "BF16"), (x) => x << 16).buffer));
      expect(rounded).toEqual(v);
      differsFromBf16 += master.reduce((c, x, i) => c + (x !== v[i] ? 1 : 0), 0);
    }
    expect(differsFromBf16).toBeGreaterThan(0); // really the fp32 master, not the bf16 values
  }, 300_000);

  test("CLI: usage errors and a missing checkpoint exit 2", () => {
    expect(zeroToFp32Cli([D("ck-fp32")])).toBe(2);
    expect(zeroToFp32Cli([D("nothing-here"), D("x.safetensors")])).toBe(2);
  }, 300_000);
});

describe("--init-from", () => {
  test("world 3, ZeRO-1, ep 1: initialised from the ZeRO-3 ep-2 bf16 export, same parameters", async () => {
    const { first, third } = await results;
    const want = assemble(first.map((r) => r[1]!.snapshots[0]!));
    const got = assemble(third.map((r) => r[0]!.snapshots[0]!));
    for (const [k, v] of want) expect(got.get(k)).toEqual(v);
  }, 300_000);

  test("world 3, ZeRO-3: initialised from the zero-to-fp32 file, same parameters", async () => {
    const { first, third } = await results;
    const want = assemble(first.map((r) => r[2]!.snapshots[0]!));
    const got = assemble(third.map((r) => r[1]!.snapshots[0]!));
    for (const [k, v] of want) expect(got.get(k)).toEqual(v);
  }, 300_000);
});
