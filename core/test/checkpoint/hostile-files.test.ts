/**
 * Odd files where a checkpoint reader expects a regular file, and JSON with repeated keys, as an
 * outside tester sends them (task P, 2026-12-02): a safetensors header or Hub index holding a key
 * twice (the safetensors format forbids it; JSON.parse silently kept the last one), a NUL byte in an
 * index's shard name, and a directory or a FIFO in place of a shard, an index, `latest`,
 * manifest.json or a rank file (a directory gave "EISDIR" with a stack, exit 1; a FIFO blocked the
 * process in open(2) forever, SIGTERM included). Each must end in the reader's own error naming the
 * file. Readers that could block run in a child process with a generous time limit (2 min; the readers take well under a second), so a
 * regression fails the test instead of hanging the suite.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { CheckpointError } from "../../src/checkpoint/errors.ts";
import { HubCheckpoint } from "../../src/checkpoint/hub-dir.ts";
import { HubDirWriter } from "../../src/checkpoint/hub-export.ts";
import { readHubIndex } from "../../src/checkpoint/hub-index.ts";
import { locateCheckpoint, readManifest } from "../../src/checkpoint/manifest.ts";
import { RecordFileReader } from "../../src/checkpoint/record-file.ts";
import { parseSafetensorsHeader, SafetensorsError, SafetensorsReader, writeSafetensors } from "../../src/checkpoint/safetensors.ts";
import { thrown } from "./thrown.ts";

const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-hostile-files-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));
const SRC = resolve(import.meta.dir, "../../src/checkpoint");


function fifo(path: string): string {
  const r = Bun.spawnSync(["mkfifo", path]);
  expect(r.exitCode).toBe(0);
  return path;
}

/** Run `code` (an ES module body with `$SRC` = core/src/checkpoint) in a child bun; returns its
 * exit code and output. A reader blocked on a FIFO is killed after the limit (exit code ≠ 0, and
 * no "OK" line). */
function child(code: string): { code: number | null; out: string } {
  const file = join(ROOT, `child-${Math.random().toString(36).slice(2)}.ts`);
  writeFileSync(file, code.replaceAll("$SRC", SRC));
  const r = Bun.spawnSync(["bun", file], { timeout: 120_000, killSignal: "SIGKILL" });
  return { code: r.exitCode, out: r.stdout.toString() + r.stderr.toString() };
}

const enc = new TextEncoder();
const F32 = (n: number, b: number) => `{"dtype":"F32","shape":[${n}],"data_offsets":[${b},${b + 4 * n}]}`;

describe("duplicate JSON keys are refused, naming the key", () => {
  test("a tensor listed twice in a safetensors header (JSON.parse kept the last)", () => {
    const text = `{"a":${F32(2, 0)},"b":${F32(1, 8)},"a":${F32(2, 0)}}`;
    const e = thrown(() => parseSafetensorsHeader(enc.encode(text), 12, "dup.safetensors"));
    expect(e).toBeInstanceOf(SafetensorsError);
    expect(e.message).toContain("dup.safetensors");
    expect(e.message).toContain(`duplicate key "a"`);
  });

  test("a field repeated inside one entry, written with an escape", () => {
    const text = `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"d\\u0074ype":"F16"}}`;
    const e = thrown(() => parseSafetensorsHeader(enc.encode(text), 8, "dup2.safetensors"));
    expect(e).toBeInstanceOf(SafetensorsError);
    expect(e.message).toContain(`duplicate key "dtype"`);
    expect(e.message).toContain("in a");
  });

  test("the same key in different objects is fine", () => {
    const h = parseSafetensorsHeader(enc.encode(`{"a":${F32(2, 0)},"b":${F32(1, 8)}}`), 12, "ok.safetensors");
    expect(h.tensors.map((t) => t.name)).toEqual(["a", "b"]);
  });

  test("a weight_map entry repeated in model.safetensors.index.json", () => {
    const index = join(ROOT, "dup.index.json");
    writeFileSync(index, `{"metadata":{},"weight_map":{"a":"model-1.safetensors","a":"model-2.safetensors"}}`);
    const e = thrown(() => readHubIndex(index));
    expect(e).toBeInstanceOf(SafetensorsError);
    expect(e.message).toContain(index);
    expect(e.message).toContain(`duplicate key "a" in weight_map`);
  });

  test("a NUL byte in a shard name is refused by the index reader (was a TypeError from fs)", () => {
    const index = join(ROOT, "nul.index.json");
    writeFileSync(index, JSON.stringify({ weight_map: { a: "model.safetensors\u0000x" } }));
    const e = thrown(() => readHubIndex(index));
    expect(e).toBeInstanceOf(SafetensorsError);
    expect(e.message).toContain("plain file name");
    expect(e.message).not.toContain("\u0000");
  });
});

describe("a directory where a file is expected: the reader's error, not EISDIR", () => {
  test("safetensors file", () => {
    const d = join(ROOT, "st-dir.safetensors");
    mkdirSync(d);
    const e = thrown(() => SafetensorsReader.open(d));
    expect(e).toBeInstanceOf(SafetensorsError);
    expect(e.message).toContain(d);
    expect(e.message).toContain("not a regular file");
  });

  test("a shard named by the index", () => {
    const d = join(ROOT, "hub-dir");
    mkdirSync(join(d, "shard.safetensors"), { recursive: true });
    writeFileSync(join(d, "model.safetensors.index.json"), JSON.stringify({ weight_map: { a: "shard.safetensors" } }));
    const e = thrown(() => HubCheckpoint.open(d));
    expect(e).toBeInstanceOf(SafetensorsError);
    expect(e.message).toContain("not a regular file");
  });

  test("the index itself", () => {
    const d = join(ROOT, "idx-dir");
    mkdirSync(join(d, "model.safetensors.index.json"), { recursive: true });
    const e = thrown(() => readHubIndex(join(d, "model.safetensors.index.json")));
    expect(e).toBeInstanceOf(SafetensorsError);
    expect(e.message).toContain("not a regular file");
  });

  test("latest, manifest.json and a rank file", () => {
    const ck = join(ROOT, "ck-dirs");
    mkdirSync(join(ck, "latest"), { recursive: true });
    let e = thrown(() => locateCheckpoint(ck));
    expect(e).toBeInstanceOf(CheckpointError);
    expect(e.message).toContain(join(ck, "latest"));
    expect(e.message).toContain("not a regular file");
    const tag = join(ROOT, "tag-dirs");
    mkdirSync(join(tag, "manifest.json"), { recursive: true });
    e = thrown(() => readManifest(tag));
    expect(e).toBeInstanceOf(CheckpointError);
    expect(e.message).toContain("not a regular file");
    mkdirSync(join(tag, "rank_00000.zmck"));
    e = thrown(() => RecordFileReader.open(join(tag, "rank_00000.zmck")));
    expect(e).toBeInstanceOf(CheckpointError);
    expect(e.message).toContain("not a regular file");
  });
});

describe("a FIFO where a file is expected: refused at once, no blocking open", () => {
  test("safetensors file, index, shard, latest, manifest.json and rank file", () => {
    const d = join(ROOT, "fifos");
    mkdirSync(join(d, "tag"), { recursive: true });
    fifo(join(d, "model.safetensors"));
    fifo(join(d, "x.index.json"));
    fifo(join(d, "latest"));
    fifo(join(d, "tag", "manifest.json"));
    fifo(join(d, "tag", "rank_00000.zmck"));
    const hub = join(d, "hub");
    mkdirSync(hub);
    fifo(join(hub, "shard.safetensors"));
    writeFileSync(join(hub, "model.safetensors.index.json"), JSON.stringify({ weight_map: { a: "shard.safetensors" } }));
    const r = child(`
      import { SafetensorsReader } from "$SRC/safetensors.ts";
      import { readHubIndex } from "$SRC/hub-index.ts";
      import { HubCheckpoint } from "$SRC/hub-dir.ts";
      import { locateCheckpoint, readManifest } from "$SRC/manifest.ts";
      import { RecordFileReader } from "$SRC/record-file.ts";
      const d = ${JSON.stringify(d)};
      const cases = [
        () => SafetensorsReader.open(d + "/model.safetensors"),
        () => readHubIndex(d + "/x.index.json"),
        () => HubCheckpoint.open(d + "/hub"),
        () => locateCheckpoint(d),
        () => readManifest(d + "/tag"),
        () => RecordFileReader.open(d + "/tag/rank_00000.zmck"),
      ];
      for (const f of cases) {
        try { f(); console.log("no error"); } catch (e) { console.log(e.name + ": " + e.message); }
      }
      console.log("OK");
    `);
    expect(r.out).toContain("OK");
    const lines = r.out.split("\n").filter((l) => l !== "" && l !== "OK");
    expect(lines.length, r.out).toBe(6);
    for (const l of lines) {
      expect(l).toMatch(/^(SafetensorsError|CheckpointError): /);
      expect(l).toContain("not a regular file");
    }
  }, 300_000);
});

test("a `latest` holding a newline and more is reported on one line", () => {
  const ck = join(ROOT, "ck-nl");
  mkdirSync(ck);
  writeFileSync(join(ck, "latest"), "global_step2\n\x1b[2Jx");
  const e = thrown(() => locateCheckpoint(ck));
  expect(e).toBeInstanceOf(CheckpointError);
  expect(e.message).not.toContain("\n");
  expect(e.message).not.toContain("\x1b");
  expect(e.message).toContain("global_step2\\n");
});

test("a shard written by us still loads (control)", () => {
  const d = join(ROOT, "ok-hub");
  mkdirSync(d);
  writeSafetensors(join(d, "model.safetensors"), [{ name: "a", dtype: "F32", shape: [3], data: new Float32Array([1, 2, 3]) }]);
  const hub = HubCheckpoint.open(d);
  try {
    expect([...hub.shapes()]).toEqual([["a", [3]]]);
  } finally {
    hub.close();
  }
  expect(readFileSync(join(d, "model.safetensors")).length).toBeGreaterThan(8);
});

test("an export that fails part-way leaves no shard behind (zero-to-fp32 --max-shard-size left 5 of 7 shards, no index)", () => {
  const d = join(ROOT, "half-export");
  const specs = [0, 1, 2, 3].map((i) => ({ name: `t${i}`, dtype: "F32" as const, shape: [5] }));
  const w = HubDirWriter.create(d, specs, 24); // 20 bytes per tensor: one tensor per shard
  expect(w.shards.length).toBe(4);
  w.writeTensor("t0", new Float32Array(5).fill(1));
  w.writeTensor("t1", new Float32Array(5).fill(2)); // finishes shard 1
  w.writeTensor("t2", new Float32Array(5).fill(3)); // finishes shard 2
  // the source fails here (a damaged record): the caller aborts
  w.abort();
  expect(readdirSync(d)).toEqual([]);
  // a complete export is kept
  const ok = HubDirWriter.create(join(ROOT, "whole-export"), specs, 24);
  for (const t of specs) ok.writeTensor(t.name, new Float32Array(5));
  expect(ok.finish().length).toBe(5);
  expect(readdirSync(join(ROOT, "whole-export")).length).toBe(5);
});
