/**
 * Test-only rank entry: trains like fixtures.ts, but rank `failRank` dies during step `failStep`
 * (0-based) inside a collective — its communicator's reduce_scatter/all_reduce throws, or calls
 * `process.exit(7)`, at the first call of that step — while its peers are in (or entering) the
 * matching collective. Used by failure.test.ts to check that the job ends promptly with the
 * failing rank and its error, and no rank hangs.
 */
import type { Communicator } from "../../src/comm/communicator.ts";
import { trainRank, type TrainArgs } from "./fixtures.ts";

/** Arguments of the failing entry. */
export interface FailArgs extends TrainArgs {
  failRank: number;
  failStep: number;
  mode: "throw" | "exit";
}

/** Thrown by the failing rank (the error the launcher must report). */
export class InjectedFailure extends Error {
  override readonly name = "InjectedFailure";
}

export default async function main(comm: Communicator, rank: number, _ws: number, args: FailArgs): Promise<unknown> {
  if (rank !== args.failRank) return trainRank(comm, args);
  // Each step issues exactly one f64 all_reduce of the loss at its end (engine.trainBatch), so the
  // number of f64 all_reduces seen so far is the step index.
  let step = 0;
  const wrapped = new Proxy(comm, {
    get(target, prop, recv) {
      const v = Reflect.get(target, prop, recv) as unknown;
      if (prop === "allReduce") {
        return async (data: Float64Array, opts?: object) => {
          if (step === args.failStep) die(args);
          const out = await target.allReduce(data, opts);
          if (data instanceof Float64Array && data.length === 2) step++;
          return out;
        };
      }
      if (prop === "reduceScatter") {
        return (input: Float32Array, output?: Float32Array, opts?: object) => {
          if (step === args.failStep) die(args);
          return target.reduceScatter(input, output, opts);
        };
      }
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return trainRank(wrapped, args);
}

function die(args: FailArgs): never {
  if (args.mode === "exit") process.exit(7);
  throw new InjectedFailure(`rank ${args.failRank} fails on purpose in step ${args.failStep} inside a collective`);
}
