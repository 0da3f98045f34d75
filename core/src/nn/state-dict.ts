/**
 * Moving parameter values between host tensors (as read from / written to safetensors) and units.
 * A {@link StateTensor} is `{dtype, shape, data}` with `data` the host array for the dtype
 * (f32: Float32Array or Float64Array; f16/bf16: Uint16Array bits). Conversions between f32, f16 and
 * bf16 are done on the device with the backend's `cast` (round to nearest even).
 */
import type { DType, HostArray } from "@zeromoe/kernels";
import { fmtShape, numelOf } from "../tensor/tensor.ts";
import type { Parameter } from "./unit.ts";

/** A host tensor: dtype, shape, and data of length numel(shape). */
export interface StateTensor {
  dtype: DType;
  shape: number[];
  data: HostArray;
}

/** A state dict: Hugging Face parameter name → tensor. */
export type StateDict = Map<string, StateTensor>;

/**
 * Write `numel(p)` elements of `src` starting at element `srcOffset` into parameter `p`'s region of
 * its unit's `data`, converting dtype if needed.
 * @throws if the unit is not resident, the source is too short, or its dtype is not a float type.
 */
export function writeParam(p: Parameter, src: StateTensor, srcOffset = 0, source = "state dict"): void {
  const unit = p.unit;
  if (!unit.data) throw new Error(`${source}: cannot load ${p.name}, unit ${unit.name} has no data buffer (gather it first)`);
  if (src.dtype !== "f32" && src.dtype !== "f16" && src.dtype !== "bf16") throw new Error(`${source}: ${p.name} has dtype ${src.dtype}, expected f32, f16 or bf16`);
  if (src.data.length < srcOffset + p.numel) throw new Error(`${source}: ${p.name}: source ${fmtShape(src.shape)} has ${src.data.length} elements, need ${srcOffset + p.numel}`);
  if (numelOf(src.shape) !== src.data.length) throw new Error(`${source}: ${p.name}: data length ${src.data.length} ≠ numel of shape ${fmtShape(src.shape)}`);
  if (p.numel === 0) return;
  const slice = src.data.subarray(srcOffset, srcOffset + p.numel) as HostArray;
  const be = unit.be;
  if (src.dtype === unit.dtype) {
    be.write({ buf: unit.data, off: p.offset }, slice);
    return;
  }
  const tmp = be.alloc(src.dtype, p.numel, "other");
  be.write({ buf: tmp, off: 0 }, slice);
  be.cast({ buf: tmp, off: 0 }, { buf: unit.data, off: p.offset }, p.numel);
  be.free(tmp);
}

/** Read parameter `p` from its unit's `data` in the unit's dtype. @throws if not resident. */
export async function readParam(p: Parameter): Promise<StateTensor> {
  const unit = p.unit;
  if (!unit.data) throw new Error(`cannot read ${p.name}: unit ${unit.name} has no data buffer (gather it first)`);
  const data = await unit.be.read({ buf: unit.data, off: p.offset }, p.numel);
  return { dtype: unit.dtype, shape: [...p.shape], data };
}

/** Read the gradient of `p` (from `unit.grad`, the unit's dtype), or null if none was produced. */
export async function readGrad(p: Parameter): Promise<StateTensor | null> {
  const unit = p.unit;
  if (!unit.grad) return null;
  const data = await unit.be.read({ buf: unit.grad, off: p.offset }, p.numel);
  return { dtype: unit.dtype, shape: [...p.shape], data };
}
