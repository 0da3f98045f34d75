/**
 * Live expert re-placement (`moe.replace_every: N`, docs/moe.md "Live re-placement"): after every
 * N-th optimizer step the placement is computed again from what training measured, and the experts
 * whose EP rank changes move — parameters, gradient shards, fp32 masters (mixed precision), Adam m
 * and v — in ONE all_to_all_v over each EP group, without a restart.
 *
 * Why one all_to_all_v per EP group suffices: the edp group j = {j, j+P, …} holds the experts of
 * EP rank j (core/src/comm/groups.ts), and a unit's ZeRO shard geometry depends only on its edp
 * group's size and the rank's index in it (core/src/engine/plan.ts). Moving expert e from EP rank a
 * to b therefore copies, for every edp index i, world rank i·P+a's buffers unchanged to world rank
 * i·P+b — both in the same EP group — with the same lengths. Nothing else is sent: a rank sends
 * exactly the states of the experts it gives away (tested by byte count).
 *
 * It runs from the plugin's `afterStep` (after the optimizer step and the statistics reduction,
 * nothing in flight) on every rank; every rank reaches the same decision because the loads are
 * summed over dp. The result equals a stop after that step and a resume with the new placement bit
 * for bit (plugins/moe/test/live-replace.test.ts): held units stay in model order, so every sum the
 * step takes runs in the same order as in the resumed engine.
 *
 * Placements plug in through {@link ComputePlacement}: `balanced`, `co_occurrence` and `topology`
 * are registered here (placement.ts `placeExperts`, the graph ones fed by `installLiveReplacement`'s
 * `graph` option); other strategies register theirs with {@link registerPlacementComputer}.
 */
import type { HookContext, SetupContext, UnitHandle, UnitInfo } from "@zeromoe/core";
import { placeExperts, type LayerPlacement, type PlacementGraph } from "./placement.ts";

/** What a placement computation sees (every rank the same values). */
export interface PlacementInput {
  /** Optimizer steps completed. */
  step: number;
  numLayers: number;
  numExperts: number;
  epSize: number;
  /** loads[l][e]: tokens routed to expert e of layer l over every step of this run so far, summed
   * over dp (stats.ts cumulativeCounts); an empty row for a dense layer. */
  loads: readonly (readonly number[])[];
  /** The current placement. */
  current: readonly LayerPlacement[];
  /** Pair statistics and topology groups for the graph placements (`co_occurrence`, `topology`;
   * placement.ts `PlacementGraph`), or null where the plugin gathers none (they then place by
   * load, as placement.ts `placeExperts` does without pairs). */
  graph: PlacementGraph | null;
}

/** A placement computation: statistics → expert→rank map per layer (`owner[e]`, E/P experts per
 * rank). Must be deterministic in its input. */
export type ComputePlacement = (input: PlacementInput) => LayerPlacement[];

/** A layer's loads where it has experts (a dense layer's row is empty). */
const moeLoads = (x: PlacementInput) => x.loads.map((l) => (l.length === x.numExperts ? l : undefined));

const COMPUTERS = new Map<string, ComputePlacement>(
  (["balanced", "co_occurrence", "topology"] as const).map((name) => [name, (x: PlacementInput) => placeExperts(name, x.numLayers, x.numExperts, x.epSize, moeLoads(x), x.graph ?? undefined)] as const),
);

/** Register the live computation of placement strategy `name` (e.g. a co-occurrence partition).
 * @throws when `name` already has one. */
export function registerPlacementComputer(name: string, fn: ComputePlacement): void {
  if (COMPUTERS.has(name)) throw new Error(`moe live re-placement: placement "${name}" already has a computation`);
  COMPUTERS.set(name, fn);
}

/** The live computation of placement `name`, or null when the strategy cannot change. */
export function placementComputer(name: string): ComputePlacement | null {
  return COMPUTERS.get(name) ?? null;
}

/** One expert that changes EP rank. */
export interface ExpertMove {
  layer: number;
  expert: number;
  /** EP-group ranks. */
  from: number;
  to: number;
}

/** The experts whose EP rank differs between `before` and `after`, by layer then expert.
 * @throws when the two cover different layers or experts. */
export function expertMoves(before: readonly LayerPlacement[], after: readonly LayerPlacement[]): ExpertMove[] {
  if (before.length !== after.length) throw new Error(`moe live re-placement: the new placement has ${after.length} layers, the current one ${before.length}`);
  const out: ExpertMove[] = [];
  before.forEach((p, l) => {
    const q = after[l]!;
    if (q.owner.length !== p.owner.length) throw new Error(`moe live re-placement: layer ${l} of the new placement has ${q.owner.length} experts, the current one ${p.owner.length}`);
    for (let e = 0; e < p.owner.length; e++) if (p.owner[e] !== q.owner[e]) out.push({ layer: l, expert: e, from: p.owner[e]!, to: q.owner[e]! });
  });
  return out;
}

/** What one re-placement did (summary `moe.replacements`, the log line). */
export interface ReplacementRecord {
  /** Optimizer steps completed when it ran. */
  step: number;
  /** Experts that changed rank (summed over layers). */
  experts_moved: number;
  /** Bytes the all_to_all_v sent, summed over every rank. */
  bytes: number;
  /** The moves, "layer:expert from→to" (EP ranks). */
  moves: string[];
}

/** A unit's buffers in the order they travel, with their element counts: parameters (storage
 * dtype), gradient (unit dtype), master (f32, mixed precision), m, v (f32). A frozen unit sends its
 * parameters only. */
function pieces(h: UnitHandle): { buf: import("@zeromoe/kernels").Buf; n: number; f32: boolean }[] {
  const p = h.plan;
  const n16 = h.dtype !== "f32";
  const out: { buf: import("@zeromoe/kernels").Buf; n: number; f32: boolean }[] = [];
  out.push({ buf: h.paramStorage().buf, n: p.params === "sharded" ? p.shardSize : h.numel, f32: !n16 });
  if (!h.trainable) return out;
  out.push({ buf: h.gradAccumulator(), n: p.grads === "sharded" ? p.shardSize : h.numel, f32: !n16 });
  const os = h.optimizerState();
  const on = p.optim === "sharded" ? p.shardSize : h.numel;
  if (os.master) out.push({ buf: os.master, n: on, f32: true });
  out.push({ buf: os.m, n: on, f32: true }, { buf: os.v, n: on, f32: true });
  return out;
}

/** 16-bit words a unit's pieces take on the wire (an f32 element is two words). */
function words(ps: readonly { n: number; f32: boolean }[]): number {
  return ps.reduce((s, x) => s + (x.f32 ? 2 * x.n : x.n), 0);
}

/**
 * Move the experts of `moves` between the ranks of this rank's EP group: the caller has already
 * switched the placement its partition hook reads to the new one. Adopts the incoming experts
 * (their plans come from the partition hook), sends and receives all their states in one
 * all_to_all_v over the EP group, releases the outgoing ones and commits. Every rank calls it with
 * the same moves. Returns the bytes this rank sent.
 * @throws when a unit of a move is missing from the model, or buffer lengths disagree (a bug).
 */
export async function migrateExperts(ctx: Pick<SetupContext, "relocation" | "modelUnits" | "groups" | "comm" | "be"> & Pick<HookContext, "unit">, moves: readonly ExpertMove[]): Promise<number> {
  const ep = ctx.groups.ep;
  const me = ep.rank;
  const unitOf = (l: number, e: number): UnitInfo => {
    const u = ctx.modelUnits.find((x) => x.kind === "expert" && x.layer === l && x.expert === e);
    if (!u) throw new Error(`moe live re-placement: the model has no expert unit for layer ${l}, expert ${e}`);
    return u;
  };
  const outgoing: { to: number; h: UnitHandle }[] = [];
  const incoming: { from: number; h: UnitHandle }[] = [];
  for (const mv of moves) {
    if (mv.from === me) outgoing.push({ to: mv.to, h: ctx.unit(unitOf(mv.layer, mv.expert)) });
    if (mv.to === me) incoming.push({ from: mv.from, h: ctx.relocation.adopt(unitOf(mv.layer, mv.expert)) });
  }
  const P = ep.size;
  const sendCounts = new Array<number>(P).fill(0);
  const recvCounts = new Array<number>(P).fill(0);
  for (const o of outgoing) sendCounts[o.to]! += words(pieces(o.h));
  for (const i of incoming) recvCounts[i.from]! += words(pieces(i.h));
  const send = new Uint16Array(sendCounts.reduce((a, b) => a + b, 0));
  const offs = new Array<number>(P).fill(0);
  for (let j = 1; j < P; j++) offs[j] = offs[j - 1]! + sendCounts[j - 1]!;
  // moves are ordered by (layer, expert), so each destination's part is in that order on both sides
  for (const o of outgoing) {
    for (const pc of pieces(o.h)) {
      const raw = await ctx.be.read({ buf: pc.buf, off: 0 }, pc.n);
      const w = pc.f32 ? new Uint16Array(Float32Array.from(raw as ArrayLike<number>).buffer) : Uint16Array.from(raw as ArrayLike<number>);
      send.set(w, offs[o.to]!);
      offs[o.to]! += w.length;
    }
  }
  const recv = await ctx.comm.allToAllV(send, sendCounts, recvCounts, undefined, { group: ep }).wait();
  const roffs = new Array<number>(P).fill(0);
  for (let j = 1; j < P; j++) roffs[j] = roffs[j - 1]! + recvCounts[j - 1]!;
  for (const i of incoming) {
    for (const pc of pieces(i.h)) {
      const len = pc.f32 ? 2 * pc.n : pc.n;
      const w = recv.slice(roffs[i.from]!, roffs[i.from]! + len);
      roffs[i.from]! += len;
      ctx.be.write({ buf: pc.buf, off: 0 }, pc.f32 ? new Float32Array(w.buffer) : w);
    }
  }
  for (const o of outgoing) ctx.relocation.release(o.h);
  await ctx.relocation.commit();
  return send.length * 2;
}

/** The state {@link installLiveReplacement} keeps: every re-placement so far. */
export interface LiveReplacement {
  records: ReplacementRecord[];
}

/**
 * Register live re-placement on a plugin's set-up context: after every `every`-th step (counted in
 * optimizer steps, `phase.step + 1`) compute the placement with `compute`, switch the array
 * `placement()` returns (the one the partition hook and the dispatcher read; replaced element by
 * element) and migrate.
 * `graph` supplies the run's pair statistics and topology for the graph placements. `onChange` gets
 * the new placement (to update the manifest record). Returns the records.
 */
export function installLiveReplacement(
  ctx: SetupContext,
  opts: { every: number; compute: ComputePlacement; placement: () => LayerPlacement[]; numLayers: number; numExperts: number; loads: () => number[][] | null; graph?: () => PlacementGraph | null; onChange: (p: LayerPlacement[]) => void },
): LiveReplacement {
  const state: LiveReplacement = { records: [] };
  ctx.metrics.afterStep(async () => {
    // the set-up context inherits the hook context's live fields (core/src/engine/engine.ts)
    const hc = ctx as SetupContext & HookContext;
    const done = hc.phase.step + 1;
    if (done % opts.every !== 0) return;
    const loads = opts.loads() ?? Array.from({ length: opts.numLayers }, () => new Array<number>(opts.numExperts).fill(0));
    const current = opts.placement();
    const next = opts.compute({ step: done, numLayers: opts.numLayers, numExperts: opts.numExperts, epSize: ctx.groups.ep.size, loads, current, graph: opts.graph?.() ?? null });
    const moves = expertMoves(current, next);
    let bytes = 0;
    if (moves.length > 0) {
      current.splice(0, current.length, ...next);
      opts.onChange(next);
      const sent = new Float64Array([await migrateExperts(hc, moves)]);
      if (ctx.comm.worldSize > 1) await ctx.comm.allReduce(sent).wait();
      bytes = sent[0]!;
    }
    const rec: ReplacementRecord = { step: done, experts_moved: moves.length, bytes, moves: moves.map((m) => `${m.layer}:${m.expert} ${m.from}→${m.to}`) };
    state.records.push(rec);
    const line = `moe: live re-placement after step ${done}: ${moves.length} expert${moves.length === 1 ? "" : "s"} moved, ${bytes} bytes${moves.length > 0 ? ` (${rec.moves.join(", ")})` : ""}`;
    // logged once when it happens (a per-step metric line would show only at print time)
    ctx.log(line);
  });
  return state;
}
