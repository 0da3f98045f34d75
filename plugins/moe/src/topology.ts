/**
 * Rank topology for the `topology` placement (`moe.topology`): groups of world ranks that talk
 * fast among themselves (a host, an NVLink island), slow between.
 *
 * File formats (`moe.topology` = path):
 * - JSON `{"groups": [[0, 1], [2, 3]]}`: every world rank 0..world_size−1 exactly once, groups of
 *   equal size;
 * - a DeepSpeed/MPI hostfile (`host slots=N` per line, `#` comments): host i holds the next N world
 *   ranks, in file order; the hosts must have equal slots.
 *
 * Expert-parallel groups are contiguous world ranks (EP group g = ranks g·P … g·P+P−1); the topology
 * is read through them: EP rank i of every EP group lies in some topology group, and the grouping of
 * EP ranks must be the same in every EP group (the placement is shared by all of them) with equal
 * sizes. Every problem is a ConfigError naming `moe.topology` (exit 2).
 */
import { readFileSync } from "node:fs";
import { ConfigError } from "@zeromoe/core/config";

const KEY = "moe.topology";

function fail(message: string): never {
  throw new ConfigError([{ path: KEY, message }], "invalid moe topology");
}

/**
 * Parse a topology file's text into groups of world ranks (see the module comment).
 * @throws ConfigError (path moe.topology) on malformed text, a rank outside [0, worldSize), a rank
 * listed twice, ranks not covered, or groups of unequal size.
 */
export function parseTopology(text: string, worldSize: number, file = "<topology>"): number[][] {
  let groups: number[][];
  const trimmed = text.trim();
  if (trimmed.startsWith("{")) {
    let doc: unknown;
    try {
      doc = JSON.parse(trimmed);
    } catch (e) {
      fail(`${file} is not valid JSON: ${(e as Error).message}`);
    }
    const g = (doc as { groups?: unknown }).groups;
    if (!Array.isArray(g) || g.length === 0 || !g.every((x) => Array.isArray(x) && x.length > 0 && x.every((r) => Number.isInteger(r)))) fail(`${file}: expected {"groups": [[rank, ...], ...]} with non-empty lists of integer ranks`);
    groups = g as number[][];
  } else {
    groups = [];
    let next = 0;
    for (const [i, raw] of text.split("\n").entries()) {
      const line = raw.replace(/#.*/, "").trim();
      if (line === "") continue;
      const m = /^(\S+)\s+slots\s*=\s*(\d+)$/.exec(line);
      if (!m) fail(`${file} line ${i + 1}: expected "host slots=N" (a hostfile) or a JSON {"groups": ...} file`);
      const n = Number(m[2]);
      if (n < 1) fail(`${file} line ${i + 1}: slots must be ≥ 1`);
      groups.push(Array.from({ length: n }, (_, j) => next + j));
      next += n;
    }
    if (groups.length === 0) fail(`${file} names no hosts`);
  }
  const seen = new Set<number>();
  for (const g of groups) {
    for (const r of g) {
      if (r < 0 || r >= worldSize) fail(`${file} names rank ${r}, outside [0, ${worldSize}) (world_size ${worldSize})`);
      if (seen.has(r)) fail(`${file} lists rank ${r} twice`);
      seen.add(r);
    }
  }
  if (seen.size !== worldSize) {
    const missing = Array.from({ length: worldSize }, (_, r) => r).filter((r) => !seen.has(r));
    fail(`${file} does not cover ranks ${missing.join(", ")} (world_size ${worldSize})`);
  }
  const size = groups[0]!.length;
  if (groups.some((g) => g.length !== size)) fail(`${file}: groups have unequal sizes ${groups.map((g) => g.length).join(", ")} (every group must have the same number of ranks)`);
  return groups.map((g) => [...g].sort((a, b) => a - b));
}

/** Read and parse a topology file. @throws ConfigError naming moe.topology when it cannot be read. */
export function readTopology(path: string, worldSize: number): number[][] {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    fail(`cannot read the topology file ${path}: ${(e as Error).message}`);
  }
  return parseTopology(text, worldSize, path);
}

/**
 * The groups of EP ranks (0..epSize−1) that a world-rank topology induces (module comment).
 * @returns groups of EP ranks, each ascending, ordered by their smallest member, equal sizes.
 * @throws ConfigError (moe.topology) when the EP groups are split unevenly or differently.
 */
export function epGroupsOf(topology: readonly (readonly number[])[], worldSize: number, epSize: number): number[][] {
  const groupOf = new Int32Array(worldSize);
  topology.forEach((g, i) => g.forEach((r) => (groupOf[r] = i)));
  let ref: string | null = null;
  let out: number[][] = [];
  for (let base = 0; base < worldSize; base += epSize) {
    const byGroup = new Map<number, number[]>();
    for (let i = 0; i < epSize; i++) {
      const g = groupOf[base + i]!;
      if (!byGroup.has(g)) byGroup.set(g, []);
      byGroup.get(g)!.push(i);
    }
    const groups = [...byGroup.values()].sort((a, b) => a[0]! - b[0]!);
    const sizes = groups.map((g) => g.length);
    if (sizes.some((s) => s !== sizes[0])) fail(`the EP group of world ranks ${base}..${base + epSize - 1} is split into topology groups of unequal sizes ${sizes.join(", ")}; each EP group must meet every topology group it touches with the same number of ranks`);
    const key = JSON.stringify(groups);
    if (ref !== null && key !== ref) fail(`the EP group of world ranks ${base}..${base + epSize - 1} is split differently from EP group 0 (${ref}); the placement is shared by all EP groups, so their ranks must fall into topology groups alike`);
    ref = key;
    out = groups;
  }
  return out;
}
