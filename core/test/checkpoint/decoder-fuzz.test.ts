/**
 * Decoder fuzz (issue 18): at least 10,000 mutated inputs per reader of untrusted bytes — rank
 * files, manifest.json, safetensors, job + DeepSpeed JSON, command-line arguments — with the
 * checksums recomputed so mutations reach the decoders (fuzz-runner.ts says how). Every case must
 * end in success or the reader's own error type; peak resident memory growth must stay under
 * 256 MiB. Each reader runs in its own process under an 8 GiB virtual-memory limit, so a
 * regression that allocates gigabytes fails here instead of exhausting the machine (the fuzz found
 * one: a 2^31-layer job). No case is timed; each run's hang guard is the test timeout. The seed is
 * fixed; a larger run: `ZEROMOE_FUZZ_CASES=100000 ZEROMOE_FUZZ_SEED=7 bun test <this file>`.
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { FUZZ_CASES, FUZZ_SEED } from "./fuzz-kit.ts";
import type { Tally } from "./fuzz-runner.ts";

const RUNNER = join(import.meta.dir, "fuzz-runner.ts");
/** Hang guard of one reader's run: ~10× its time on a busy 2-core machine (≤ 60 s there). */
const GUARD_MS = 900_000;
/** Virtual memory limit of a runner, KiB (Bun reserves a few GiB of address space at start). */
const VM_LIMIT_KIB = 8 << 20;

async function run(reader: string): Promise<Tally> {
  const p = Bun.spawn(["bash", "-c", `ulimit -v ${VM_LIMIT_KIB} && exec bun "$0" "$1"`, RUNNER, reader], { stdout: "pipe", stderr: "pipe", env: { ...process.env } });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  expect(code, `${reader} runner: ${out.slice(-3000)}\n${err.slice(-3000)}`).toBe(0);
  const line = out.trim().split("\n").pop()!;
  console.log(line);
  return JSON.parse(line) as Tally;
}

describe(`decoder fuzz: ${FUZZ_CASES} mutated inputs per reader, checksums recomputed (seed ${FUZZ_SEED})`, () => {
  test("rank files: frames, index and header mutated with CRCs and trailer recomputed", async () => {
    const t = await run("rankFiles");
    expect(t.ok + t.errors).toBe(FUZZ_CASES);
    expect(t.deep).toBeGreaterThan(FUZZ_CASES / 2); // most mutations got past the checksums
    expect(t.peakMiB).toBeLessThan(256);
  }, GUARD_MS);

  test("manifest.json of a real checkpoint: re-signed mutations, read through every record", async () => {
    const t = await run("manifest");
    expect(t.ok + t.errors).toBe(FUZZ_CASES);
    expect(t.deep).toBeGreaterThan(FUZZ_CASES / 2);
    expect(t.peakMiB).toBeLessThan(256);
  }, GUARD_MS);

  test("safetensors: header mutated with its length recomputed (deep shapes, huge dims, long keys)", async () => {
    const t = await run("safetensors");
    expect(t.ok + t.errors).toBe(FUZZ_CASES);
    expect(t.errors).toBeGreaterThan(FUZZ_CASES / 2);
    expect(t.peakMiB).toBeLessThan(256);
  }, GUARD_MS);

  test("job + DeepSpeed JSON: mutated, deep-merged, resolved and summarised", async () => {
    const t = await run("jobConfig");
    expect(t.ok + t.errors).toBe(FUZZ_CASES);
    expect(t.errors).toBeGreaterThan(FUZZ_CASES / 4);
    expect(t.peakMiB).toBeLessThan(256);
  }, GUARD_MS);

  test("command-line arguments", async () => {
    const t = await run("arguments");
    expect(t.ok + t.errors).toBe(FUZZ_CASES);
    expect(t.errors).toBeGreaterThan(FUZZ_CASES / 4);
    expect(t.peakMiB).toBeLessThan(256);
  }, GUARD_MS);
});
