/**
 * The largest single buffer a job allocates for one unit, as the engine allocates it — what the
 * memory check (memory-check.ts) holds against the backend's largest buffer / binding.
 *
 * - Every unit except a 16-bit job's experts: the unit in f32 — the data of an f32 unit, or the f32
 *   working copy a 16-bit unit computes through (nn/unit.ts `materialize`) — `4 × numel` bytes,
 *   whatever the ZeRO stage.
 * - An expert unit of a bf16/fp16 job has no f32 working copy (nn/unit.ts `workingCopy: false`): its
 *   largest buffer is the largest of its 16-bit storage and gradient (`2 × numel`), its f32
 *   optimizer states on the device (engine/unit-state.ts `allocate`: Adam m, v and the master
 *   weights, each `4 × numel` when replicated — ZeRO 0 or an expert-data-parallel group of one rank
 *   — else one shard of `ceil(numel / edp)`, edp = world_size / (ep_size · etp_size); none when
 *   the optimizer states are offloaded whole), and the f32 weight stack of the grouped products.
 * - The grouped products' stack (nn/moe/grouped-weights.ts `groupedProduct`, `groupedWeightGrads`):
 *   one projection (H·I_e/etp elements, f32) of as many of the rank's experts of a layer
 *   (E / ep_size) as fit `groupedMemory.stackBytes`, at least one — for f32 experts too.
 */
import type { JobConfig } from "../config/types.ts";
import { groupedMemory } from "../nn/moe/grouped-weights.ts";
import type { UnitSize } from "./memory-estimate.ts";

/** The largest buffer of one unit (or of the whole model: {@link largestBuffer}). */
export interface LargestBuffer {
  /** The unit it belongs to. */
  unit: UnitSize;
  /** Its bytes. */
  bytes: number;
  /** What the buffer is, for messages ("the unit in f32 …", "the grouped products' f32 weight stack …"). */
  what: string;
  /** Whether the buffer is the f32 unit itself (true) — which no ZeRO stage, world_size or precision
   * changes — or one the layout sizes (a 16-bit expert's storage, optimizer shard or stack). */
  wholeF32: boolean;
}

/** Bytes of the grouped products' f32 weight stack for `unit` (an expert entry of
 * memory-estimate.ts `modelUnits`: 3 equal projections per expert) when a rank holds `held` of
 * the layer's experts: the run of experts within `groupedMemory.stackBytes` (at least one). */
export function expertStackBytes(unit: UnitSize, held: number): { bytes: number; experts: number } {
  const w = (4 * unit.numel) / 3;
  const experts = Math.max(1, Math.min(held, Math.floor(groupedMemory.stackBytes / w)));
  return { bytes: w * experts, experts };
}

/** The largest buffer of `unit` in `config` (module comment). */
export function unitLargestBuffer(config: JobConfig, unit: UnitSize): LargestBuffer {
  const f32: LargestBuffer = { unit, bytes: 4 * unit.numel, what: "the unit in f32, which every ZeRO stage and precision materialises for compute", wholeF32: true };
  if (unit.kind !== "expert") return f32;
  const ep = config.moe?.ep_size ?? 1;
  const etp = config.moe?.etp_size ?? 1;
  // an expert entry counts every slice unit of the layer (E · etp); a rank holds one slice of E/ep
  const held = Math.ceil(unit.count / Math.max(1, etp) / ep);
  const stack = expertStackBytes(unit, held);
  const stackBuf: LargestBuffer = { unit, bytes: stack.bytes, what: `the grouped products' f32 weight stack of ${stack.experts} expert${stack.experts === 1 ? "" : "s"} (one projection each, within the ${groupedMemory.stackBytes} byte stack budget: nn/moe/grouped-weights.ts)`, wholeF32: false };
  const mixed = config.bf16.enabled || config.fp16.enabled;
  if (!mixed) return stackBuf.bytes > f32.bytes ? stackBuf : f32;
  const z = config.zero_optimization;
  const edp = Math.max(1, Math.floor(config.world_size / (ep * etp)));
  const candidates: LargestBuffer[] = [{ unit, bytes: 2 * unit.numel, what: "the unit's 16-bit storage (experts of a 16-bit job keep no f32 working copy)", wholeF32: false }, stackBuf];
  const offloaded = z.offload_optimizer.device !== "none" && z.offload_optimizer.ratio === 1;
  if (!offloaded) {
    const sharded = z.stage >= 1 && edp > 1;
    const len = sharded ? Math.ceil(unit.numel / edp) : unit.numel;
    candidates.push({ unit, bytes: 4 * len, what: sharded ? `the unit's f32 optimizer states (m, v, master), one shard of ${edp}` : z.stage === 0 ? "the unit's f32 optimizer states (m, v, master), replicated at ZeRO stage 0" : "the unit's f32 optimizer states (m, v, master), whole: one rank per expert replica", wholeF32: false });
  }
  return candidates.reduce((a, b) => (b.bytes > a.bytes ? b : a));
}

/** The largest buffer over `units` (non-empty; the first of equal sizes wins). */
export function largestBuffer(config: JobConfig, units: readonly UnitSize[]): LargestBuffer {
  return units.map((u) => unitLargestBuffer(config, u)).reduce((a, b) => (b.bytes > a.bytes ? b : a));
}
