/** dp/ep/edp layouts (consecutive ep blocks, edp = same index within ep) and group creation rules. */

import { expect, test } from "bun:test";
import {
  expertDataParallelGroups,
  expertDataParallelRanks,
  expertParallelGroups,
  expertParallelRanks,
} from "../../src/comm/groups.ts";
import { createSoloCommunicator } from "../../src/comm/solo.ts";

test("world 4, ep 2: ep [0,1],[2,3]; edp [0,2],[1,3]", () => {
  expect(expertParallelGroups(4, 2)).toEqual([[0, 1], [2, 3]]);
  expect(expertDataParallelGroups(4, 2)).toEqual([[0, 2], [1, 3]]);
  expect(expertParallelRanks(3, 4, 2)).toEqual([2, 3]);
  expect(expertDataParallelRanks(3, 4, 2)).toEqual([1, 3]);
});

test("world 12, ep 3: every rank is in exactly one ep and one edp group, and they meet in it", () => {
  const ep = expertParallelGroups(12, 3);
  const edp = expertDataParallelGroups(12, 3);
  expect(ep.length).toBe(4);
  expect(edp.length).toBe(3);
  for (let r = 0; r < 12; r++) {
    const e = ep.filter((g) => g.includes(r));
    const d = edp.filter((g) => g.includes(r));
    expect(e.length).toBe(1);
    expect(d.length).toBe(1);
    expect(e[0]).toEqual(expertParallelRanks(r, 12, 3));
    expect(d[0]).toEqual(expertDataParallelRanks(r, 12, 3));
    expect(e[0].filter((x) => d[0].includes(x))).toEqual([r]);
    expect(d[0].every((x) => x % 3 === r % 3)).toBe(true);
  }
});

test("layout errors name the sizes", () => {
  expect(() => expertParallelGroups(6, 4)).toThrow("world_size (6) must be divisible by ep_size (4)");
  expect(() => expertParallelRanks(9, 8, 2)).toThrow("rank 9 out of range [0, 8)");
});

test("newGroup validates members and works on a world of one", async () => {
  const comm = createSoloCommunicator();
  expect(() => comm.newGroup([0, 0])).toThrow("rank 0 listed twice");
  expect(() => comm.newGroup([1])).toThrow("rank 1 out of range [0, 1)");
  const g = comm.newGroup([0], "solo");
  expect(g.size).toBe(1);
  expect(g.rank).toBe(0);
  const x = new Float32Array([1.5, -2, 3]);
  await comm.allReduce(x, { group: g, average: true });
  expect(Array.from(x)).toEqual([1.5, -2, 3]);
  expect(comm.stats().all_reduce).toMatchObject({ calls: 1, bytesSent: 0 });
});
