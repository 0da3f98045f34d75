/**
 * Byte sizes as users write them: a plain number of bytes (`8388608`) or a number with a unit —
 * binary `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024) or decimal `kB`/`KB`, `MB`, `GB`, `TB` (powers
 * of 1000), `B` for bytes; case-sensitive as written by IEC 80000-13, fractional numbers allowed
 * (`1.5GiB`). Used by `max_device_memory` and `--max-device-memory`.
 */

const UNITS: Readonly<Record<string, number>> = {
  B: 1, kB: 1e3, KB: 1e3, MB: 1e6, GB: 1e9, TB: 1e12,
  KiB: 2 ** 10, MiB: 2 ** 20, GiB: 2 ** 30, TiB: 2 ** 40,
};

/**
 * Parse a byte size (see the module comment) into a whole number of bytes (rounded down).
 * @returns the bytes, or an error string saying what was expected
 */
export function parseByteSize(v: unknown): number | string {
  if (typeof v === "number") {
    // the same rule as a string: a positive whole number of bytes below 2^53 after rounding down
    if (!Number.isFinite(v) || v <= 0) return `expected a positive number of bytes, got ${v}`;
    const bytes = Math.floor(v);
    if (!(bytes > 0) || !Number.isSafeInteger(bytes)) return `expected a positive size of at least 1 byte and below 2^53 bytes, got ${v}`;
    return bytes;
  }
  if (typeof v !== "string") return `expected a size such as "8MiB", "4GiB" or a number of bytes, got ${typeof v}`;
  const m = /^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$/.exec(v);
  if (!m) return `expected a size such as "8MiB", "4GiB" or a number of bytes, got "${v.length > 40 ? v.slice(0, 40) + "…" : v}"`;
  const unit = m[2] === "" ? "B" : m[2]!;
  const mult = UNITS[unit];
  if (mult === undefined) return `unknown unit "${unit}" in "${v}" (use B, KiB, MiB, GiB, TiB, kB, MB, GB or TB)`;
  const bytes = Math.floor(Number(m[1]) * mult);
  if (!(bytes > 0) || !Number.isSafeInteger(bytes)) return `expected a positive size below 2^53 bytes, got "${v}"`;
  return bytes;
}

/** Bytes as the largest binary unit that keeps a number ≥ 1, two decimals ("4.00 GiB"). */
export function formatByteSize(bytes: number): string {
  for (const [u, m] of [["TiB", 2 ** 40], ["GiB", 2 ** 30], ["MiB", 2 ** 20], ["KiB", 2 ** 10]] as const) {
    if (bytes >= m) return `${(bytes / m).toFixed(2)} ${u}`;
  }
  return `${bytes} B`;
}
