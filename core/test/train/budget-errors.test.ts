/**
 * The device memory budget as a user meets it:
 * - a run that passes the up-front memory check but whose activations then pass
 *   `max_device_memory` fails with a DeviceBudgetError naming the budget and the fixes: that is the
 *   user's to fix, so `bun run train` prints it once without a stack and exits 2 (it exited 1 with
 *   the allocation's stack trace);
 * - `max_device_memory` as a JSON number obeys the same rule as a string: a positive whole number of
 *   bytes below 2^53 after rounding down (0.5 became a budget of 0 bytes, 1e20 was accepted while
 *   "1e20"-sized strings were refused).
 */
import { describe, expect, test } from "bun:test";
import { describeTrainError } from "../../src/cli/train.ts";
import { parseByteSize } from "../../src/config/byte-size.ts";
import { LaunchError, type RankFailure } from "../../src/launch/launch.ts";

const MSG = 'DeviceBudgetError: device memory budget exceeded: allocating 64.00 KiB (activation) with 4.08 MiB in use, max_device_memory is 4.10 MiB (4300000 bytes); offload optimizer states (zero_optimization.offload_optimizer.device "cpu"), use ZeRO stage 3, smaller micro-batches, activation checkpointing, or raise the budget';
const fail = (rank: number, message: string): RankFailure => ({ rank, message, aborted: false, stack: `${message}\n    at <anonymous> (/repo/core/src/train/device-budget.ts:45:23)` });

describe("device memory budget errors", () => {
  test("DeviceBudgetError in a rank: message only, no stack, exit 2", () => {
    const r = describeTrainError(new LaunchError(0, [fail(0, MSG)]));
    expect(r.status).toBe(2);
    expect(r.message).toBe(`error: ${MSG.slice("DeviceBudgetError: ".length)}`);
    expect(r.message).not.toContain("    at ");
    const two = describeTrainError(new LaunchError(1, [fail(1, MSG), fail(0, MSG)]));
    expect(two).toEqual({ message: `error: ${MSG.slice("DeviceBudgetError: ".length)}`, status: 2 });
  });

  test("max_device_memory as a number: fractions round down, but never to 0 bytes; at most 2^53", () => {
    expect(parseByteSize(2.5)).toBe(2);
    expect(parseByteSize(4194304)).toBe(4194304);
    expect(parseByteSize(0.5)).toBeTypeOf("string");
    expect(parseByteSize(1e20)).toBeTypeOf("string");
    expect(parseByteSize(0)).toBeTypeOf("string");
    expect(parseByteSize(-5)).toBeTypeOf("string");
    expect(parseByteSize(Number.NaN)).toBeTypeOf("string");
    // the same rule as the string form
    expect(parseByteSize("0.5")).toBeTypeOf("string");
    expect(parseByteSize("100000000000000000000")).toBeTypeOf("string");
  });
});
