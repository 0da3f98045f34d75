/**
 * torchrun-style launch variables are never ignored: `bun run train` started as one rank of a
 * torchrun job (RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR set) exits 2 naming the variables and the
 * launcher to use; the single-process case (WORLD_SIZE 1, rank 0) is honoured as a world of one.
 */
import { describe, expect, test } from "bun:test";
import { torchrunEnvProblem } from "../../src/cli/torchrun-env.ts";

const ROOT = new URL("../../../", import.meta.url).pathname;

describe("torchrun launch variables", () => {
  test("a rank of a larger job is refused, naming what is set and the launcher to use", () => {
    const p = torchrunEnvProblem({ RANK: "1", WORLD_SIZE: "4", LOCAL_RANK: "1", MASTER_ADDR: "10.0.0.1", MASTER_PORT: "29500" }, undefined, false)!;
    expect(p).toContain('RANK="1", WORLD_SIZE="4", LOCAL_RANK="1", MASTER_ADDR="10.0.0.1", MASTER_PORT="29500"');
    expect(p).toContain("`bun run train --world-size 4 ...` starts its 4 ranks itself");
    expect(p).toContain("--launcher mpi --hostfile FILE");
    // any one of them alone too (never ignored)
    for (const k of ["RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "LOCAL_WORLD_SIZE"]) expect(torchrunEnvProblem({ [k]: "3" }, undefined, false)).toContain(`${k}="3"`);
    expect(torchrunEnvProblem({ WORLD_SIZE: "2" }, undefined, false)).toContain("--world-size 2");
  });

  test("a world of one is honoured; --world-size above 1 with it is refused; none set or under mpirun: nothing to say", () => {
    expect(torchrunEnvProblem({ RANK: "0", WORLD_SIZE: "1", LOCAL_RANK: "0", MASTER_ADDR: "127.0.0.1", MASTER_PORT: "29500" }, undefined, false)).toBeNull();
    expect(torchrunEnvProblem({ RANK: "0", WORLD_SIZE: "1" }, 1, false)).toBeNull();
    expect(torchrunEnvProblem({ RANK: "0", WORLD_SIZE: "1" }, 2, false)).toContain("WORLD_SIZE=\"1\"");
    expect(torchrunEnvProblem({}, 4, false)).toBeNull();
    expect(torchrunEnvProblem({ RANK: "", WORLD_SIZE: "" }, 4, false)).toBeNull();
    expect(torchrunEnvProblem({ RANK: "2", WORLD_SIZE: "4" }, 4, true)).toBeNull();
  });

  test("bun run train under torchrun's variables exits 2 with the sentence, no stack trace", async () => {
    const p = Bun.spawn(["bun", "run", "train", "--backend", "cpu", "--steps", "1"], { cwd: ROOT, stdout: "pipe", stderr: "pipe", env: { ...process.env, RANK: "1", WORLD_SIZE: "2", LOCAL_RANK: "1", MASTER_ADDR: "127.0.0.1", MASTER_PORT: "29500" } });
    const [o, e] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text()]);
    expect(await p.exited).toBe(2);
    expect(o + e).toContain("torch.distributed launch variables are set");
    expect(o + e).toContain("bun run train --world-size 2");
    expect(o + e).not.toMatch(/^\s+at /m);
  }, 300_000);
});
