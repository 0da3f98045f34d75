/**
 * The expert units of one MoE layer, as every SwiGLU-expert family declares them: for each expert
 * and each tensor-parallel slice (expert-slice.ts), one unit of kind "expert" holding the gate,
 * up and down weights under the family's Hub names, in the family's parameter order, without an
 * f32 working copy (the grouped expert products read 16-bit weights themselves:
 * nn/moe/grouped-linear.ts).
 */
import type { DType } from "@zeromoe/kernels";
import type { UnitKind, UnitSet } from "../unit.ts";
import { allSlices, expertSwiGLUSpecs, expertUnitName, type ExpertSlice } from "./expert-slice.ts";

/** What {@link addExpertUnits} needs of a family. */
export interface ExpertUnitsSpec {
  layer: number;
  numExperts: number;
  /** Hub names of expert `e`'s three weights. */
  names: (e: number) => { gate: string; down: string; up: string };
  /** The family's parameter order in the unit (its checkpoints list them so). */
  order: readonly ("gate" | "down" | "up")[];
  /** Intermediate (I) and hidden (H) sizes of one expert. */
  intermediate: number;
  hidden: number;
  /** Std of the normal initialisation. */
  std: number;
  slice: ExpertSlice | null | undefined;
  dtypeOf: (name: string, kind: UnitKind) => DType;
  allocate: boolean;
}

/**
 * Add every expert unit of layer `s.layer` to `units`, expert by expert and, within an expert,
 * slice by slice (every slice is declared, so every rank sees the same unit list).
 * @throws as {@link expertSwiGLUSpecs} (an intermediate size not divisible by etp_size) and as
 *   UnitSet.add (a duplicate unit name).
 */
export function addExpertUnits(units: UnitSet, s: ExpertUnitsSpec): void {
  for (let e = 0; e < s.numExperts; e++) {
    for (const slice of allSlices(s.slice)) {
      const name = expertUnitName(s.layer, e, slice);
      const w = expertSwiGLUSpecs(s.names(e), s.intermediate, s.hidden, s.std, slice);
      units.add({ name, kind: "expert", layer: s.layer, expert: e, dtype: s.dtypeOf(name, "expert"), allocate: s.allocate, workingCopy: false, params: s.order.map((k) => w[k]) });
    }
  }
}
