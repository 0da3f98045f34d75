import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createBackend } from "@zeromoe/kernels";
import { kernelProfileRequest } from "../../src/train/backend.ts";
import { resetKernelProfile, writeKernelProfile } from "../../src/train/kernel-profile.ts";

test("ZEROMOE_PROFILE_KERNELS names the output file; unset or empty is off", () => {
  expect(kernelProfileRequest({})).toBeUndefined();
  expect(kernelProfileRequest({ ZEROMOE_PROFILE_KERNELS: "" })).toBeUndefined();
  expect(kernelProfileRequest({ ZEROMOE_PROFILE_KERNELS: "/tmp/p.json" })).toBe("/tmp/p.json");
});

test("writeKernelProfile divides a fake profiler's totals by the steps, longest first, shares summing to 1", async () => {
  let reset = 0;
  const rows = [
    { label: "matmul", dispatches: 6, ns: 3_000_000 },
    { label: "softmax", dispatches: 2, ns: 1_000_000 },
  ];
  const be = { profile: async () => rows, resetProfile: () => void reset++ } as never;
  await resetKernelProfile(be);
  expect(reset).toBe(1);
  const path = join(mkdtempSync(join(tmpdir(), "zm-prof-")), "p.json");
  const p = await writeKernelProfile(be, path, 2);
  expect(p).not.toBeNull();
  const onDisk = JSON.parse(readFileSync(path, "utf8"));
  expect(onDisk).toEqual(p);
  expect(onDisk.steps).toBe(2);
  expect(onDisk.gpu_ms_per_step).toBeCloseTo(2, 12);
  expect(onDisk.dispatches_per_step).toBe(4);
  expect(onDisk.kernels.map((k: { label: string }) => k.label)).toEqual(["matmul", "softmax"]);
  expect(onDisk.kernels[0].ms_per_step).toBeCloseTo(1.5, 12);
  expect(onDisk.kernels[0].share + onDisk.kernels[1].share).toBeCloseTo(1, 12);
});

test("a cpu backend has no profiler: nothing is written", async () => {
  const { backend } = await createBackend("cpu");
  const path = join(mkdtempSync(join(tmpdir(), "zm-prof-")), "p.json");
  expect(await writeKernelProfile(backend, path, 3)).toBeNull();
  expect(() => readFileSync(path)).toThrow();
});
