/**
 * torch.distributed's launch variables (set by torchrun, `python -m torch.distributed.launch`, the
 * `deepspeed` launcher, Slurm wrappers or a Kubernetes PyTorchJob): RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT. ZeroMoE joins no torch.distributed rendezvous: one
 * `bun run train --world-size N` starts its N ranks itself on one host, and `--launcher mpi` spans
 * hosts. So a process started as one rank of a torchrun job must not train silently as a world of
 * one (each of N processes would train the whole job alone): `bun run train` refuses it, naming the
 * launcher to use. The one consistent single-process case (WORLD_SIZE 1, RANK and LOCAL_RANK 0 or
 * unset) is honoured as the world of one it describes.
 */

import { quoteUntrusted } from "../config/quote-untrusted.ts";

/** The variables torchrun-style launchers set, in the order messages list them. */
export const TORCHRUN_VARIABLES = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"] as const;

/**
 * What is wrong with torchrun-style variables in `env` for `bun run train`, or null when there are
 * none or they describe a single process (WORLD_SIZE "1" with RANK / LOCAL_RANK "0" or unset) and
 * `worldSize` (the --world-size given, if any) is 1 or unset.
 * @param underMpi true when mpirun started this process (its own variables rule; these are ignored
 *   only then, as mpirun does not set them)
 */
export function torchrunEnvProblem(env: Record<string, string | undefined>, worldSize: number | undefined, underMpi: boolean): string | null {
  if (underMpi) return null;
  const set = TORCHRUN_VARIABLES.filter((k) => env[k] !== undefined && env[k] !== "");
  if (set.length === 0) return null;
  const zero = (k: string): boolean => env[k] === undefined || env[k] === "" || env[k] === "0";
  const single = env.WORLD_SIZE === "1" && zero("RANK") && zero("LOCAL_RANK") && (env.LOCAL_WORLD_SIZE === undefined || env.LOCAL_WORLD_SIZE === "" || env.LOCAL_WORLD_SIZE === "1");
  if (single && (worldSize === undefined || worldSize === 1)) return null;
  const shown = set.map((k) => `${k}=${quoteUntrusted(env[k]!)}`).join(", ");
  const n = env.WORLD_SIZE !== undefined && /^[1-9][0-9]{0,5}$/.test(env.WORLD_SIZE) ? env.WORLD_SIZE : "N";
  return (
    `torch.distributed launch variables are set (${shown}), as torchrun or the deepspeed launcher sets them for one rank of a job; ` +
    `ZeroMoE does not join a torch.distributed rendezvous, and this process would otherwise train alone. ` +
    `Start one process instead: \`bun run train --world-size ${n} ...\` starts its ${n} ranks itself on this host, ` +
    `and \`bun run train --launcher mpi --hostfile FILE --world-size ${n} ...\` spans hosts (docs/comm.md); unset ${set.join(", ")} first`
  );
}
