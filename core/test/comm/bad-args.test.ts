/**
 * Argument checks on both transports: each bad call is refused before any data moves, with the
 * same message on `local` and `mpi` (the messages written out here, not taken from the code), and
 * the ranks stay in step afterwards (a healthy all_reduce matches its sum computed here). World
 * size 3. The mpi case skips when Open MPI is absent.
 */
import { expect, test } from "bun:test";
import { launch } from "../../src/launch/launch.ts";
import { launchMpi } from "../../src/launch/mpi-launch.ts";
import type { BadArgsResult } from "./fixtures/bad-args-entry.ts";
import { MPI_AVAILABLE } from "./mpi/mpi-available.ts";

const ENTRY = new URL("./fixtures/bad-args-entry.ts", import.meta.url);
const N = 3;

/** What rank `r` of a world of 3 must report, case by case. */
function expected(r: number): string[] {
  const a2a = `all_to_all_v on group world (rank ${r})`;
  const others = [0, 1, 2].filter((x) => x !== r).join(",");
  return [
    "rs length: Error: reduce_scatter on group world: input length 7 is not divisible by the group size 3",
    "rs output type: Error: reduce_scatter: output is Float64Array, input is Float32Array; they must match",
    "rs output length: Error: reduce_scatter on group world: output length 3, expected input length / group size = 2",
    'ar op: Error: all_reduce: op must be "sum" or "max", got "min"',
    'ar average max: Error: all_reduce: average is only defined with op "sum"',
    "rs average int: Error: reduce_scatter: average is not defined for Int32Array (integer) data",
    "ag output length: Error: all_gather on group world: output length 5, expected group size × input length = 6",
    "ag output type: Error: all_gather: output is Uint16Array, input is Float32Array; they must match",
    `a2a sendCounts length: Error: ${a2a}: sendCounts has 2 entries, expected the group size 3`,
    `a2a recvCounts negative: Error: ${a2a}: recvCounts must hold non-negative integers, got -1`,
    `a2a send too short: Error: ${a2a}: sendCounts sum to 3 but send has 2 elements`,
    `a2a recv too short: Error: ${a2a}: recvCounts sum to 3 but recv has 2 elements`,
    "bcast root: Error: broadcast: root 5 is not a member of group world [0,1,2]",
    "gather output length: Error: gather on group world: output length 7, expected 6",
    "gather output type: Error: gather: output is Float64Array, input is Float32Array; they must match",
    `scatter no input: Error: scatter on group world: the root (rank ${r}) must pass an input array`,
    "scatter input length: Error: scatter on group world: root input length 5, expected group size × output length = 6",
    "scatter input type: Error: scatter: input is Int32Array, output is Float32Array; they must match",
    "foreign group: Error: barrier: group fake was not created by this rank's communicator",
    "array type: TypeError: comm: unsupported array type Int8Array; expected Float32Array, Float64Array, Uint16Array, Int32Array or Uint32Array",
    `group twice: Error: newGroup: rank ${r} listed twice in [${r},${r}]`,
    `group range: Error: newGroup: rank 3 out of range [0, 3) in [${r},3]`,
    `group non-member: Error: newGroup: rank ${r} is not a member of [${others}]; only members create a group`,
  ];
}

/** Element i of the healthy all_reduce: Σ_r (0.25 + i + r) over r = 0, 1, 2, exact in f32. */
const SUM = [0, 1, 2].map((i) => 3 * (0.25 + i) + 3);

function check(results: BadArgsResult[]): void {
  expect(results.length).toBe(N);
  results.forEach((res, r) => {
    expect(res.errors).toEqual(expected(r));
    expect(res.sum).toEqual(SUM);
  });
}

test("local world 3: every argument check refuses with its message; ranks stay in step", async () => {
  check(await launch<BadArgsResult>({ worldSize: N, entry: ENTRY, timeoutS: 60 }));
}, 300_000);

test.skipIf(!MPI_AVAILABLE)("mpi world 3: the same checks give the same messages", async () => {
  check(await launchMpi<BadArgsResult>({ worldSize: N, entry: ENTRY, timeoutS: 60, wallTimeoutS: 120 }));
}, 300_000);
