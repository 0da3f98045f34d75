/**
 * The mpi transport's literal constants and handle globals (core/src/comm/mpi/ffi.ts) against the
 * installed Open MPI's mpi.h: MPI_SUCCESS is 0, MPI_THREAD_FUNNELED is the enum's second member
 * (1), MPI_STATUS(ES)_IGNORE is the null pointer, and MPI_COMM_WORLD / MPI_BYTE / MPI_INT /
 * MPI_ERRORS_RETURN are the addresses of the globals ffi.ts resolves. Skips when the header (from
 * libopenmpi-dev; found with `mpicc --showme:incdirs`) is absent.
 */
import { expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { MPI_SUCCESS, MPI_THREAD_FUNNELED, STATUS_IGNORE } from "../../../src/comm/mpi/ffi.ts";

function findHeader(): string | null {
  const mpicc = Bun.which("mpicc");
  if (!mpicc) return null;
  const p = Bun.spawnSync([mpicc, "--showme:incdirs"], { stdout: "pipe", stderr: "pipe" });
  for (const d of p.stdout.toString().trim().split(/\s+/)) if (d && existsSync(join(d, "mpi.h"))) return join(d, "mpi.h");
  return null;
}
const header = findHeader();
if (!header) console.warn("[skip] Open MPI's mpi.h not found (mpicc from libopenmpi-dev): constant cross-check skipped");

test.skipIf(!header)("ffi.ts constants and globals match the installed mpi.h", () => {
  const h = readFileSync(header!, "utf8");
  expect(h).toMatch(new RegExp(`#define MPI_SUCCESS\\s+${MPI_SUCCESS}\\b`));
  const threads = /MPI_THREAD_SINGLE,\s*MPI_THREAD_FUNNELED,/.exec(h);
  expect(threads).not.toBeNull(); // an enum starting at 0: FUNNELED = 1
  expect(/enum\s*{\s*MPI_THREAD_SINGLE,/.test(h.replace(/\/\*[\s\S]*?\*\//g, ""))).toBe(true);
  expect(MPI_THREAD_FUNNELED).toBe(1);
  expect(h).toMatch(/#define MPI_STATUS_IGNORE \(\(MPI_Status \*\) 0\)/);
  expect(h).toMatch(/#define MPI_STATUSES_IGNORE \(\(MPI_Status \*\) 0\)/);
  expect(STATUS_IGNORE).toBeNull();
  for (const [name, global] of [["MPI_COMM_WORLD", "ompi_mpi_comm_world"], ["MPI_BYTE", "ompi_mpi_byte"], ["MPI_INT", "ompi_mpi_int"], ["MPI_ERRORS_RETURN", "ompi_mpi_errors_return"]]) {
    expect(h).toMatch(new RegExp(`#define ${name} OMPI_PREDEFINED_GLOBAL\\(\\s*\\w+,\\s*${global}\\)`));
  }
});
