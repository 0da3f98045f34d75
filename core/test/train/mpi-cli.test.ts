/**
 * `bun run train` on the mpi transport: `--launcher mpi --world-size 2` runs mpirun itself and
 * gives the same summary (losses, comm bytes, memory) as the local launcher at world 2; under a
 * direct `mpirun -np 2 … train.ts`, a `--world-size` that disagrees with -np is a usage error
 * (exit 2); without mpirun on PATH, `--launcher mpi` says what to install (exit 2; runs even
 * where Open MPI is installed, by hiding it from PATH). Skips the mpirun cases when Open MPI is
 * absent.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { mpirunCommand } from "../../src/launch/mpi-launch.ts";
import { MPI_AVAILABLE } from "../comm/mpi/mpi-available.ts";

const TRAIN = fileURLToPath(new URL("../../src/cli/train.ts", import.meta.url));
const DIR = mkdtempSync(join(tmpdir(), "zeromoe-mpi-cli-"));
afterAll(() => rmSync(DIR, { recursive: true, force: true }));

const JOB = join(DIR, "job.json");
writeFileSync(JOB, JSON.stringify({
  model: { model_type: "mixtral", vocab_size: 256, hidden_size: 24, intermediate_size: 20, num_hidden_layers: 2, num_attention_heads: 3,
    num_key_value_heads: 1, num_local_experts: 4, num_experts_per_tok: 2, max_position_embeddings: 32 },
  data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 16 },
  steps: 3, eval_interval: 0, backend: "cpu", train_micro_batch_size_per_gpu: 2,
  zero_optimization: { stage: 3 }, moe: { ep_size: 2 },
}));

function run(argv: string[], env: Record<string, string | undefined> = process.env): { code: number; out: string } {
  const p = Bun.spawnSync([process.execPath, TRAIN, ...argv], { env, stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode ?? -1, out: p.stdout.toString() + p.stderr.toString() };
}

test.skipIf(!MPI_AVAILABLE)("--launcher mpi --world-size 2 gives the local launcher's summary", () => {
  const local = run(["--config", JOB, "--world-size", "2", "--summary", join(DIR, "local.json")]);
  expect(local.code).toBe(0);
  const mpi = run(["--config", JOB, "--launcher", "mpi", "--world-size", "2", "--summary", join(DIR, "mpi.json")]);
  expect(mpi.out).toContain("done       3 steps");
  expect(mpi.code).toBe(0);
  // one rank prints: the job and result lines appear once
  expect(mpi.out.match(/^done /gm)?.length).toBe(1);
  const a = JSON.parse(readFileSync(join(DIR, "local.json"), "utf8"));
  const b = JSON.parse(readFileSync(join(DIR, "mpi.json"), "utf8"));
  expect(b.world_size).toBe(2);
  expect(b.losses).toEqual(a.losses);
  expect(b.comm).toEqual(a.comm);
  expect(b.memory).toEqual(a.memory);
  expect(new Set(b.losses).size).toBe(3);
}, 300_000);

test.skipIf(!MPI_AVAILABLE)("under mpirun, --world-size other than -np is a usage error (exit 2)", () => {
  const p = Bun.spawnSync([...mpirunCommand({ worldSize: 2 }), process.execPath, TRAIN, "--config", JOB, "--world-size", "3"], { stdout: "pipe", stderr: "pipe" });
  const out = p.stdout.toString() + p.stderr.toString();
  expect(out).toContain("--world-size 3 but mpirun started 2 processes");
  expect(p.exitCode).toBe(2);
}, 300_000);

test("--launcher mpi without mpirun on PATH says what to install (exit 2)", () => {
  // a PATH holding only bun (bun may share a folder with mpirun, e.g. /usr/bin)
  const bin = join(DIR, "bin");
  mkdirSync(bin);
  symlinkSync(process.execPath, join(bin, "bun"));
  const r = run(["--config", JOB, "--launcher", "mpi", "--world-size", "2"], { ...process.env, PATH: bin });
  expect(r.out).toContain("mpirun not found on PATH; install Open MPI");
  expect(r.out).toContain("apt-get install -y openmpi-bin libopenmpi-dev");
  expect(r.code).toBe(2);
});
