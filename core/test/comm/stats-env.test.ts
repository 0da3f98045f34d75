/** Stats counters (calls, bytes, time, reset), the environment overrides and the call trace. */

import { afterEach, expect, spyOn, test } from "bun:test";
import { timeoutMsFromEnv } from "../../src/comm/transport-options.ts";
import { createLocalWorldMemory, DEFAULT_SLOT_BYTES, slotBytesFromEnv } from "../../src/comm/local/memory.ts";
import { createSoloCommunicator } from "../../src/comm/solo.ts";
import { ringAllReduceBytes, ringShardBytes } from "../../src/comm/stats.ts";

const saved = { t: process.env.ZEROMOE_COMM_TIMEOUT_S, a: process.env.ZEROMOE_COMM_ARENA_MB };
afterEach(() => {
  for (const [k, v] of [["ZEROMOE_COMM_TIMEOUT_S", saved.t], ["ZEROMOE_COMM_ARENA_MB", saved.a]] as const) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

test("ring formulas: all_reduce 2(n-1)/n, reduce_scatter/all_gather (n-1)/n", () => {
  expect(ringAllReduceBytes(1000, 4)).toBe(1500);
  expect(ringShardBytes(1000, 4)).toBe(750);
  expect(ringAllReduceBytes(7, 1)).toBe(0);
  expect(ringShardBytes(12, 3)).toBe(8);
});

test("stats count calls and time per op, and reset", async () => {
  const comm = createSoloCommunicator({ slotBytes: 256 });
  const x = new Float32Array(1013).map((_, i) => Math.cos(i));
  await comm.allReduce(x);
  await comm.allReduce(x, { op: "max" });
  await comm.allGather(x);
  await comm.barrier();
  const s = comm.stats();
  expect(s.all_reduce.calls).toBe(2);
  expect(s.all_gather.calls).toBe(1);
  expect(s.barrier.calls).toBe(1);
  expect(s.reduce_scatter.calls).toBe(0);
  expect(s.all_reduce.timeMs).toBeGreaterThan(0);
  expect(s.all_reduce.bytesSent).toBe(0); // world of one sends nothing
  s.all_reduce.calls = 99; // a copy: does not change the communicator's counters
  expect(comm.stats().all_reduce.calls).toBe(2);
  comm.resetStats();
  expect(comm.stats().all_reduce).toEqual({ calls: 0, bytesSent: 0, timeMs: 0, waitMs: 0 });
});

test("ZEROMOE_COMM_TIMEOUT_S and ZEROMOE_COMM_ARENA_MB are read and validated", () => {
  delete process.env.ZEROMOE_COMM_TIMEOUT_S;
  expect(timeoutMsFromEnv()).toBe(300_000);
  process.env.ZEROMOE_COMM_TIMEOUT_S = "2.5";
  expect(timeoutMsFromEnv()).toBe(2500);
  process.env.ZEROMOE_COMM_TIMEOUT_S = "soon";
  expect(() => timeoutMsFromEnv()).toThrow('ZEROMOE_COMM_TIMEOUT_S must be a positive number of seconds, got "soon"');
  delete process.env.ZEROMOE_COMM_ARENA_MB;
  expect(slotBytesFromEnv()).toBe(DEFAULT_SLOT_BYTES);
  expect(slotBytesFromEnv(16)).toBe(DEFAULT_SLOT_BYTES);
  expect(slotBytesFromEnv(64)).toBe(4 << 20);
  expect(slotBytesFromEnv(1000)).toBe(1 << 20);
  process.env.ZEROMOE_COMM_ARENA_MB = "3";
  expect(slotBytesFromEnv()).toBe(3 * 1048576);
  expect(slotBytesFromEnv(64)).toBe(3 * 1048576);
  process.env.ZEROMOE_COMM_ARENA_MB = "-1";
  expect(() => slotBytesFromEnv()).toThrow("ZEROMOE_COMM_ARENA_MB must be a positive number of MiB");
});

test("world memory refuses slots too small for the all_to_all_v count exchange", () => {
  expect(() => createLocalWorldMemory(8, 64)).toThrow("slotBytes (64) must be at least 16·worldSize = 128");
  expect(createLocalWorldMemory(3, 1001).slotBytes).toBe(1000);
});

test("trace prints each call with its number, op, array type, length and group", async () => {
  const spy = spyOn(console, "error").mockImplementation(() => {});
  try {
    const comm = createSoloCommunicator({ trace: true });
    await comm.allReduce(new Float64Array(7));
    await comm.allGather(new Int32Array(3), undefined, { group: comm.newGroup([0], "solo") });
    expect(spy.mock.calls.map((c) => String(c[0]))).toEqual([
      "[comm] rank 0 call 1: all_reduce Float64Array length 7 root 0 flags 0 on group world",
      "[comm] rank 0 call 2: all_gather Int32Array length 3 root 0 flags 0 on group solo",
    ]);
  } finally {
    spy.mockRestore();
  }
});
