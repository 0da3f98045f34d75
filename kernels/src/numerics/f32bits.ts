/**
 * Reinterpretation between an f32 value and its 32 IEEE-754 bits, through one shared scratch word.
 */

const scratchF32 = new Float32Array(1);
const scratchU32 = new Uint32Array(scratchF32.buffer);

/** Bits (u32, as a non-negative number) of `x` rounded to f32 (round to nearest even, as
 * `Math.fround`). NaN inputs give the engine's canonical NaN bits. */
export function f32ToBits(x: number): number {
  scratchF32[0] = x;
  return scratchU32[0]!;
}

/** The f32 value whose IEEE-754 bits are the low 32 bits of `bits`, as a JS number (exact). */
export function bitsToF32(bits: number): number {
  scratchU32[0] = bits >>> 0;
  return scratchF32[0]!;
}
