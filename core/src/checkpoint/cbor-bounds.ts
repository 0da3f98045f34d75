/**
 * A linear pre-scan of untrusted CBOR (RFC 8949) before cbor-x decodes it: every array, map, byte
 * string and text string must fit in the bytes that remain. cbor-x trusts a declared length: an
 * index declaring an array of 112,810,000 items in a few kilobytes took 11.6 s to be refused
 * (issue 32's supervised fuzz, a hang past 10 s). The scan keeps a count of items still to read
 * (no recursion, no allocation) and refuses as soon as that count exceeds the remaining bytes
 * (every item takes at least one byte) or a length runs past the end. Indefinite lengths are
 * refused (ZeroMoE's writer never emits them).
 */

/**
 * @returns null when `b` is one well-bounded CBOR item (trailing bytes allowed), else what is wrong.
 */
export function cborBoundsProblem(b: Uint8Array): string | null {
  const n = b.length;
  let i = 0;
  let pending = 1;
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  while (pending > 0) {
    if (i >= n) return `ends inside an item (${pending} item(s) still expected at byte ${n})`;
    const h = b[i++]!;
    const major = h >> 5;
    const ai = h & 31;
    let arg: number;
    if (ai < 24) arg = ai;
    else if (ai <= 27) {
      const len = 1 << (ai - 24);
      if (i + len > n) return `a ${len}-byte length at byte ${i - 1} runs past the end`;
      arg = len === 1 ? b[i]! : len === 2 ? dv.getUint16(i) : len === 4 ? dv.getUint32(i) : Number(dv.getBigUint64(i));
      i += len;
    } else return `an indefinite or reserved length (additional info ${ai}) at byte ${i - 1}`;
    pending--;
    if (major === 2 || major === 3) {
      if (arg > n - i) return `a ${arg}-byte string at byte ${i} runs past the end (${n - i} bytes left)`;
      i += arg;
    } else if (major === 4 || major === 5) {
      pending += major === 4 ? arg : 2 * arg;
      if (pending > n - i) return `an ${major === 4 ? "array" : "map"} of ${arg} items at byte ${i} cannot fit in the ${n - i} bytes left`;
    } else if (major === 6) pending++;
    // 0, 1: integers; 7: simple values and floats (their bytes were the argument)
  }
  return null;
}
