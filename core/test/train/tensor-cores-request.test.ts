/**
 * Which jobs ask for tensor-core matmuls (core/src/train/backend.ts tensorCoresRequest): fp32
 * never, bf16 and fp16 "auto", ZEROMOE_TENSOR_CORES=off/on overriding, anything else refused.
 */
import { expect, test } from "bun:test";
import { TENSOR_CORES_ENV, tensorCoresRequest } from "../../src/train/backend.ts";

const FP32 = { fp16: false, bf16: false }, BF16 = { fp16: false, bf16: true }, FP16 = { fp16: true, bf16: false };

test("fp32 jobs keep the FMA path; bf16 and fp16 jobs ask for tensor cores where offered", () => {
  expect(tensorCoresRequest(FP32, {})).toBe(false);
  expect(tensorCoresRequest(BF16, {})).toBe("auto");
  expect(tensorCoresRequest(FP16, {})).toBe("auto");
  expect(tensorCoresRequest(BF16, { [TENSOR_CORES_ENV]: "" })).toBe("auto");
});

test("ZEROMOE_TENSOR_CORES: off and on for mixed-precision jobs; fp32 jobs unaffected", () => {
  expect(tensorCoresRequest(BF16, { [TENSOR_CORES_ENV]: "off" })).toBe(false);
  expect(tensorCoresRequest(FP16, { [TENSOR_CORES_ENV]: "off" })).toBe(false);
  expect(tensorCoresRequest(BF16, { [TENSOR_CORES_ENV]: "on" })).toBe(true);
  expect(tensorCoresRequest(FP16, { [TENSOR_CORES_ENV]: "auto" })).toBe("auto");
  expect(tensorCoresRequest(FP32, { [TENSOR_CORES_ENV]: "on" })).toBe(false);
});

test("any other value is refused naming the variable and the accepted values, whatever the precision", () => {
  for (const p of [FP32, BF16, FP16]) expect(() => tensorCoresRequest(p, { [TENSOR_CORES_ENV]: "yes" })).toThrow('ZEROMOE_TENSOR_CORES="yes": expected auto, on or off');
  expect(() => tensorCoresRequest(BF16, { [TENSOR_CORES_ENV]: "OFF" })).toThrow(/expected auto, on or off/);
});

test("bun run train with a bad ZEROMOE_TENSOR_CORES exits 2 before launching, naming the variable, no stack trace", () => {
  const cli = new URL("../../src/cli/train.ts", import.meta.url).pathname;
  const p = Bun.spawnSync(["bun", cli, "--backend", "cpu", "--steps", "1"], { env: { ...process.env, [TENSOR_CORES_ENV]: "maybe" }, stdout: "pipe", stderr: "pipe" });
  const text = p.stdout.toString() + p.stderr.toString();
  expect(p.exitCode).toBe(2);
  expect(text).toContain('ZEROMOE_TENSOR_CORES="maybe": expected auto, on or off');
  expect(text).not.toMatch(/^\s+at /m);
  expect(text).not.toContain("step 1/1");
});
