/**
 * A communicator's groups, whatever the transport moves bytes with: the checked member list that
 * `newGroup` builds a group from, the group object, and the group a collective runs on
 * (communicator.ts `Group`; docs/comm.md "Groups"). Members are kept in ascending world-rank order.
 */

import type { CollectiveName, CollectiveOptions, Group } from "./communicator.ts";

/** The members of a new group, checked: `ranks` sorted ascending, this rank's index `me` in them,
 * and the group's name (`name`, or `[r0,r1,…]` of the sorted ranks when omitted).
 * @throws when a rank is not an integer in [0, worldSize), a rank is listed twice, or `rank` is not
 *   a member (only members create a group). */
export function groupRanks(
  ranks: readonly number[],
  name: string | undefined,
  rank: number,
  worldSize: number,
): { sorted: number[]; me: number; name: string } {
  const sorted = [...ranks].sort((a, b) => a - b);
  for (let i = 0; i < sorted.length; i++) {
    const r = sorted[i];
    if (!Number.isInteger(r) || r < 0 || r >= worldSize) {
      throw new Error(`newGroup: rank ${r} out of range [0, ${worldSize}) in [${ranks.join(",")}]`);
    }
    if (i > 0 && sorted[i - 1] === r) throw new Error(`newGroup: rank ${r} listed twice in [${ranks.join(",")}]`);
  }
  const me = sorted.indexOf(rank);
  if (me < 0) throw new Error(`newGroup: rank ${rank} is not a member of [${ranks.join(",")}]; only members create a group`);
  return { sorted, me, name: name ?? `[${sorted.join(",")}]` };
}

/** A group made by one communicator (`owner`); transports extend it with what they keep per group. */
export class MemberGroup implements Group {
  readonly size: number;
  /** `ranks`: world ranks ascending; `rank`: this rank's index in them. */
  constructor(
    readonly owner: object,
    readonly ranks: readonly number[],
    readonly rank: number,
    readonly name: string,
  ) {
    this.size = ranks.length;
  }
}

/** The group collective `op` runs on: `opts.group`, or `world` when none is given.
 * @throws when the group was not created by `owner` (another communicator's, or not a group). */
export function callGroup<G extends MemberGroup>(opts: CollectiveOptions | undefined, world: G, owner: object, op: CollectiveName): G {
  const g = opts?.group ?? world;
  if (!(g instanceof MemberGroup) || g.owner !== owner) {
    throw new Error(`${op}: group ${g?.name ?? String(g)} was not created by this rank's communicator`);
  }
  return g as G;
}
