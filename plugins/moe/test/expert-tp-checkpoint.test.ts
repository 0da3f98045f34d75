/**
 * Checkpoints with expert tensor parallelism (moe.etp_size; docs/moe.md "Expert tensor
 * parallelism"), world 4, tiny mixtral with intermediate 8, through the engine's save and load:
 *
 * - ep 2 × etp 2 at ZeRO 0 and 3, and ep 1 × etp 2 at ZeRO 2: 2 steps, save, a fresh engine resumes
 *   and trains 2 more — losses and every parameter (each rank's slices) bit-identical to 4 steps
 *   without stopping (every slice unit was written by its edp group and read back by name);
 * - a resume at another etp_size is refused before anything is loaded, naming moe.etp_size, in both
 *   directions (etp 2 → 1 and etp 1 → 2; slices are not resharded across etp sizes).
 */
import { describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { launch } from "@zeromoe/core/launch";
import { LIVE_ENTRY, type LiveOut, type LiveRun } from "./fixtures/live-entry.ts";
import { tinyMoeJob, tinyMoeModel } from "./fixtures/train-entry.ts";

const job = (ep: number, etp: number, stage: number) => tinyMoeJob({ model: tinyMoeModel({ intermediate_size: 8 }), moe: { ep_size: ep, etp_size: etp }, zero_optimization: { stage, stage3_param_persistence_threshold: 0 } });
const run = (runs: LiveRun[]) => launch<LiveOut[]>({ worldSize: 4, entry: LIVE_ENTRY, args: { runs }, timeoutS: 300 });

describe("save and resume at etp_size 2 equal the uninterrupted run", () => {
  for (const [ep, etp, stage] of [[2, 2, 0], [2, 2, 3], [1, 2, 2]] as const) {
    test(`world 4, ep ${ep} × etp ${etp}, ZeRO-${stage}`, async () => {
      const j = job(ep, etp, stage);
      const whole = await run([{ job: j, steps: 4 }]);
      const split = await run([{ job: j, steps: 2, save: true }, { job: j, steps: 2, resume: true }]);
      for (let r = 0; r < 4; r++) {
        const w = whole[r]![0]!;
        const [a, b] = [split[r]![0]!, split[r]![1]!];
        expect([...a.losses, ...b.losses]).toEqual(w.losses);
        expect(b.params).toEqual(w.params);
        // this rank holds slice (rank mod etp) units
        expect(b.held.filter((u) => u.includes(".experts.")).every((u) => u.endsWith(`.etp${r % etp}`))).toBe(true);
      }
      expect(whole[0]![0]!.losses[0]).not.toBe(whole[0]![0]!.losses[3]);
    }, 300_000);
  }
});

describe("a change of etp_size on resume is refused naming moe.etp_size", () => {
  for (const [from, to] of [[2, 1], [1, 2]] as const) {
    test(`saved at etp ${from}, resumed at etp ${to} (ep 2, ZeRO-1)`, async () => {
      const err = await run([{ job: job(2, from, 1), steps: 1, save: true }, { job: job(2, to, 1), steps: 1, resume: true }]).then(() => null, (e: Error) => e);
      expect(String(err)).toContain(`moe.etp_size: the checkpoint was saved with etp_size ${from}, the job has ${to}`);
    }, 300_000);
  }
});
