/**
 * Integrity: a truncated or altered checkpoint fails with a CheckpointError naming the file and
 * the record (or the manifest field); a rank that calls saveCheckpoint alone gets an error naming
 * the save step and the collective instead of a deadlock; the record-file writer refuses bad input.
 * The checkpoint comes from a real world-2 ZeRO-3 run (fixture.ts).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { copyFileSync, cpSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { zeroToFp32 } from "../../src/checkpoint/consolidate.ts";
import { CheckpointError } from "../../src/checkpoint/errors.ts";
import { locateCheckpoint, manifestText, readManifest } from "../../src/checkpoint/manifest.ts";
import { RecordFileReader, RecordFileWriter } from "../../src/checkpoint/record-file.ts";
import { ShardSource } from "../../src/checkpoint/shard-source.ts";
import { launch } from "../../src/launch/index.ts";
import { awkwardModel, tinyJob } from "../engine/fixtures.ts";
import { CKPT_ENTRY, type RunOut } from "./fixture.ts";

const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-integrity-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));
const GOOD = join(ROOT, "good");
const JOB = tinyJob({ model: awkwardModel(), zero_optimization: { stage: 3 } });

const saved = launch<RunOut[]>({
  worldSize: 2, entry: CKPT_ENTRY, timeoutS: 60,
  args: { runs: [{ job: JOB, ops: [{ op: "train", steps: 1 }, { op: "save", dir: GOOD, tag: "t1" }] }] },
});

/** A fresh copy of the good checkpoint root. */
function copy(name: string): string {
  const d = join(ROOT, name);
  cpSync(GOOD, d, { recursive: true });
  return d;
}

/** Read everything in a checkpoint (manifest, every record of every file). */
function readAll(dir: string): void {
  const loc = locateCheckpoint(dir);
  const src = new ShardSource(loc.tagDir, readManifest(loc.tagDir));
  try {
    src.verifyAll();
  } finally {
    src.close();
  }
}

function errorOf(f: () => void): Error {
  try {
    f();
  } catch (e) {
    return e as Error;
  }
  throw new Error("expected an error, none was thrown");
}

describe("damaged checkpoints", () => {
  test("the intact checkpoint reads back (control)", async () => {
    await saved;
    readAll(GOOD);
    expect(readFileSync(join(GOOD, "latest"), "utf8").trim()).toBe("t1");
  }, 300_000);

  test("a byte flipped inside a record's payload: error names the file and the record", async () => {
    await saved;
    const d = copy("flip");
    const f = join(d, "t1", "rank_00001.zmck");
    const rd = RecordFileReader.open(f);
    const e = rd.records.find((r) => r.name.includes("/m/"))!;
    rd.close();
    const bytes = readFileSync(f);
    bytes[e.offset + Math.floor(e.bytes * 0.7)]! ^= 0x10;
    writeFileSync(f, bytes);
    const err = errorOf(() => readAll(d));
    expect(err).toBeInstanceOf(CheckpointError);
    expect(err.message).toContain("rank_00001.zmck");
    expect(err.message).toContain(`record "${e.name}"`);
    expect(err.message).toContain("checksum mismatch");
    // zero-to-fp32 reads params only: it names the damaged record when it reaches it
    const p = rd.records.find((r) => r.name.includes("/params/"))!;
    bytes[p.offset + 3]! ^= 0x01;
    writeFileSync(f, bytes);
    const err2 = errorOf(() => zeroToFp32(d, join(ROOT, "flip.safetensors")));
    expect(err2.message).toContain(`record "${p.name}"`);
  }, 300_000);

  test("a truncated rank file: error names the file and the last intact record", async () => {
    await saved;
    const d = copy("trunc");
    const f = join(d, "t1", "rank_00000.zmck");
    const rd = RecordFileReader.open(f);
    const third = rd.records[2]!;
    rd.close();
    truncateSync(f, third.offset + Math.floor(third.bytes / 2));
    const err = errorOf(() => readAll(d));
    expect(err).toBeInstanceOf(CheckpointError);
    expect(err.message).toContain("rank_00000.zmck");
    expect(err.message).toContain("truncated");
    expect(err.message).toContain(`record "${rd.records[1]!.name}"`);
  }, 300_000);

  test("an altered index, a missing rank file, a damaged manifest, a bad latest: each names the file", async () => {
    await saved;
    const d = copy("misc");
    const f = join(d, "t1", "rank_00001.zmck");
    const bytes = readFileSync(f);
    bytes[bytes.length - 40]! ^= 0xff; // inside the index
    writeFileSync(f, bytes);
    expect(errorOf(() => readAll(d)).message).toMatch(/rank_00001\.zmck.*index checksum mismatch/);
    rmSync(f);
    expect(errorOf(() => readAll(d)).message).toMatch(/rank_00001\.zmck.*cannot open/);
    const mf = join(d, "t1", "manifest.json");
    const m = JSON.parse(readFileSync(mf, "utf8"));
    m.units[1].numel += 1;
    writeFileSync(mf, JSON.stringify(m));
    // an edited manifest fails its own checksum; re-signed, the field check names the field
    expect(errorOf(() => readAll(d)).message).toMatch(/manifest\.json.*manifest_sha256/);
    writeFileSync(mf, manifestText(m));
    expect(errorOf(() => readAll(d)).message).toMatch(/manifest\.json.*units\[1\]\.pieces/);
    writeFileSync(mf, "{ not json");
    expect(errorOf(() => readAll(d)).message).toMatch(/manifest\.json.*not valid JSON/);
    writeFileSync(join(d, "latest"), "../../etc\n");
    expect(errorOf(() => readAll(d)).message).toMatch(/latest.*invalid tag/);
  }, 300_000);

  test("a checkpoint of another model is refused naming the unit", async () => {
    await saved;
    const res = await launch<RunOut[]>({
      worldSize: 1, entry: CKPT_ENTRY, timeoutS: 60,
      args: { runs: [{ job: tinyJob({ model: { ...awkwardModel(), intermediate_size: 8 } }), ops: [{ op: "load", dir: GOOD }] }] },
    }).then(() => null, (e: Error) => e);
    expect(res?.message).toMatch(/CheckpointError: .*manifest\.json: unit "layers\.0\.experts\.0" has \d+ elements, the model's has \d+/);
  }, 300_000);
});

describe("saving", () => {
  test("a rank that calls saveCheckpoint alone gets an error naming the save step, not a deadlock", async () => {
    const res = await launch<RunOut[]>({
      worldSize: 2, entry: CKPT_ENTRY, timeoutS: 3,
      args: { runs: [{ job: JOB, ops: [{ op: "train", steps: 1 }, { op: "saveAlone", dir: join(ROOT, "alone"), tag: "x", rank: 1 }] }] },
    });
    expect(res[1]![0]!.errors).toHaveLength(1);
    expect(res[1]![0]!.errors[0]).toMatch(/saveCheckpoint\("x"\) on rank 1: the agreement all_gather failed — every rank must call saveCheckpoint/);
    expect(res[1]![0]!.errors[0]).toMatch(/all_gather/);
  }, 300_000);

  test("a rank that saves while the others train gets an error naming the save step (no deadlock)", async () => {
    const res = await launch<RunOut[]>({
      worldSize: 2, entry: CKPT_ENTRY, timeoutS: 3,
      args: { runs: [{ job: JOB, ops: [{ op: "train", steps: 1 }, { op: "saveAlone", dir: join(ROOT, "alone2"), tag: "y", rank: 0, othersTrain: true }] }] },
    }).then((r) => r, (e: Error) => e);
    // rank 0's error, whether returned or raised through the launcher, names the save and the collective
    const msg = res instanceof Error ? res.message : res[0]![0]!.errors.join("\n");
    expect(msg).toMatch(/saveCheckpoint\("y"\) on rank 0: the agreement all_gather failed/);
  }, 300_000);

  test("keep_last keeps the newest tags and latest names the newest", async () => {
    const dir = join(ROOT, "keep");
    await launch<RunOut[]>({
      worldSize: 2, entry: CKPT_ENTRY, timeoutS: 60,
      args: { runs: [{ job: JOB, ops: [1, 2, 3, 4].flatMap((s) => [{ op: "train", steps: 1 }, { op: "save", dir, tag: `s${s}`, keepLast: 2 }]) }] },
    });
    const { readdirSync } = await import("node:fs");
    expect(readdirSync(dir).sort()).toEqual(["latest", "s3", "s4"]);
    expect(readFileSync(join(dir, "latest"), "utf8").trim()).toBe("s4");
    readAll(dir);
  }, 300_000);

  test("every codec round-trips random f32/bf16/f16/i32 payloads of awkward sizes (1, 7, 1009)", () => {
    let x = 12345;
    const rnd = () => ((x = (Math.imul(x, 1103515245) + 12345) >>> 0) / 4294967296);
    for (const codec of ["shuffle", "deflate", "raw"] as const) {
      const f = join(ROOT, `codec-${codec}.zmck`);
      const w = RecordFileWriter.create(f, 2, { codec });
      const want = new Map<string, Uint8Array>();
      for (const [dt, size] of [["f32", 4], ["bf16", 2], ["f16", 2], ["i32", 4]] as const) {
        for (const n of [1, 7, 1009]) {
          // exponent-like structure in the high bytes, noise in the low ones
          const bytes = new Uint8Array(n * size).map((_, i) => (i % size === size - 1 ? 0x3c + (rnd() < 0.1 ? 1 : 0) : Math.floor(rnd() * 256)));
          const name = `u.${dt}.${n}/m/${n}`;
          w.add(name, dt, n, n, bytes);
          want.set(name, bytes);
        }
      }
      w.finish(2);
      const rd = RecordFileReader.open(f);
      expect(rd.rank).toBe(2);
      for (const [name, bytes] of want) expect(rd.readPayload(rd.entry(name)!)).toEqual(bytes);
      rd.close();
    }
  }, 300_000);

  test("record writer refuses a duplicate name and a payload of the wrong size", () => {
    const f = join(ROOT, "w.zmck");
    const w = RecordFileWriter.create(f, 0);
    w.add("a/m/0", "f32", 0, 2, new Uint8Array(8));
    expect(() => w.add("a/m/0", "f32", 0, 2, new Uint8Array(8))).toThrow(/duplicate record name/);
    expect(() => w.add("a/v/0", "f32", 0, 3, new Uint8Array(8))).toThrow(/payload has 8 bytes, expected 3 × 4/);
    w.finish(0);
    copyFileSync(f, f + ".copy");
    expect(RecordFileReader.open(f + ".copy").records.map((r) => r.name)).toEqual(["a/m/0"]);
  }, 300_000);
});
