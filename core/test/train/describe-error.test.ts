/**
 * How `bun run train` reports a failed launch (describeTrainError in core/src/cli/train.ts): a user
 * error (or an unavailable WebGPU backend) is printed once, without its error name ("Error:",
 * "DataError:"), and names a rank only when the error is that rank's own.
 */
import { describe, expect, test } from "bun:test";
import { describeTrainError } from "../../src/cli/train.ts";
import { LaunchError, type RankFailure } from "../../src/launch/launch.ts";

const fail = (rank: number, message: string, aborted = false): RankFailure => ({ rank, message, aborted, stack: `${message}\n    at x (/y.ts:1:2)` });
const WEBGPU = 'backend "webgpu" requested but unavailable: no WebGPU implementation: libwgpu_native.so not found';

describe("describeTrainError", () => {
  test("the same user error on every rank: once, no rank, no error name, exit 2", () => {
    const msg = "DataError: data.dataset: file not found: /tmp/x7.txt";
    expect(describeTrainError(new LaunchError(1, [fail(0, msg), fail(1, msg), fail(2, msg)]))).toEqual({ message: "error: data.dataset: file not found: /tmp/x7.txt", status: 2 });
    expect(describeTrainError(new LaunchError(0, [fail(0, "CheckpointError: /c/global_step3: not found")]))).toEqual({ message: "error: /c/global_step3: not found", status: 2 });
  });
  test("a plugin's setup breaking a composition rule (undeclared claim) is a user error: exit 2, no stack", () => {
    const msg = 'PluginConflictError: plugin "acme-undeclared" claims the "reduce" hook without declaring it: add "reduce" to its `claims` (definePlugin({ claims: [...] }))';
    const r = describeTrainError(new LaunchError(1, [fail(1, msg), fail(0, msg)]));
    expect(r).toEqual({ message: `error: ${msg.slice("PluginConflictError: ".length)}`, status: 2 });
  });
  test("webgpu unavailable: no doubled 'Error:', exit 1", () => {
    const r = describeTrainError(new LaunchError(0, [fail(0, `Error: ${WEBGPU}`)]));
    expect(r).toEqual({ message: `error: ${WEBGPU}`, status: 1 });
    expect(describeTrainError(new LaunchError(1, [fail(1, `Error: ${WEBGPU}`), fail(0, `Error: ${WEBGPU}`)])).message).toBe(`error: ${WEBGPU}`);
  });
  test("an error of one rank names it", () => {
    const own = describeTrainError(new LaunchError(1, [fail(1, "CheckpointError: /c/rank_00001.zmc: truncated"), fail(0, "terminated after the job was aborted (grace 2000 ms)", true)]));
    expect(own).toEqual({ message: "error: rank 1: /c/rank_00001.zmc: truncated", status: 2 });
    const differ = describeTrainError(new LaunchError(0, [fail(0, "CheckpointError: /c/rank_00000.zmc: bad crc"), fail(1, "CheckpointError: /c/rank_00001.zmc: truncated")]));
    expect(differ.message).toBe("error: rank 0: /c/rank_00000.zmc: bad crc");
  });
  test("other failures keep the rank and the stack, exit 1", () => {
    const r = describeTrainError(new LaunchError(0, [fail(0, "TypeError: x is undefined")]));
    expect(r.status).toBe(1);
    expect(r.message).toMatch(/^error: training failed: rank 0 failed: TypeError: x is undefined\n {4}at x/);
  });
});
