/**
 * The `mpi` transport (one process per rank under mpirun) trains exactly like the `local`
 * transport (Bun Workers): the same jobs at the same world size give bit-identical losses, gradient
 * norms, final parameters and comm byte counts — ZeRO stages 0–3 at world 2 and 4, with ep_size 1,
 * 2 (world 2 and 4) and 4 (world 4). Why exact: both transports reduce in ascending group order
 * with the same arithmetic (core/src/comm/reduce.ts; docs/comm.md "Determinism rule"), and
 * everything else a rank computes is local to it. Skips with a message when Open MPI is absent.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { launch } from "../../src/launch/index.ts";
import { launchMpi } from "../../src/launch/mpi-launch.ts";
import { MPI_AVAILABLE } from "../comm/mpi/mpi-available.ts";
import { awkwardModel, FIXTURE_ENTRY, tinyJob, type TrainArgs, type TrainOut } from "./fixtures.ts";

const STEPS = 2;
const MIX4 = { ...awkwardModel(), num_local_experts: 4 };

function job(stage: number, ep: number): Record<string, unknown> {
  return tinyJob({
    model: ep > 1 ? MIX4 : awkwardModel(),
    zero_optimization: { stage, stage3_param_persistence_threshold: 0, reduce_bucket_size: 3000 },
    ...(ep > 1 ? { moe: { ep_size: ep } } : {}),
  });
}

const WORLDS: Record<number, number[]> = { 2: [1, 2], 4: [1, 2, 4] };
const res: Record<number, { local: TrainOut[]; mpi: TrainOut[] }> = {};

beforeAll(async () => {
  if (!MPI_AVAILABLE) return;
  for (const [w, eps] of Object.entries(WORLDS)) {
    const runs: TrainArgs[] = [];
    for (const ep of eps) for (const s of [0, 1, 2, 3]) runs.push({ job: job(s, ep), steps: STEPS, label: `zero${s}/ep${ep}` });
    const worldSize = Number(w);
    const local = await launch<TrainOut[]>({ worldSize, entry: FIXTURE_ENTRY, args: { runs }, timeoutS: 120 });
    const mpi = await launchMpi<TrainOut[]>({ worldSize, entry: FIXTURE_ENTRY, args: { runs }, timeoutS: 120, wallTimeoutS: 400 });
    // every rank of each transport against the same rank of the other
    expect(mpi.length).toBe(worldSize);
    res[worldSize] = { local: local[0]!, mpi: mpi[0]! };
    for (let r = 0; r < worldSize; r++) {
      mpi[r]!.forEach((m, i) => {
        expect(m.losses).toEqual(local[r]![i]!.losses);
        expect(m.comm).toEqual(local[r]![i]!.comm);
      });
    }
  }
}, 600_000);

describe.skipIf(!MPI_AVAILABLE)("mpi transport = local transport, bit for bit", () => {
  for (const [w, eps] of Object.entries(WORLDS)) {
    for (const ep of eps) {
      test(`world ${w}, ep_size ${ep}: ZeRO 0–3 losses, grad norms, parameters and comm bytes equal local's`, () => {
        const { local, mpi } = res[Number(w)]!;
        for (const s of [0, 1, 2, 3]) {
          const label = `zero${s}/ep${ep}`;
          const l = local.find((x) => x.label === label)!;
          const m = mpi.find((x) => x.label === label)!;
          expect(m.losses).toEqual(l.losses);
          expect(m.gradNorms).toEqual(l.gradNorms);
          expect(m.params).toEqual(l.params);
          expect(m.comm).toEqual(l.comm);
          expect(m.calls).toEqual(l.calls);
          // training moved: the losses are not a constant
          expect(m.losses[1]).not.toBe(m.losses[0]);
          // ep_size > 1 really exchanged tokens
          if (ep > 1) expect(m.comm.all_to_all_v).toBeGreaterThan(0);
        }
      });
    }
  }
});
