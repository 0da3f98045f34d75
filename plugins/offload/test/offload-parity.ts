/**
 * The shape shared by the offload parity tests (equivalence.test.ts, param-offload.test.ts,
 * param-only.test.ts): each job runs as a triple — without offload ("device"), offloaded to host
 * memory ("cpu"), offloaded to files ("nvme") — over the same model cases, and every offloaded run
 * must give the device run's losses, gradient norms and parameters bit for bit on every rank.
 */
import { expect, test } from "@zeromoe/kernels/runtime/bdd";
import { tinyModel, type TrainOut } from "@zeromoe/core/testing";

/** Where a state lives in one run of a triple. */
export type Mode = "device" | "cpu" | "nvme";

/** The three runs of a triple, in the order the checks expect them. */
export const MODES: readonly Mode[] = ["device", "cpu", "nvme"];

/** A model case: a label and the job keys it overrides. */
export interface ParityCase {
  label: string;
  over: Record<string, unknown>;
}

/**
 * The model cases at `world` ranks: the dense tiny model (labelled `dense`); from 2 ranks a
 * 4-expert MoE at ep_size 2; at exactly 2 ranks bf16.
 */
export function parityCases(world: number, dense = "dense"): ParityCase[] {
  const cases: ParityCase[] = [{ label: dense, over: {} }];
  if (world >= 2) cases.push({ label: "moe ep_size 2", over: { model: { ...tinyModel(), num_local_experts: 4 }, moe: { ep_size: 2 } } });
  if (world === 2) cases.push({ label: "bf16", over: { bf16: { enabled: true } } });
  return cases;
}

/**
 * One test per offloaded run: `runs` are (device, cpu, nvme) triples, `outs[r][i]` rank r's result
 * of run i. On every rank the offloaded run's losses, gradient norms and parameters (the same names,
 * the same values) equal the device run's; `check(dev, off)` adds the test's own expectations.
 */
export function expectTriplesEqual(runs: readonly { label: string }[], outs: TrainOut[][], world: number, check: (dev: TrainOut, off: TrainOut) => void): void {
  for (let i = 0; i < runs.length; i += MODES.length) {
    for (let j = 1; j < MODES.length; j++) {
      test(runs[i + j]!.label, () => {
        for (let r = 0; r < world; r++) {
          const dev = outs[r]![i]!;
          const off = outs[r]![i + j]!;
          expect(off.losses).toEqual(dev.losses);
          expect(off.gradNorms).toEqual(dev.gradNorms);
          expect(Object.keys(off.params).sort()).toEqual(Object.keys(dev.params).sort());
          for (const [key, val] of Object.entries(dev.params)) expect(off.params[key]).toEqual(val);
          check(dev, off);
        }
      });
    }
  }
}
