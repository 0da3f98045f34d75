/**
 * Philox4x32-10 blocks in WebAssembly (Salmon, Moraes, Dror & Shaw, "Parallel random numbers: as
 * easy as 1, 2, 3", SC'11): the same generator as `philox4x32` in random.ts, bit for bit, but with
 * wasm's 64-bit integer multiply for the two 32×32→64 products of each round, which JavaScript can
 * only emulate with several floating-point operations (the JS version is ~5× slower).
 *
 * The module is assembled here from its instructions (no build step, no binary blob): one exported
 * function
 *
 *   philox(k0, k1, cLo, cHi, c2, n, words)   all i32 (uint32 bit patterns)
 *
 * which writes blocks for the n consecutive 64-bit counters (cHi:cLo) + 0 … n−1 (words c0, c1;
 * c2 = `c2`, c3 = 0) under key (k0, k1) to memory from byte 0: `words` (2 or 4) uint32 outputs per
 * block, x0 first. One 64 KiB page holds {@link PHILOX_WASM_MAX_WORDS} words, so n·words must not
 * exceed it (checked by the caller, {@link philoxBlocks}).
 */

/** Uint32 outputs one call can hold (one 64 KiB wasm page). */
export const PHILOX_WASM_MAX_WORDS = 16384;

// opcodes (WebAssembly core spec §5.4)
const BLOCK = 0x02, LOOP = 0x03, IF = 0x04, END = 0x0b, BR = 0x0c, BR_IF = 0x0d, VOID = 0x40;
const GET = 0x20, SET = 0x21, TEE = 0x22;
const I32_CONST = 0x41, I64_CONST = 0x42;
const I32_EQZ = 0x45, I32_EQ = 0x46, I32_ADD = 0x6a, I32_SUB = 0x6b, I32_XOR = 0x73;
const I64_MUL = 0x7e, I64_SHR_U = 0x88, I32_WRAP_I64 = 0xa7, I64_EXTEND_I32_U = 0xad;
const I32_STORE = 0x36;
const I32 = 0x7f, I64 = 0x7e;

/** Signed LEB128 of an integer (exact for |v| < 2^53). */
function sleb(v: number): number[] {
  const out: number[] = [];
  let x = BigInt(v);
  for (;;) {
    const byte = Number(x & 0x7fn);
    x >>= 7n;
    if ((x === 0n && (byte & 0x40) === 0) || (x === -1n && (byte & 0x40) !== 0)) {
      out.push(byte);
      return out;
    }
    out.push(byte | 0x80);
  }
}
function uleb(v: number): number[] {
  const out: number[] = [];
  do {
    let byte = v & 0x7f;
    v >>>= 7;
    if (v !== 0) byte |= 0x80;
    out.push(byte);
  } while (v !== 0);
  return out;
}
function section(id: number, body: number[]): number[] {
  return [id, ...uleb(body.length), ...body];
}
function str(s: string): number[] {
  return [...uleb(s.length), ...Array.from(s, (c) => c.charCodeAt(0))];
}

// parameters
const K0 = 0, K1 = 1, CLO = 2, CHI = 3, C2 = 4, N = 5, WORDS = 6;
// locals
const X0 = 7, X1 = 8, X2 = 9, X3 = 10, A = 11, B = 12, R = 13, PTR = 14; // i32
const P0 = 15, P1 = 16; // i64

const M0 = 0xd2511f53, M1 = 0xcd9e8d57, W0 = 0x9e3779b9, W1 = 0xbb67ae85;

function store(local: number, byteOffset: number): number[] {
  return [GET, PTR, GET, local, I32_STORE, 2, ...uleb(byteOffset)];
}

function body(): number[] {
  const round = [
    // p0 = M0 · x0, p1 = M1 · x2 (64-bit products)
    I64_CONST, ...sleb(M0), GET, X0, I64_EXTEND_I32_U, I64_MUL, SET, P0,
    I64_CONST, ...sleb(M1), GET, X2, I64_EXTEND_I32_U, I64_MUL, SET, P1,
    // x0 = hi(p1) ^ x1 ^ a;  x2 = hi(p0) ^ x3 ^ b;  x1 = lo(p1);  x3 = lo(p0)
    GET, P1, I64_CONST, 32, I64_SHR_U, I32_WRAP_I64, GET, X1, I32_XOR, GET, A, I32_XOR, SET, X0,
    GET, P0, I64_CONST, 32, I64_SHR_U, I32_WRAP_I64, GET, X3, I32_XOR, GET, B, I32_XOR, SET, X2,
    GET, P1, I32_WRAP_I64, SET, X1,
    GET, P0, I32_WRAP_I64, SET, X3,
    // bump the key
    GET, A, I32_CONST, ...sleb(W0 | 0), I32_ADD, SET, A,
    GET, B, I32_CONST, ...sleb(W1 | 0), I32_ADD, SET, B,
  ];
  const code = [
    BLOCK, VOID,
    LOOP, VOID,
    GET, N, I32_EQZ, BR_IF, 1,
    GET, CLO, SET, X0, GET, CHI, SET, X1, GET, C2, SET, X2, I32_CONST, 0, SET, X3,
    GET, K0, SET, A, GET, K1, SET, B,
    I32_CONST, 10, SET, R,
    LOOP, VOID,
    ...round,
    GET, R, I32_CONST, 1, I32_SUB, TEE, R, BR_IF, 0,
    END,
    ...store(X0, 0), ...store(X1, 4),
    GET, WORDS, I32_CONST, 4, I32_EQ,
    IF, VOID, ...store(X2, 8), ...store(X3, 12), END,
    GET, PTR, GET, WORDS, I32_CONST, 2, 0x74 /* i32.shl */, I32_ADD, SET, PTR,
    // 64-bit counter increment
    GET, CLO, I32_CONST, 1, I32_ADD, TEE, CLO, I32_EQZ,
    IF, VOID, GET, CHI, I32_CONST, 1, I32_ADD, SET, CHI, END,
    GET, N, I32_CONST, 1, I32_SUB, SET, N,
    BR, 0,
    END,
    END,
    END, // function
  ];
  const locals = [2, 8, I32, 2, I64];
  const fn = [...locals, ...code];
  return [...uleb(fn.length), ...fn];
}

function moduleBytes(): Uint8Array {
  const type = [1, 0x60, 7, I32, I32, I32, I32, I32, I32, I32, 0];
  const bytes = [
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    ...section(1, type),
    ...section(3, [1, 0]),
    ...section(5, [1, 0x00, 1]),
    ...section(7, [2, ...str("philox"), 0x00, 0, ...str("mem"), 0x02, 0]),
    ...section(10, [1, ...body()]),
  ];
  return new Uint8Array(bytes);
}

interface PhiloxWasm {
  philox: (k0: number, k1: number, cLo: number, cHi: number, c2: number, n: number, words: number) => void;
  /** View of the module's memory (one page). */
  out: Uint32Array;
}

let instance: PhiloxWasm | null | undefined;

/** The module, instantiated once per thread; null where WebAssembly is unavailable (callers then
 * use the JavaScript Philox). */
function philoxWasm(): PhiloxWasm | null {
  if (instance !== undefined) return instance;
  try {
    const inst = new WebAssembly.Instance(new WebAssembly.Module(moduleBytes()), {});
    const ex = inst.exports as unknown as { philox: PhiloxWasm["philox"]; mem: WebAssembly.Memory };
    instance = { philox: ex.philox, out: new Uint32Array(ex.mem.buffer) };
  } catch {
    instance = null;
  }
  return instance;
}

/**
 * Philox4x32-10 blocks for counters c, c+1, …, c+n−1 (c = `counter`, an integer < 2^53, split into
 * words c0 = low 32 bits and c1 = high bits; c2 = `c2`, c3 = 0) under key `key`: returns a view of
 * `words`·n uint32 (2 or 4 per block, x0 first) valid until the next call on this thread, or null when
 * WebAssembly is unavailable. @throws if n·words > {@link PHILOX_WASM_MAX_WORDS}.
 */
export function philoxBlocks(key: readonly [number, number], counter: number, c2: number, n: number, words: 2 | 4): Uint32Array | null {
  if (n * words > PHILOX_WASM_MAX_WORDS) throw new Error(`philoxBlocks: ${n} blocks × ${words} words exceed one call's ${PHILOX_WASM_MAX_WORDS}`);
  const w = philoxWasm();
  if (!w) return null;
  w.philox(key[0] | 0, key[1] | 0, counter | 0, Math.floor(counter / 4294967296) | 0, c2 | 0, n, words);
  return w.out;
}
