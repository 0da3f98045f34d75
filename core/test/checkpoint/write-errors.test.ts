/**
 * Disk full while saving (issue 18): the error names the file being written, carries no stack in
 * the train CLI's output (exit 1: an environment problem, not bad input), and when rank 0 fails
 * writing the manifest its own error is shown first, not another rank's report that the save's
 * completion broadcast failed. /dev/full stands in for a full disk (every write fails ENOSPC).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CheckpointWriteError } from "../../src/checkpoint/errors.ts";
import { writeFileAtomic } from "../../src/checkpoint/manifest.ts";
import { RecordFileWriter } from "../../src/checkpoint/record-file.ts";
import { describeTrainError } from "../../src/cli/train.ts";
import { LaunchError } from "../../src/launch/index.ts";
import { thrown } from "./thrown.ts";

const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-enospc-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));
const haveDevFull = existsSync("/dev/full");


describe("ENOSPC names the file", () => {
  test.skipIf(!haveDevFull)("a rank file on a full disk: CheckpointWriteError naming it", () => {
    const e = thrown(() => {
      const w = RecordFileWriter.create("/dev/full", 0, { tag: "t", worldSize: 1 });
      w.add("u/params/0", "f32", 0, 3, new Uint8Array(12).fill(7));
      w.finish(0);
    });
    expect(e).toBeInstanceOf(CheckpointWriteError);
    expect(e.message).toBe("/dev/full: cannot write the header: no space left on device (ENOSPC)");
    expect((e as CheckpointWriteError).code).toBe("ENOSPC");
  });

  test.skipIf(!haveDevFull)("the manifest on a full disk: CheckpointWriteError naming the file; the target is not created", () => {
    const target = join(ROOT, "manifest.json");
    symlinkSync("/dev/full", `${target}.tmp`);
    const e = thrown(() => writeFileAtomic(target, JSON.stringify({ a: 1 })));
    expect(e).toBeInstanceOf(CheckpointWriteError);
    expect(e.message).toBe(`${target}.tmp: cannot write: no space left on device (ENOSPC)`);
    expect(existsSync(target)).toBe(false);
  });
});

describe("describeTrainError", () => {
  const write = new CheckpointWriteError("/ck/global_step4.tmp/manifest.json.tmp", "ENOSPC", "cannot write: no space left on device (ENOSPC)");

  test("rank 0's manifest write error is shown, not rank 1's earlier generic report; exit 1, no stack", () => {
    const e = new LaunchError(1, [
      { rank: 0, message: `CheckpointWriteError: ${write.message}`, stack: "CheckpointWriteError: …\n    at writeFileAtomic (manifest.ts:1:1)", aborted: false },
      { rank: 1, message: `Error: saveCheckpoint("global_step4") on rank 1: rank 0 failed to write the manifest or rename /ck/global_step4.tmp`, stack: "Error\n    at saveCheckpoint (save.ts:1:1)", aborted: false },
    ]);
    const d = describeTrainError(e);
    expect(d.status).toBe(1);
    expect(d.message).toBe(`error: rank 0: ${write.message}`);
    expect(d.message).not.toContain("    at ");
  });

  test("a save's mkdir failing with ENOSPC on rank 0 (an fs error naming the path): shown first, no stack, exit 1", () => {
    const e = new LaunchError(1, [
      { rank: 1, message: `Error: saveCheckpoint("t") on rank 1: rank 0 could not create /ck/t.tmp`, stack: "Error\n    at saveCheckpoint", aborted: false },
      { rank: 0, message: "Error: ENOSPC: no space left on device, mkdir '/ck/t.tmp'", stack: "Error: ENOSPC\n    at mkdirSync", aborted: false },
    ]);
    expect(describeTrainError(e)).toEqual({ message: "error: rank 0: ENOSPC: no space left on device, mkdir '/ck/t.tmp'", status: 1 });
  });

  test("a CheckpointWriteError outside the ranks: message only, exit 1", () => {
    expect(describeTrainError(write)).toEqual({ message: `error: ${write.message}`, status: 1 });
  });

  test("DivergenceError on every rank: the message once, exit 4", () => {
    const msg = "training diverged: 10 consecutive bad steps (2–11; first: loss NaN), last finite loss 5.5784 at step 1. Try: …";
    const e = new LaunchError(0, [0, 1].map((rank) => ({ rank, message: `DivergenceError: ${msg}`, stack: "DivergenceError\n    at trainLoop", aborted: false })));
    expect(describeTrainError(e)).toEqual({ message: `error: ${msg}`, status: 4 });
  });
});
