/**
 * An expert's tensor-parallel slice (expert TP, plugins/moe/src/expert-tp.ts; docs/moe.md "Expert
 * tensor parallelism"): with `count` = etp_size > 1 a rank holds slice `index` of every expert it
 * holds — gate and up projections [I, H] by rows [index·I/count, (index+1)·I/count), the down
 * projection [H, I] by the same columns — as parameters `{Hub name}.etp{index}` with the sliced
 * shapes, initialised to the full Hub parameter's values of that block (nn/unit.ts `ParamWindow`,
 * its Philox stream). The unit is `layers.{l}.experts.{e}.etp{index}`. The model declares the units
 * of EVERY slice (as it declares every expert under expert parallelism), so all ranks see the same
 * unit list (checkpoint manifests list the model's units); the MoE plugin plans the other slices'
 * units `null` (no buffers), and the experts compute with this rank's slice. Without a slice (null,
 * or count 1) nothing changes.
 */
import type { ParamSpec } from "../unit.ts";

/** Which slice of each expert a rank holds. */
export interface ExpertSlice {
  /** This rank's etp index (0 ≤ index < count). */
  index: number;
  /** etp_size. */
  count: number;
}

/** The parameter name of Hub parameter `hub` in a slice (module comment). */
export function expertParamName(hub: string, slice: ExpertSlice | null | undefined): string {
  return slice && slice.count > 1 ? `${hub}.etp${slice.index}` : hub;
}

/** The etp index of an expert unit's name (`….etp{j}`), or null for a whole expert. */
export function expertSliceOf(unitName: string): number | null {
  const m = /\.etp(\d+)$/.exec(unitName);
  return m ? Number(m[1]) : null;
}

/** Every slice of etp_size `count` (index 0..count−1), or [null] for whole experts. */
export function allSlices(slice: ExpertSlice | null | undefined): (ExpertSlice | null)[] {
  return slice && slice.count > 1 ? Array.from({ length: slice.count }, (_, index) => ({ index, count: slice.count })) : [null];
}

/** The unit name of expert `e` of layer `layer` (module comment). */
export function expertUnitName(layer: number, e: number, slice: ExpertSlice | null | undefined): string {
  return slice && slice.count > 1 ? `layers.${layer}.experts.${e}.etp${slice.index}` : `layers.${layer}.experts.${e}`;
}

/**
 * The specs of one SwiGLU expert's three weights (each family lists them in its own order), named
 * by {@link expertParamName}: gate and up [I/count, H] (rows), down [H, I/count] (columns), each with its
 * window in the full [I, H] / [H, I] matrix; full shapes without a slice.
 * @throws when I is not divisible by slice.count or the index is out of range.
 */
export function expertSwiGLUSpecs(names: { gate: string; down: string; up: string }, intermediate: number, hidden: number, std: number, slice: ExpertSlice | null | undefined): { gate: ParamSpec; down: ParamSpec; up: ParamSpec } {
  const I = intermediate;
  const H = hidden;
  if (!slice || slice.count === 1) {
    return {
      gate: { name: names.gate, shape: [I, H], init: { kind: "normal", std } },
      down: { name: names.down, shape: [H, I], init: { kind: "normal", std } },
      up: { name: names.up, shape: [I, H], init: { kind: "normal", std } },
    };
  }
  const { index: j, count: T } = slice;
  if (!Number.isInteger(T) || T < 1 || I % T !== 0) throw new Error(`moe.etp_size: the expert's intermediate size ${I} is not divisible by etp_size ${T}`);
  if (!Number.isInteger(j) || j < 0 || j >= T) throw new Error(`expert slice: index ${j} out of range [0, ${T})`);
  const w = I / T;
  const n = (hub: string) => expertParamName(hub, slice);
  return {
    gate: { name: n(names.gate), shape: [w, H], init: { kind: "normal", std, window: { fullCols: H, r0: j * w, c0: 0, key: names.gate } } },
    down: { name: n(names.down), shape: [H, w], init: { kind: "normal", std, window: { fullCols: I, r0: 0, c0: j * w, key: names.down } } },
    up: { name: n(names.up), shape: [w, H], init: { kind: "normal", std, window: { fullCols: H, r0: j * w, c0: 0, key: names.up } } },
  };
}
