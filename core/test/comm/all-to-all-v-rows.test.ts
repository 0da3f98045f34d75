/**
 * The differentiable all_to_all_v (core/src/comm/all-to-all-v-rows.ts) on real concurrent ranks
 * (Bun Workers) against a host reference of the block layout: forward rows, and input gradients =
 * DIRECT + the loss weights of the positions their rows landed on (the reverse exchange). Layouts
 * at awkward sizes: world 3 with a rank that sends nothing and a rank that receives nothing (its
 * output gets no gradient, yet its backward collective must run), world 4 with uneven and zero
 * blocks, world 1 (no communication), and rows of 1 and 7 elements.
 */
import { expect, test } from "bun:test";
import { launch } from "@zeromoe/core/launch";
import { DIRECT, inputValue, lossWeight, type A2ARowsArgs, type A2ARowsOut } from "./fixtures/all-to-all-v-rows-entry.ts";

const ENTRY = new URL("./fixtures/all-to-all-v-rows-entry.ts", import.meta.url);

/** Host reference: outputs per rank and input gradients per rank. */
function reference(sends: number[][], h: number): { out: number[][]; grad: number[][] } {
  const P = sends.length;
  const out: number[][] = Array.from({ length: P }, () => []);
  const grad: number[][] = sends.map((row) => new Array<number>(row.reduce((s, v) => s + v, 0) * h).fill(DIRECT));
  const nextQ = new Array<number>(P).fill(0);
  for (let i = 0; i < P; i++) {
    // output of m: sources i ascending, then i's rows for m in order
    let r0 = 0;
    for (let m = 0; m < P; m++) {
      for (let t = 0; t < sends[i]![m]!; t++) {
        const r = r0 + t;
        const q = nextQ[m]! + t;
        for (let c = 0; c < h; c++) {
          out[m]![q * h + c] = inputValue(i, r, c);
          grad[i]![r * h + c] = DIRECT + lossWeight(m, q, c);
        }
      }
      nextQ[m]! += sends[i]![m]!;
      r0 += sends[i]![m]!;
    }
  }
  return { out, grad };
}

const CASES: { name: string; sends: number[][]; h: number }[] = [
  { name: "world 3: rank 1 sends nothing, rank 2 receives nothing", sends: [[2, 1, 0], [0, 0, 0], [3, 1, 0]], h: 7 },
  { name: "world 4: uneven blocks, zeros on and off the diagonal", sends: [[1, 0, 4, 2], [3, 0, 0, 1], [0, 5, 1, 0], [2, 2, 0, 3]], h: 1 },
  { name: "world 2: one row in all", sends: [[0, 1], [0, 0]], h: 3 },
  { name: "world 1: to itself", sends: [[5]], h: 7 },
];

for (const c of CASES) {
  test(`allToAllVRows ${c.name}: forward rows and backward gradients equal the reference`, async () => {
    const args: A2ARowsArgs = { sends: c.sends, h: c.h };
    const got = await launch<A2ARowsOut, A2ARowsArgs>({ worldSize: c.sends.length, entry: ENTRY, args, timeoutS: 60 });
    const ref = reference(c.sends, c.h);
    for (let m = 0; m < c.sends.length; m++) {
      expect(got[m]!.out).toEqual(ref.out[m]!);
      expect(got[m]!.grad).toEqual(ref.grad[m]!);
    }
  }, 300_000);
}
