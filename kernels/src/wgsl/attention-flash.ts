/**
 * Fused causal attention in the FlashAttention-2 manner (Dao 2023, "FlashAttention-2: Faster
 * Attention with Better Parallelism and Work Partitioning"), f32, one kernel per direction (plus
 * the small Δ kernel of attention.ts before the backward). Same layouts, grouped-query mapping
 * (head h reads kv head ⌊h·Hkv/H⌋), lse and results as attention.ts and attention-tiled.ts, which
 * stay as fallbacks when no block configuration fits the device's workgroup memory.
 *
 * What differs from attention-tiled.ts is how the inner products are laid out for the hardware:
 * - every tile is staged row-major as vec4s along the head dim, each row padded by one vec4
 *   (stride ⌈D/4⌉+1), so a score S[r, j] = Σ q_r·k_j is a chain of vec4 FMAs and the rows a warp
 *   reads at once fall in different banks;
 * - each invocation owns rpt ∈ {2, 4} rows (r = rg + RG·i, RG = rows/rpt) × KC columns (j = cg + 8c)
 *   of the score tile and rpt rows × ⌈D/32⌉ vec4s (d4 = cg + 8t) of the output accumulator, all held in
 *   plain variables that the generator unrolls (no private arrays with dynamic indices, which
 *   drivers demote to local memory);
 * - P (and dS) go through workgroup memory transposed and packed so an invocation reads the
 *   coefficients of its rpt rows as one vec2/vec4 per column;
 * - exponentials are base 2 with log2(e) folded into the scale (`exp2`), lse is stored in natural
 *   log units as in the other kernels.
 *
 * Forward (workgroup per (b, h, query block of BQ rows), key blocks of BK ascending up to the
 * diagonal — blocks above it are never visited): S = Q·Kᵀ·scale, causal mask, online softmax
 * (running max m and per-invocation partial sums ℓ rescaled by α = 2^(m_old − m_new); the row
 * max is combined through workgroup memory each block, ℓ only once at the end), O = α·O + P·V.
 * Output O/ℓ, lse = (m + log2 ℓ)·ln 2.
 * Backward, deterministic without float atomics (Δ_i = dO_i·O_i first):
 *   dQ kernel, workgroup per (b, h, query block): P = 2^(S·scale·log2e − lse·log2e),
 *       dS = P ⊙ (dO·Vᵀ − Δ); dQ = scale · Σ_blocks dS·K.
 *   dK/dV kernel, workgroup per (b, kv head, key block): over the query heads of its group and the
 *       query blocks at or after the key block, dV += Pᵀ·dO, dK += scale · dSᵀ·Q.
 * No S×S matrix exists anywhere: P and dS live one BQ×BK tile at a time in workgroup memory.
 * Every sum runs in a fixed order, so results are bit-reproducible run to run.
 *
 * Scheduling (FlashBlock options, on in the default blocks): the next inner block's tiles are
 * prefetched into registers while the current one is computed (one barrier-separated load per
 * block otherwise left the SM waiting on global memory: 64-row blocks ran 1.9× faster than 32-row
 * blocks with the same per-invocation work), and workgroups with the most causal blocks start
 * first. Neither changes any result bit.
 * Every index is guarded in the WGSL (rows < S, dims < D, tile indices bounded by construction), so
 * these kernels may be compiled without naga's runtime checks (`trustedShaders:
 * ["attention_flash_"]`); on the H200 that is a further 1.2–1.25× (docs/performance.md).
 */
import type { Buf } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { entry, f32s, memoKernel, u32s } from "./launch.ts";
import { ATTENTION_FWD_BUFFERS, ATTENTION_INDEX, attentionBackwardBuffers, attentionDeltaLaunch } from "./attention.ts";

const NEG = "-3.0e38";
const LOG2E = Math.LOG2E;

/** Rows × columns of one kernel's score tile (rows are the output rows of the kernel: query rows
 * for the forward and dQ, key rows for dK/dV). */
export interface FlashBlock {
  rows: number;
  cols: number;
  /** Rows per invocation (2 or 4): the workgroup has 8·rows/rpt invocations. */
  rpt: 2 | 4;
  /** Register prefetch (software pipelining): the tiles of the next inner block (K/V for the
   * forward and dQ, Q/dO/lse/Δ for dK/dV) are loaded from global memory into registers while the
   * current block is computed, and stored to workgroup memory at the top of the next iteration,
   * so the load latency overlaps compute instead of stalling behind a barrier. Same arithmetic in
   * the same order: results are bit-identical with and without it. Costs ⌈cols·⌈D/4⌉/invocations⌉
   * vec4 registers per staged tile. Default false. */
  prefetch?: boolean;
  /** Longest workgroups first: workgroup ids walk the (batch, head) pairs fastest and the row
   * blocks from the one with the most causal inner blocks down (the last query block for the
   * forward and dQ, the first key block for dK/dV), so the short ones fill the tail of the grid
   * (longest-processing-time-first scheduling) instead of a long one starting last. Each workgroup
   * computes exactly what it did before: results are bit-identical. Default false. */
  heavyFirst?: boolean;
}

/** Label suffix of a block: `64x32r2`, then `p` when it prefetches and `h` when heavy blocks go first. */
export function flashBlockName(b: FlashBlock): string {
  return `${b.rows}x${b.cols}r${b.rpt}${b.prefetch ? "p" : ""}${b.heavyFirst ? "h" : ""}`;
}

/** Block configurations tried per kernel, in order of preference; the first that fits the
 * workgroup memory is used. Measured on the H200 at the benchmark shapes (docs/performance.md,
 * core/bench/attention-bench.ts): forward 64×32 with 2 rows per invocation (256 invocations), dQ
 * 64×16 r4, dK/dV 32×32 r2, all with register prefetch and heavy blocks first (1.37× forward and
 * 1.30× backward over the same blocks without them at mixtral-med's shape); the 4-rows-per-
 * invocation and smaller blocks follow for devices with less workgroup memory (lavapipe: 32 KiB).
 * {@link chooseFlashBlocks} turns prefetch off where it would take more registers than measured. */
export const FLASH_BLOCKS: Readonly<Record<"fwd" | "dq" | "dkv", readonly FlashBlock[]>> = (() => {
  const b = (rows: number, cols: number, rpt: 2 | 4): FlashBlock => ({ rows, cols, rpt, prefetch: true, heavyFirst: true });
  return {
    fwd: [b(64, 32, 2), b(64, 32, 4), b(32, 32, 4), b(32, 16, 4), b(16, 16, 4)],
    dq: [b(64, 16, 4), b(32, 32, 4), b(32, 16, 4), b(16, 16, 4)],
    dkv: [b(32, 32, 2), b(32, 32, 4), b(32, 16, 4), b(16, 16, 4)],
  };
})();

/** vec4s per head-dim row (⌈D/4⌉). */
function nd4(d: number): number {
  return Math.ceil(d / 4);
}

/** Workgroup-memory bytes of the flash kernels for head dim `d` and block `b`. A padded tile of
 * n rows takes n·(⌈D/4⌉+1) vec4s; P/dS tiles take cols·(rows/4+1) vec4s. */
export function flashTileBytes(d: number, b: FlashBlock): { fwd: number; dq: number; dkv: number } {
  const rs = 16 * (nd4(d) + 1);
  const pt = 4 * b.rpt * b.cols * (b.rows / b.rpt + 1);
  return {
    fwd: b.rows * rs + 2 * b.cols * rs + pt + b.rows * 8 * 4,
    dq: 2 * b.rows * rs + 2 * b.cols * rs + pt,
    dkv: 2 * b.rows * rs + 2 * b.cols * rs + 2 * pt + 2 * b.cols * 4,
  };
}

/** Invocations per workgroup of a flash kernel with block `b`: 8 column groups × rows/rpt row groups. */
function flashThreads(b: FlashBlock): number {
  return (8 * b.rows) / b.rpt;
}

/** vec4 registers per invocation that one prefetched tile of block `b` takes at head dim `d`
 * (⌈cols·⌈D/4⌉ / invocations⌉, {@link slotCount}; two tiles are prefetched per kernel). */
export function flashPrefetchSlots(d: number, b: FlashBlock): number {
  return slotCount(d, flashThreads(b), b.cols);
}

/** Most vec4 registers per prefetched tile that {@link chooseFlashBlocks} accepts: 4 is what the
 * measured defaults take at head dim 64 (2, 2 and 4 for the forward, dQ and dK/dV). Larger head
 * dims get smaller blocks with fewer invocations and would need up to 22 per tile, where the
 * register pressure is unmeasured; there the chosen block has prefetch off. */
export const FLASH_PREFETCH_MAX_SLOTS = 4;

/** The preferred block ({@link FLASH_BLOCKS}) of each flash kernel that fits `maxShared` bytes of
 * workgroup memory for head dim `d`, or null for a kernel when none does (the caller falls back to
 * attention-tiled.ts); its prefetch is turned off when a tile would take more than
 * {@link FLASH_PREFETCH_MAX_SLOTS} vec4 registers. */
export function chooseFlashBlocks(d: number, maxShared: number): { fwd: FlashBlock | null; dq: FlashBlock | null; dkv: FlashBlock | null } {
  const pick = (k: "fwd" | "dq" | "dkv"): FlashBlock | null => {
    const b = FLASH_BLOCKS[k].find((x) => flashTileBytes(d, x)[k] <= maxShared);
    if (!b) return null;
    return b.prefetch && flashPrefetchSlots(d, b) > FLASH_PREFETCH_MAX_SLOTS ? { ...b, prefetch: false } : b;
  };
  return { fwd: pick("fwd"), dq: pick("dq"), dkv: pick("dkv") };
}

/** Unrolled-code emitter. */
class Emit {
  readonly lines: string[] = [];
  e(s: string): void {
    this.lines.push(s);
  }
  toString(): string {
    return this.lines.join("\n");
  }
}

function header(D: number, b: FlashBlock): string {
  return `const DH: u32 = ${D}u;
const ND4: u32 = ${nd4(D)}u;
const RS: u32 = ${nd4(D) + 1}u; // padded row stride of the staged tiles, in vec4s
const BR: u32 = ${b.rows}u;
const BC: u32 = ${b.cols}u;
const RG: u32 = ${b.rows / b.rpt}u;
const PS: u32 = ${b.rows / b.rpt + 1}u; // row stride of the packed P / dS tiles, in vec${b.rpt}s
${ATTENTION_INDEX}`;
}

/** Stage `n` (a WGSL constant) rows of a [.., D] tensor into the padded vec4 tile `tile`; `rowOf(r)`
 * gives the global element offset of row r (a WGSL expression using `rr`, the staged row index)
 * and `ok` the validity of that row; rows past the tensor and dims past D are zeros. */
function stage(em: Emit, D: number, nt: number, n: string, tile: string, base: string, ok: string, buf: string, off: string, mul = ""): void {
  const exact = D % 4 === 0;
  em.e(`  for (var e = li; e < ${n} * ND4; e = e + ${nt}u) {`);
  em.e(`    let rr = e / ND4;`);
  em.e(`    let d4 = e % ND4;`);
  em.e(`    var x = vec4<f32>(0.0);`);
  em.e(`    if (${ok}) {`);
  em.e(`      let g = ${off} + ${base} + 4u * d4;`);
  if (exact) {
    em.e(`      x = vec4<f32>(${buf}[g], ${buf}[g + 1u], ${buf}[g + 2u], ${buf}[g + 3u])${mul};`);
  } else {
    for (let c = 0; c < 4; c++) em.e(`      if (4u * d4 + ${c}u < DH) { x[${c}] = ${buf}[g + ${c}u]${mul}; }`);
  }
  em.e(`    }`);
  em.e(`    ${tile}[rr * RS + d4] = x;`);
  em.e(`  }`);
}

/** Register slots of a prefetched tile of `n` rows: slot u holds staged vec4 e = li + u·NT (row
 * e / ND4, vec4 e % ND4), like {@link stage}. */
function slotCount(D: number, NT: number, n: number): number {
  return Math.ceil((n * nd4(D)) / NT);
}

/** Declare the per-invocation constants of a prefetched tile `reg` of `n` rows: `${reg}_r${u}` (row),
 * `${reg}_d${u}` (vec4 column) and the vec4 registers `${reg}${u}`. */
function declRegs(em: Emit, D: number, NT: number, n: number, reg: string): void {
  for (let u = 0; u < slotCount(D, NT, n); u++) {
    em.e(`  let ${reg}_r${u} = (li + ${u * NT}u) / ND4;\n  let ${reg}_d${u} = (li + ${u * NT}u) % ND4;\n  var ${reg}${u} = vec4<f32>(0.0);`);
  }
}

/** Emit global loads of the next tile into registers `${reg}${u}` (see {@link declRegs}); the
 * arguments are those of {@link stage}, with `rr` in `base` and `ok` the staged row. */
function loadRegs(em: Emit, D: number, NT: number, n: number, reg: string, base: string, ok: string, buf: string, off: string, mul = ""): void {
  const total = n * nd4(D);
  for (let u = 0; u < slotCount(D, NT, n); u++) {
    const inTile = (u + 1) * NT <= total ? "" : `li + ${u * NT}u < ${total}u && `;
    em.e(`    {`);
    em.e(`      let rr = ${reg}_r${u};`);
    em.e(`      let d4 = ${reg}_d${u};`);
    em.e(`      var x = vec4<f32>(0.0);`);
    em.e(`      if (${inTile}${ok}) {`);
    em.e(`        let g = ${off} + ${base} + 4u * d4;`);
    if (D % 4 === 0) em.e(`        x = vec4<f32>(${buf}[g], ${buf}[g + 1u], ${buf}[g + 2u], ${buf}[g + 3u])${mul};`);
    else for (let c = 0; c < 4; c++) em.e(`        if (4u * d4 + ${c}u < DH) { x[${c}] = ${buf}[g + ${c}u]${mul}; }`);
    em.e(`      }`);
    em.e(`      ${reg}${u} = x;`);
    em.e(`    }`);
  }
}

/** Emit the prefetch of the K and V rows kn… (kn: a WGSL value in scope) of kv head kh into
 * registers pk*, pv* (see {@link loadRegs}). */
function kvRegs(em: Emit, D: number, NT: number, n: number): void {
  loadRegs(em, D, NT, n, "pk", "kidx(b, kn + rr, kh)", "kn + rr < P.S", "b_k", "P.koff");
  loadRegs(em, D, NT, n, "pv", "kidx(b, kn + rr, kh)", "kn + rr < P.S", "b_v", "P.voff");
}

/** Emit the prefetch of the Q and dO rows qn… of query head hn (WGSL values in scope) into
 * registers pq*, po*, and of their lse (times log2 e) and Δ into pl, pd (invocations li < BC). */
function qoRegs(em: Emit, D: number, NT: number, n: number): void {
  loadRegs(em, D, NT, n, "pq", "qidx(b, qn + rr, hn)", "qn + rr < P.S", "b_q", "P.qoff");
  loadRegs(em, D, NT, n, "po", "qidx(b, qn + rr, hn)", "qn + rr < P.S", "b_do", "P.dooff");
  em.e(`    pl = 0.0;\n    pd = 0.0;`);
  em.e(`    if (li < BC && qn + li < P.S) { pl = b_lse[P.loff + ridx(b, hn, qn + li)] * ${LOG2E}; pd = b_delta[ridx(b, hn, qn + li)]; }`);
}

/** Emit the stores of registers `${reg}${u}` into the padded tile `tile`. */
function storeRegs(em: Emit, D: number, NT: number, n: number, reg: string, tile: string): void {
  const total = n * nd4(D);
  for (let u = 0; u < slotCount(D, NT, n); u++) {
    const st = `${tile}[${reg}_r${u} * RS + ${reg}_d${u}] = ${reg}${u};`;
    em.e((u + 1) * NT <= total ? `    ${st}` : `    if (li + ${u * NT}u < ${total}u) { ${st} }`);
  }
}

/** Emit the key loop of the forward and dQ kernels up to its staged K/V block: with
 * `blk.prefetch`, the registers pk*, pv* and the load of keys 0… into them before the loop, then at
 * the top of each iteration k0 (a barrier, the registers stored into Ks, Vs, a barrier, and the load
 * of keys k0 + BC… while this block is computed); without it, Ks and Vs staged straight from global
 * memory (see {@link stage}) between two barriers. Opens `for (k0 …) {`: the caller closes it.
 * The WGSL values b, kh, qlast must be in scope. */
function kvLoopHead(em: Emit, D: number, NT: number, blk: FlashBlock): void {
  if (blk.prefetch) {
    declRegs(em, D, NT, blk.cols, "pk");
    declRegs(em, D, NT, blk.cols, "pv");
    em.e(`  {\n    let kn = 0u;`);
    kvRegs(em, D, NT, blk.cols);
    em.e(`  }`);
  }
  em.e(`  for (var k0 = 0u; k0 <= qlast; k0 = k0 + BC) {`);
  em.e(`    workgroupBarrier();`);
  if (blk.prefetch) {
    storeRegs(em, D, NT, blk.cols, "pk", "Ks");
    storeRegs(em, D, NT, blk.cols, "pv", "Vs");
    em.e(`    workgroupBarrier();`);
    em.e(`    if (k0 + BC <= qlast) {\n    let kn = k0 + BC;`);
    kvRegs(em, D, NT, blk.cols);
    em.e(`    }`);
  } else {
    stage(em, D, NT, "BC", "Ks", "kidx(b, k0 + rr, kh)", "k0 + rr < P.S", "b_k", "P.koff");
    stage(em, D, NT, "BC", "Vs", "kidx(b, k0 + rr, kh)", "k0 + rr < P.S", "b_v", "P.voff");
    em.e(`    workgroupBarrier();`);
  }
}

/** Emit the d-loop accumulating dot products of the invocation's 4 rows (tile `rowTile`, rows
 * rg + RG·i) with its KC columns (tile `colTile`, rows cg + 8c) into scalars `${acc}_i_c`. */
function dots(em: Emit, R: number, KC: number, pairs: [string, string, string][]): void {
  em.e(`    for (var d4 = 0u; d4 < ND4; d4 = d4 + 1u) {`);
  for (const [, rowTile, colTile] of pairs) {
    for (let i = 0; i < R; i++) em.e(`      let ${rowTile}r${i} = ${rowTile}[(rg + ${i}u * RG) * RS + d4];`);
    for (let c = 0; c < KC; c++) em.e(`      let ${colTile}c${c} = ${colTile}[(cg + ${8 * c}u) * RS + d4];`);
  }
  for (const [acc, rowTile, colTile] of pairs) {
    for (let i = 0; i < R; i++) {
      for (let c = 0; c < KC; c++) {
        const a = `${rowTile}r${i}`;
        const b = `${colTile}c${c}`;
        const s = `${acc}_${i}_${c}`;
        em.e(`      ${s} = fma(${a}.w, ${b}.w, fma(${a}.z, ${b}.z, fma(${a}.y, ${b}.y, fma(${a}.x, ${b}.x, ${s}))));`);
      }
    }
  }
  em.e(`    }`);
}

/** Emit `for j < n: acc_i_t += coef[j][rows of the invocation]_i · tile[j][cg + 8t]` for each
 * (acc, coefTile, tile) triple; TD vec4s per row, guarded when ND4 is not a multiple of 8. */
function rowsTimesTile(em: Emit, R: number, n: string, TD: number, ND4: number, triples: [string, string, string][]): void {
  em.e(`    for (var j = 0u; j < ${n}; j = j + 1u) {`);
  for (const [, coef, tile] of triples) {
    em.e(`      let ${coef}v = ${coef}[j * PS + rg];`);
    for (let t = 0; t < TD; t++) {
      const guarded = 8 * t + 8 > ND4;
      em.e(`      let ${tile}t${t} = ${guarded ? `${tile}[j * RS + min(cg + ${8 * t}u, ND4 - 1u)]` : `${tile}[j * RS + cg + ${8 * t}u]`};`);
    }
  }
  for (const [acc, coef, tile] of triples) {
    for (let i = 0; i < R; i++) {
      for (let t = 0; t < TD; t++) em.e(`      ${acc}_${i}_${t} = fma(vec4<f32>(${coef}v[${i}]), ${tile}t${t}, ${acc}_${i}_${t});`);
    }
  }
  em.e(`    }`);
}

/** Emit the store of accumulators `${acc}_i_t` (times `mul`) to rows `rowExpr(i)` (element base
 * offsets `baseExpr(i)`), when `okExpr(i)`. */
function storeRows(em: Emit, R: number, D: number, TD: number, acc: string, buf: string, off: string, baseExpr: (i: number) => string, okExpr: (i: number) => string, mul: (i: number) => string): void {
  for (let i = 0; i < R; i++) {
    em.e(`  if (${okExpr(i)}) {`);
    em.e(`    let base = ${off} + ${baseExpr(i)};`);
    for (let t = 0; t < TD; t++) {
      em.e(`    if (cg + ${8 * t}u < ND4) {`);
      em.e(`      let val = ${acc}_${i}_${t}${mul(i)};`);
      em.e(`      let d = 4u * (cg + ${8 * t}u);`);
      for (let c = 0; c < 4; c++) {
        if (D % 4 === 0) em.e(`      ${buf}[base + d + ${c}u] = val[${c}];`);
        else em.e(`      if (d + ${c}u < DH) { ${buf}[base + d + ${c}u] = val[${c}]; }`);
      }
      em.e(`    }`);
    }
    em.e(`  }`);
  }
}

function declAcc(em: Emit, name: string, a: number, b: number, type: "f32" | "vec4<f32>"): void {
  const zero = type === "f32" ? "0.0" : "vec4<f32>(0.0)";
  for (let i = 0; i < a; i++) for (let c = 0; c < b; c++) em.e(`  var ${name}_${i}_${c}: ${type} = ${zero};`);
}

function resetAcc(em: Emit, name: string, a: number, b: number): void {
  for (let i = 0; i < a; i++) for (let c = 0; c < b; c++) em.e(`    ${name}_${i}_${c} = 0.0;`);
}

/** Launch of the fused forward with block `blk` (from {@link chooseFlashBlocks}). */
export function attentionFlashLaunch(q: Buf, qoff: number, k: Buf, koff: number, v: Buf, voff: number, out: Buf, ooff: number, lse: Buf, loff: number, Bt: number, S: number, H: number, Hkv: number, D: number, scale: number, blk: FlashBlock): Launch | null {
  if (Bt * S * H === 0 || D === 0) return null;
  const nqb = Math.ceil(S / blk.rows);
  const R = blk.rpt;
  const NT = flashThreads(blk);
  const KC = blk.cols / 8;
  const TD = Math.ceil(nd4(D) / 8);
  const label = `attention_flash_fwd_d${D}_${flashBlockName(blk)}`;
  const kernel: Kernel = memoKernel(label, () => {
    const em = new Emit();
    em.e(`${header(D, blk)}
var<workgroup> Qs: array<vec4<f32>, ${blk.rows * (nd4(D) + 1)}>;
var<workgroup> Ks: array<vec4<f32>, ${blk.cols * (nd4(D) + 1)}>;
var<workgroup> Vs: array<vec4<f32>, ${blk.cols * (nd4(D) + 1)}>;
var<workgroup> Pt: array<vec${R}<f32>, ${blk.cols * (blk.rows / R + 1)}>;
var<workgroup> red: array<vec4<f32>, ${blk.rows * 2}>;
${entry(NT)} {
  let id = wg_lin(wg, nwg);
  if (id >= P.B * P.H * P.nqb) { return; }
${blk.heavyFirst ? `  let qb = P.nqb - 1u - id / (P.B * P.H);
  let h = id % P.H;
  let b = (id / P.H) % P.B;` : `  let qb = id % P.nqb;
  let h = (id / P.nqb) % P.H;
  let b = id / (P.nqb * P.H);`}
  let kh = (h * P.Hkv) / P.H;
  let q0 = qb * BR;
  let rg = li / 8u;
  let cg = li % 8u;`);
    stage(em, D, NT, "BR", "Qs", "qidx(b, q0 + rr, h)", "q0 + rr < P.S", "b_q", "P.qoff", " * P.c2");
    for (let i = 0; i < R; i++) em.e(`  var m${i}: f32 = ${NEG};\n  var l${i}: f32 = 0.0;\n  let qi${i} = q0 + rg + ${i}u * RG;`);
    declAcc(em, "o", R, TD, "vec4<f32>");
    declAcc(em, "s", R, KC, "f32");
    em.e(`  let qlast = min(q0 + BR, P.S) - 1u;`);
    kvLoopHead(em, D, NT, blk);
    resetAcc(em, "s", R, KC);
    dots(em, R, KC, [["s", "Qs", "Ks"]]);
    // causal mask (keys past S are past every valid row too), partial row max
    for (let i = 0; i < R; i++) {
      for (let c = 0; c < KC; c++) em.e(`    if (k0 + cg + ${8 * c}u > qi${i}) { s_${i}_${c} = ${NEG}; }`);
      const mx = Array.from({ length: KC }, (_, c) => `s_${i}_${c}`).reduce((a, x) => `max(${a}, ${x})`);
      em.e(`    red[(rg + ${i}u * RG) * 2u + cg / 4u][cg % 4u] = ${mx};`);
    }
    em.e(`    workgroupBarrier();`);
    for (let i = 0; i < R; i++) {
      em.e(`    {
      let ra = red[(rg + ${i}u * RG) * 2u];
      let rb = red[(rg + ${i}u * RG) * 2u + 1u];
      let mx = max(m${i}, max(max(max(ra.x, ra.y), max(ra.z, ra.w)), max(max(rb.x, rb.y), max(rb.z, rb.w))));
      let alpha = exp2(m${i} - mx);
      m${i} = mx;`);
      for (let c = 0; c < KC; c++) em.e(`      s_${i}_${c} = exp2(s_${i}_${c} - mx);`);
      em.e(`      l${i} = l${i} * alpha + ${Array.from({ length: KC }, (_, c) => `s_${i}_${c}`).join(" + ")};`);
      for (let t = 0; t < TD; t++) em.e(`      o_${i}_${t} = o_${i}_${t} * alpha;`);
      em.e(`    }`);
    }
    for (let c = 0; c < KC; c++) em.e(`    Pt[(cg + ${8 * c}u) * PS + rg] = vec${R}<f32>(${Array.from({ length: R }, (_, i) => `s_${i}_${c}`).join(", ")});`);
    em.e(`    workgroupBarrier();`);
    rowsTimesTile(em, R, "BC", TD, nd4(D), [["o", "Pt", "Vs"]]);
    em.e(`  }`);
    // combine the partial sums ℓ of the row's 8 invocations (fixed order)
    em.e(`  workgroupBarrier();`);
    for (let i = 0; i < R; i++) em.e(`  red[(rg + ${i}u * RG) * 2u + cg / 4u][cg % 4u] = l${i};`);
    em.e(`  workgroupBarrier();`);
    for (let i = 0; i < R; i++) {
      em.e(`  let ra${i} = red[(rg + ${i}u * RG) * 2u];\n  let rb${i} = red[(rg + ${i}u * RG) * 2u + 1u];`);
      em.e(`  let L${i} = ((ra${i}.x + ra${i}.y) + (ra${i}.z + ra${i}.w)) + ((rb${i}.x + rb${i}.y) + (rb${i}.z + rb${i}.w));`);
    }
    storeRows(em, R, D, TD, "o", "b_out", "P.ooff", (i) => `qidx(b, qi${i}, h)`, (i) => `qi${i} < P.S`, (i) => ` / L${i}`);
    for (let i = 0; i < R; i++) em.e(`  if (cg == 0u && qi${i} < P.S) { b_lse[P.loff + ridx(b, h, qi${i})] = (m${i} + log2(L${i})) * ${Math.LN2}; }`);
    em.e(`}`);
    return {
      label,
      buffers: ATTENTION_FWD_BUFFERS,
      params: [...u32s("B", "S", "H", "Hkv", "qoff", "koff", "voff", "ooff", "loff", "nqb"), ...f32s("c2")],
      code: em.toString(),
    };
  });
  return { kernel, bufs: [q, k, v, out, lse], params: [Bt, S, H, Hkv, qoff, koff, voff, ooff, loff, nqb, scale * LOG2E], workgroups: Bt * H * nqb };
}

/** Launches of the fused backward: the Δ kernel of attention.ts (into the scratch `delta`, ≥ B·H·S
 * f32 from element 0), then the dQ kernel (block `dqBlk`) and the dK/dV kernel (block `dkvBlk`,
 * rows = keys, cols = queries), from {@link chooseFlashBlocks}. dq, dk, dv are overwritten. */
export function attentionFlashBackwardLaunches(
  q: Buf, qoff: number, k: Buf, koff: number, v: Buf, voff: number, out: Buf, ooff: number, lse: Buf, loff: number,
  dout: Buf, dooff: number, dq: Buf, dqoff: number, dk: Buf, dkoff: number, dv: Buf, dvoff: number, delta: Buf,
  Bt: number, S: number, H: number, Hkv: number, D: number, scale: number, dqBlk: FlashBlock, dkvBlk: FlashBlock,
): Launch[] {
  if (Bt * S * H === 0 || D === 0) return [];
  const TD = Math.ceil(nd4(D) / 8);
  const c2 = scale * LOG2E;

  // ---- dQ: rows = queries, cols = keys
  const nqb = Math.ceil(S / dqBlk.rows);
  const dqLabel = `attention_flash_dq_d${D}_${flashBlockName(dqBlk)}`;
  const dqK: Kernel = memoKernel(dqLabel, () => {
    const blk = dqBlk;
    const R = blk.rpt;
    const NT = flashThreads(blk);
    const KC = blk.cols / 8;
    const em = new Emit();
    em.e(`${header(D, blk)}
var<workgroup> Qs: array<vec4<f32>, ${blk.rows * (nd4(D) + 1)}>;
var<workgroup> Os: array<vec4<f32>, ${blk.rows * (nd4(D) + 1)}>;
var<workgroup> Ks: array<vec4<f32>, ${blk.cols * (nd4(D) + 1)}>;
var<workgroup> Vs: array<vec4<f32>, ${blk.cols * (nd4(D) + 1)}>;
var<workgroup> Dt: array<vec${R}<f32>, ${blk.cols * (blk.rows / R + 1)}>;
${entry(NT)} {
  let id = wg_lin(wg, nwg);
  if (id >= P.B * P.H * P.nb) { return; }
${blk.heavyFirst ? `  let qb = P.nb - 1u - id / (P.B * P.H);
  let h = id % P.H;
  let b = (id / P.H) % P.B;` : `  let qb = id % P.nb;
  let h = (id / P.nb) % P.H;
  let b = id / (P.nb * P.H);`}
  let kh = (h * P.Hkv) / P.H;
  let q0 = qb * BR;
  let rg = li / 8u;
  let cg = li % 8u;`);
    stage(em, D, NT, "BR", "Qs", "qidx(b, q0 + rr, h)", "q0 + rr < P.S", "b_q", "P.qoff");
    stage(em, D, NT, "BR", "Os", "qidx(b, q0 + rr, h)", "q0 + rr < P.S", "b_do", "P.dooff");
    for (let i = 0; i < R; i++) {
      em.e(`  let qi${i} = q0 + rg + ${i}u * RG;\n  var L${i}: f32 = 0.0;\n  var Dl${i}: f32 = 0.0;`);
      em.e(`  if (qi${i} < P.S) { L${i} = b_lse[P.loff + ridx(b, h, qi${i})] * ${LOG2E}; Dl${i} = b_delta[ridx(b, h, qi${i})]; }`);
    }
    declAcc(em, "a", R, TD, "vec4<f32>");
    declAcc(em, "s", R, KC, "f32");
    declAcc(em, "p", R, KC, "f32");
    em.e(`  let qlast = min(q0 + BR, P.S) - 1u;`);
    kvLoopHead(em, D, NT, blk);
    resetAcc(em, "s", R, KC);
    resetAcc(em, "p", R, KC);
    dots(em, R, KC, [["s", "Qs", "Ks"], ["p", "Os", "Vs"]]);
    for (let c = 0; c < KC; c++) {
      const ds: string[] = [];
      for (let i = 0; i < R; i++) {
        em.e(`    var ds${i}_${c}: f32 = 0.0;`);
        em.e(`    if (k0 + cg + ${8 * c}u <= qi${i} && qi${i} < P.S) { ds${i}_${c} = exp2(s_${i}_${c} * P.c2 - L${i}) * (p_${i}_${c} - Dl${i}); }`);
        ds.push(`ds${i}_${c}`);
      }
      em.e(`    Dt[(cg + ${8 * c}u) * PS + rg] = vec${R}<f32>(${ds.join(", ")});`);
    }
    em.e(`    workgroupBarrier();`);
    rowsTimesTile(em, R, "BC", TD, nd4(D), [["a", "Dt", "Ks"]]);
    em.e(`  }`);
    storeRows(em, R, D, TD, "a", "b_dq", "P.dqoff", (i) => `qidx(b, qi${i}, h)`, (i) => `qi${i} < P.S`, () => ` * P.scale`);
    em.e(`}`);
    return {
      label: dqLabel,
      buffers: attentionBackwardBuffers("b_dq"),
      params: [...u32s("B", "S", "H", "Hkv", "qoff", "koff", "voff", "loff", "dooff", "dqoff", "nb"), ...f32s("scale", "c2")],
      code: em.toString(),
    };
  });

  // ---- dK/dV: rows = keys, cols = queries
  const nkb = Math.ceil(S / dkvBlk.rows);
  const dkvLabel = `attention_flash_dkv_d${D}_${flashBlockName(dkvBlk)}`;
  const dkvK: Kernel = memoKernel(dkvLabel, () => {
    const blk = dkvBlk;
    const R = blk.rpt;
    const NT = flashThreads(blk);
    const KC = blk.cols / 8;
    const em = new Emit();
    em.e(`${header(D, blk)}
var<workgroup> Ks: array<vec4<f32>, ${blk.rows * (nd4(D) + 1)}>;
var<workgroup> Vs: array<vec4<f32>, ${blk.rows * (nd4(D) + 1)}>;
var<workgroup> Qs: array<vec4<f32>, ${blk.cols * (nd4(D) + 1)}>;
var<workgroup> Os: array<vec4<f32>, ${blk.cols * (nd4(D) + 1)}>;
var<workgroup> Pt: array<vec${R}<f32>, ${blk.cols * (blk.rows / R + 1)}>;
var<workgroup> Dt: array<vec${R}<f32>, ${blk.cols * (blk.rows / R + 1)}>;
var<workgroup> Ls: array<f32, ${blk.cols}>;
var<workgroup> Dl: array<f32, ${blk.cols}>;
${entry(NT)} {
  let id = wg_lin(wg, nwg);
  if (id >= P.B * P.Hkv * P.nb) { return; }
${blk.heavyFirst ? `  let kb = id / (P.B * P.Hkv);
  let kh = id % P.Hkv;
  let b = (id / P.Hkv) % P.B;` : `  let kb = id % P.nb;
  let kh = (id / P.nb) % P.Hkv;
  let b = id / (P.nb * P.Hkv);`}
  let k0 = kb * BR;
  let rg = li / 8u;
  let cg = li % 8u;`);
    stage(em, D, NT, "BR", "Ks", "kidx(b, k0 + rr, kh)", "k0 + rr < P.S", "b_k", "P.koff");
    stage(em, D, NT, "BR", "Vs", "kidx(b, k0 + rr, kh)", "k0 + rr < P.S", "b_v", "P.voff");
    for (let i = 0; i < R; i++) em.e(`  let kj${i} = k0 + rg + ${i}u * RG;`);
    declAcc(em, "ak", R, TD, "vec4<f32>");
    declAcc(em, "av", R, TD, "vec4<f32>");
    declAcc(em, "s", R, KC, "f32");
    declAcc(em, "p", R, KC, "f32");
    if (blk.prefetch) {
      // one flat loop over (query head of the group, query block) in the order of the nested
      // loops below, so that the next iteration's tiles can be loaded ahead
      em.e(`  let h0 = (kh * P.H + P.Hkv - 1u) / P.Hkv;
  let h1 = ((kh + 1u) * P.H + P.Hkv - 1u) / P.Hkv;
  let qs0 = (k0 / BC) * BC;
  let nq = (P.S - qs0 + BC - 1u) / BC;
  let nt = (h1 - h0) * nq;
  var hn = h0;
  var qn = qs0;
  var pl: f32 = 0.0;
  var pd: f32 = 0.0;`);
      declRegs(em, D, NT, blk.cols, "pq");
      declRegs(em, D, NT, blk.cols, "po");
      em.e(`  {`);
      qoRegs(em, D, NT, blk.cols);
      em.e(`  }`);
      em.e(`  for (var t = 0u; t < nt; t = t + 1u) {`);
      em.e(`    let h = hn;\n    let q0 = qn;`);
      em.e(`    {`);
      em.e(`    workgroupBarrier();`);
      storeRegs(em, D, NT, blk.cols, "pq", "Qs");
      storeRegs(em, D, NT, blk.cols, "po", "Os");
      em.e(`    if (li < BC) { Ls[li] = pl; Dl[li] = pd; }`);
      em.e(`    workgroupBarrier();`);
      em.e(`    qn = qn + BC;\n    if (qn >= P.S) { qn = qs0; hn = hn + 1u; }`);
      em.e(`    if (t + 1u < nt) {`);
      qoRegs(em, D, NT, blk.cols);
      em.e(`    }`);
    } else {
      em.e(`  for (var h = 0u; h < P.H; h = h + 1u) {`);
      em.e(`    if ((h * P.Hkv) / P.H != kh) { continue; }`);
      em.e(`    for (var q0 = (k0 / BC) * BC; q0 < P.S; q0 = q0 + BC) {`);
      em.e(`    workgroupBarrier();`);
      stage(em, D, NT, "BC", "Qs", "qidx(b, q0 + rr, h)", "q0 + rr < P.S", "b_q", "P.qoff");
      stage(em, D, NT, "BC", "Os", "qidx(b, q0 + rr, h)", "q0 + rr < P.S", "b_do", "P.dooff");
      em.e(`    if (li < BC) {
      var lv: f32 = 0.0;
      var dv: f32 = 0.0;
      if (q0 + li < P.S) { lv = b_lse[P.loff + ridx(b, h, q0 + li)] * ${LOG2E}; dv = b_delta[ridx(b, h, q0 + li)]; }
      Ls[li] = lv;
      Dl[li] = dv;
    }`);
      em.e(`    workgroupBarrier();`);
    }
    resetAcc(em, "s", R, KC);
    resetAcc(em, "p", R, KC);
    dots(em, R, KC, [["s", "Ks", "Qs"], ["p", "Vs", "Os"]]);
    for (let c = 0; c < KC; c++) {
      em.e(`    {
      let qr = q0 + cg + ${8 * c}u;
      let lq = Ls[cg + ${8 * c}u];
      let dq = Dl[cg + ${8 * c}u];`);
      const ps: string[] = [];
      const ds: string[] = [];
      for (let i = 0; i < R; i++) {
        em.e(`      var p${i}: f32 = 0.0;`);
        em.e(`      if (kj${i} <= qr && qr < P.S) { p${i} = exp2(s_${i}_${c} * P.c2 - lq); }`);
        ps.push(`p${i}`);
        ds.push(`p${i} * (p_${i}_${c} - dq)`);
      }
      em.e(`      Pt[(cg + ${8 * c}u) * PS + rg] = vec${R}<f32>(${ps.join(", ")});`);
      em.e(`      Dt[(cg + ${8 * c}u) * PS + rg] = vec${R}<f32>(${ds.join(", ")});`);
      em.e(`    }`);
    }
    em.e(`    workgroupBarrier();`);
    rowsTimesTile(em, R, "BC", TD, nd4(D), [["av", "Pt", "Os"], ["ak", "Dt", "Qs"]]);
    em.e(`    }`);
    em.e(`  }`);
    storeRows(em, R, D, TD, "ak", "b_dk", "P.dkoff", (i) => `kidx(b, kj${i}, kh)`, (i) => `kj${i} < P.S`, () => ` * P.scale`);
    storeRows(em, R, D, TD, "av", "b_dv", "P.dvoff", (i) => `kidx(b, kj${i}, kh)`, (i) => `kj${i} < P.S`, () => "");
    em.e(`}`);
    return {
      label: dkvLabel,
      buffers: attentionBackwardBuffers("b_dk", "b_dv"),
      params: [...u32s("B", "S", "H", "Hkv", "qoff", "koff", "voff", "loff", "dooff", "dkoff", "dvoff", "nb"), ...f32s("scale", "c2")],
      code: em.toString(),
    };
  });
  return [
    attentionDeltaLaunch(out, ooff, dout, dooff, delta, Bt, S, H, D),
    { kernel: dqK, bufs: [q, k, v, lse, dout, delta, dq], params: [Bt, S, H, Hkv, qoff, koff, voff, loff, dooff, dqoff, nqb, scale, c2], workgroups: Bt * H * nqb },
    { kernel: dkvK, bufs: [q, k, v, lse, dout, delta, dk, dv], params: [Bt, S, H, Hkv, qoff, koff, voff, loff, dooff, dkoff, dvoff, nkb, scale, c2], workgroups: Bt * Hkv * nkb },
  ];
}
