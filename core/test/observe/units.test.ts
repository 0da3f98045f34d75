/**
 * Unit tests of the observability pieces: the exclusive phase timer (a fake clock: nested and
 * interleaved phases add up to the step), the comms logger's bandwidth definitions and prof_ops,
 * the TensorBoard TFRecord framing (the masked CRC-32C of a known record) and the CSV monitor's
 * DeepSpeed layout, the no-effect config warning.
 */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_JOB, deepMerge, resolveJobConfig } from "../../src/config/index.ts";

const resolveJob = (over: Record<string, unknown>) => resolveJobConfig(deepMerge(JSON.parse(JSON.stringify(DEFAULT_JOB)), over));
import { busFactor, CommsLogger } from "../../src/observe/comms-logger.ts";
import { CsvMonitor } from "../../src/observe/csv-monitor.ts";
import { modulePath } from "../../src/observe/flops-profiler.ts";
import { PHASES, PhaseTimer } from "../../src/observe/phase-timer.ts";
import { encodeEvent, maskedCrc32c, tfRecord } from "../../src/observe/tensorboard-writer.ts";
import { readTfRecords } from "./tfrecord-reader.ts";

describe("PhaseTimer", () => {
  test("nested phases are exclusive and add up to the step; interleaved exits lose nothing", async () => {
    let t = 0;
    const timer = new PhaseTimer(() => t);
    timer.begin();
    t += 3; // other
    const f = timer.enter("forward");
    t += 5;
    const g = timer.enter("gather");
    t += 7;
    const a = timer.enter("a2a_dispatch");
    t += 11;
    timer.exit(g); // out of order: gather leaves while a2a is innermost
    t += 13; // still a2a
    timer.exit(a);
    t += 17; // forward
    timer.exit(f);
    await timer.time("optimizer", async () => {
      t += 19;
    });
    t += 2;
    const r = timer.end();
    expect(r.totalMs).toBe(77);
    expect(r.phases).toMatchObject({ other: 5, forward: 22, gather: 7, a2a_dispatch: 24, optimizer: 19 });
    expect(PHASES.reduce((s, p) => s + r.phases[p], 0)).toBe(r.totalMs);
  });
});

describe("CommsLogger", () => {
  test("bus factors (nccl-tests) and per op × size rows", () => {
    expect(busFactor("all_reduce", 4)).toBe(1.5);
    expect(busFactor("all_gather", 3)).toBeCloseTo(2 / 3, 12);
    expect(busFactor("broadcast", 3)).toBe(1);
    const lines: string[] = [];
    const l = new CommsLogger({ enabled: true, verbose: true, prof_all: false, debug: false, prof_ops: ["all_reduce", "all_to_all_single"] }, (m) => lines.push(m));
    l.record("all_reduce", 4000, 4, 6000, 2);
    l.record("all_reduce", 4000, 4, 6000, 4);
    l.record("all_reduce", 12, 4, 18, 1);
    l.record("all_to_all_v", 900, 3, 600, 3);
    l.record("all_gather", 900, 3, 600, 3); // not in prof_ops
    const rows = l.records();
    expect(rows.map((r) => [r.op, r.message_size, r.count, r.bytes])).toEqual([
      ["all_reduce", 12, 1, 18],
      ["all_reduce", 4000, 2, 12000],
      ["all_to_all_v", 900, 1, 600],
    ]);
    const big = rows[1]!;
    expect(big.mean_ms).toBe(3);
    expect(big.algbw).toBeCloseTo((4000 / 0.002 + 4000 / 0.004) / 2, 6);
    expect(big.busbw).toBeCloseTo(big.algbw * 1.5, 6);
    expect(lines.length).toBe(4);
    expect(lines[0]).toMatch(/^comm op: all_reduce \| time \(ms\): 2\.000 \| msg size: 3\.91 KB/);
  });
});

describe("TensorBoard records", () => {
  test("masked CRC-32C of a known input; records read back with both CRCs checked", () => {
    // CRC-32C("123456789") = 0xe3069283 (RFC 3720 check value); masked by TFRecord's rule
    const c = 0xe3069283;
    expect(maskedCrc32c(new TextEncoder().encode("123456789"))).toBe(((((c >>> 15) | (c << 17)) >>> 0) + 0xa282ead8) >>> 0);
    const a = tfRecord(encodeEvent(1.5, 0));
    const b = tfRecord(encodeEvent(2.5, 7, { tag: "Train/Samples/lr", value: 0.25 }));
    const both = new Uint8Array([...a, ...b]);
    const recs = readTfRecords(both);
    expect(recs.length).toBe(2);
    expect(new TextDecoder().decode(recs[0]!)).toContain("brain.Event:2");
    const bad = both.slice();
    bad[bad.length - 6]! ^= 1;
    expect(() => readTfRecords(bad)).toThrow(/CRC mismatch/);
  });
});

describe("CsvMonitor", () => {
  test("DeepSpeed's file per tag with a step,<name> header", () => {
    const dir = mkdtempSync(join(tmpdir(), "zeromoe-csv-"));
    const m = new CsvMonitor({ enabled: true, output_path: dir, job_name: "run one" });
    m.write([["Train/Samples/train_loss", 2.5, 16], ["Train/Samples/train_loss", 2, 32]]);
    expect(readFileSync(join(dir, "run one", "Train_Samples_train_loss.csv"), "utf8")).toBe("step,train_loss\r\n16,2.5\r\n32,2.0\r\n");
  });
});

describe("module paths and no-effect keys", () => {
  test("a number joins the part before it", () => {
    expect(modulePath("layers.3.experts.11")).toEqual(["layers.3", "experts.11"]);
    expect(modulePath("embed")).toEqual(["embed"]);
  });
  test("sub_group_size, allgather_bucket_size, reduce_scatter warn once each when given, not otherwise", () => {
    const given = resolveJob({ zero_optimization: { stage: 2, sub_group_size: 7, allgather_bucket_size: 9, reduce_scatter: false } });
    for (const k of ["sub_group_size", "allgather_bucket_size", "reduce_scatter"]) {
      expect(given.warnings.filter((w) => w.startsWith(`zero_optimization.${k}: accepted but has no effect here`)).length).toBe(1);
    }
    expect(given.config.zero_optimization.sub_group_size).toBe(7);
    const absent = resolveJob({ zero_optimization: { stage: 2 } });
    expect(absent.warnings.some((w) => w.includes("no effect here"))).toBe(false);
  });
});
