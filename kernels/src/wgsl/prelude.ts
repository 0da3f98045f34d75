/**
 * WGSL helpers prepended to every kernel: workgroup linearisation for 2-D grids and exact
 * conversions between f32 and the 16-bit storage formats.
 *
 * 16-bit buffers (f16, bf16) are bound as `array<u32>` holding two elements per word, element i in
 * word i/2, low half first (little-endian, the same bytes as a host Uint16Array).
 *
 * - bf16 is the top half of an f32 (docs/domain.md §5). f32 → bf16 rounds to nearest even with the
 *   integer trick `(x + 0x7fff + lsb) >> 16`; NaN stays a quiet NaN.
 * - f16 (IEEE-754 binary16) conversions are done with integer arithmetic rather than
 *   `pack2x16float`/`unpack2x16float`, whose WGSL definition allows either neighbouring value when
 *   rounding and leaves overflow undefined; the contract (backend.ts `cast`) asks for round to
 *   nearest even with overflow to ±inf, as the host conversions in `numerics/f16.ts`.
 */
import type { DType } from "../backend.ts";

/** WGSL source of the shared helper functions. */
export const PRELUDE = /* wgsl */ `
fn wg_lin(wg: vec3<u32>, nwg: vec3<u32>) -> u32 { return wg.x + wg.y * nwg.x; }

fn half_bits(w: u32, i: u32) -> u32 { return (w >> ((i & 1u) << 4u)) & 0xffffu; }

fn bf16_to_f32(h: u32) -> f32 { return bitcast<f32>(h << 16u); }

fn f32_to_bf16(f: f32) -> u32 {
  let x = bitcast<u32>(f);
  if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu) != 0u) { return ((x >> 16u) | 0x40u) & 0xffffu; }
  return ((x + 0x7fffu + ((x >> 16u) & 1u)) >> 16u) & 0xffffu;
}

fn f16_to_f32(h: u32) -> f32 {
  let s = (h & 0x8000u) << 16u;
  let e = (h >> 10u) & 0x1fu;
  let m = h & 0x3ffu;
  if (e == 0u) {
    // zero or subnormal: m · 2^-24, exact in f32
    let v = f32(m) * 5.9604644775390625e-8;
    return bitcast<f32>(bitcast<u32>(v) | s);
  }
  if (e == 31u) { return bitcast<f32>(s | 0x7f800000u | (m << 13u)); }
  return bitcast<f32>(s | ((e + 112u) << 23u) | (m << 13u));
}

fn f32_to_f16(f: f32) -> u32 {
  let x = bitcast<u32>(f);
  let s = (x >> 16u) & 0x8000u;
  let e = (x >> 23u) & 0xffu;
  let m = x & 0x7fffffu;
  if (e == 255u) {
    if (m != 0u) { return s | 0x7e00u | (m >> 13u); }
    return s | 0x7c00u;
  }
  if (e >= 143u) { return s | 0x7c00u; } // 2^16 and above overflow
  if (e >= 113u) {
    // normal half: exponent e - 112 in [1, 30]
    var h = ((e - 112u) << 10u) | (m >> 13u);
    let r = m & 0x1fffu;
    if (r > 0x1000u || (r == 0x1000u && (h & 1u) == 1u)) { h = h + 1u; } // carry may give inf: correct
    return s | h;
  }
  // subnormal half (or zero): value = M · 2^(e-150), half units 2^-24 → M >> (126 - e)
  if (e < 102u) { return s; } // below 2^-25: rounds to zero
  let mm = m | 0x800000u;
  let sh = 126u - e; // 14..24
  var h = mm >> sh;
  let r = mm & ((1u << sh) - 1u);
  let half = 1u << (sh - 1u);
  if (r > half || (r == half && (h & 1u) == 1u)) { h = h + 1u; }
  return s | h;
}
`;

/** WGSL expression converting an f32 expression to 16-bit bits of `dtype` (f16 or bf16). */
export function toHalfBits(dtype: DType, expr: string): string {
  if (dtype === "f16") return `f32_to_f16(${expr})`;
  if (dtype === "bf16") return `f32_to_bf16(${expr})`;
  throw new Error(`toHalfBits: dtype must be f16 or bf16, got ${dtype}`);
}

/** WGSL function `fn <fnName>(i: u32) -> f32` reading element i of float buffer `buf` of `dtype`
 * (f32 directly; f16/bf16 from packed words). Throws for integer dtypes. */
export function floatLoader(fnName: string, buf: string, dtype: DType): string {
  switch (dtype) {
    case "f32":
      return `fn ${fnName}(i: u32) -> f32 { return ${buf}[i]; }\n`;
    case "f16":
      return `fn ${fnName}(i: u32) -> f32 { return f16_to_f32(half_bits(${buf}[i >> 1u], i)); }\n`;
    case "bf16":
      return `fn ${fnName}(i: u32) -> f32 { return bf16_to_f32(half_bits(${buf}[i >> 1u], i)); }\n`;
    default:
      throw new Error(`floatLoader: buffer ${buf} must be f32, f16 or bf16, got ${dtype}`);
  }
}
