/**
 * WGSL source generator for the register-blocked, vectorised matmul
 * (`out[b] = op(A[b]) · op(B[b])`, see `MatmulSpec` in ../backend.ts).
 *
 * Algorithm (the classic SGEMM blocking, as in Volkov & Demmel, "Benchmarking GPUs to tune dense
 * linear algebra", SC'08, and the CUTLASS "efficient GEMM" notes):
 * - one workgroup computes a BM×BN block of `out`, walking K in steps of BK;
 * - every step, the BM×BK slice of op(A) and the BK×BN slice of op(B) are staged in workgroup
 *   memory, op(A) stored k-major (transposed) so both operands are read as vec4 along M and N;
 * - each thread owns a TM×TN micro-tile held in registers (TM·TN/4 vec4 accumulators), split into
 *   4-wide chunks spaced TY·4 rows / TX·4 columns apart, so the vec4 reads of a warp hit distinct,
 *   consecutive workgroup-memory words (no bank conflicts) and global stores are coalesced;
 * - workgroup memory is double-buffered: the next K-slice is fetched from global memory into
 *   registers while the current one is consumed, then written to the other buffer, with a single
 *   barrier per step — either all loads before the step's FMAs and all stores after them, or
 *   (`prefetchDistance` > 0) each load/store pair spread over the step's k-iterations, which keeps
 *   fewer prefetch registers live and the unrolled code free of branches;
 * - optionally (`unroll2`) the K loop is unrolled by two so the buffer index is a constant;
 * - the inner loops are fully unrolled here, in the generator, so the accumulators are plain
 *   variables (no private arrays with dynamic indices for the driver compiler to demote).
 *
 * Edge tiles (M, N, K not multiples of the tile) are handled by bounds guards: loads outside the
 * matrix read 0, stores outside are skipped. Variants without guards are generated when the shape
 * divides the tile exactly. Global loads are vec4 when the operand's contiguous dimension, its
 * element offset and its batch stride are all multiples of 4; otherwise four guarded scalar loads.
 *
 * Storage: `f32` reads A and B as f32; `f16` reads A and B as IEEE binary16 (either natively with
 * the `shader-f16` feature, `enable f16;`, or packed two per u32 and widened by the core builtin
 * `unpack2x16float`). Accumulation is always f32; `out` is always f32.
 *
 * Bindings, "standalone" mode (group 0): 0 = `b_a` (storage, read), 1 = `b_b` (storage, read),
 * 2 = `b_out` (storage, read_write), 3 = `P` (uniform, {@link MATMUL_PARAM_WORDS} u32 words, layout
 * in {@link matmulParamWords}). "kernel" mode leaves the declarations to the backend's assembler
 * (see {@link MatmulBindingMode}).
 *
 * Measured behaviour on an NVIDIA H200 (Vulkan) is in docs/performance.md.
 */

/** A tile configuration: BM×BN block per workgroup, BK deep K-slices, TM×TN outputs per thread. */
export interface MatmulTile {
  /** Block rows of `out` per workgroup (a multiple of TM). */
  BM: number;
  /** Block columns of `out` per workgroup. */
  BN: number;
  /** K-slice depth staged in workgroup memory per step (multiple of 4). */
  BK: number;
  /** Micro-tile rows per thread (multiple of 4). */
  TM: number;
  /** Micro-tile columns per thread (multiple of 4). */
  TN: number;
  /** Extra f32 words of padding per k-row of the staged A slice (multiple of 4; 0 = none). */
  padA: number;
  /** Extra f32 words of padding per k-row of the staged B slice (multiple of 4; 0 = none). */
  padB: number;
}

/** Storage type of A and B. */
export type MatmulStorage = "f32" | "f16";

/** Everything that changes the generated WGSL (one pipeline per distinct variant). */
export interface MatmulVariant {
  tile: MatmulTile;
  /** Storage type of A and B (out is always f32). */
  storage: MatmulStorage;
  /** f16 storage read with `enable f16;` (requires the `shader-f16` feature) instead of u32 unpacking. */
  f16Native: boolean;
  transA: boolean;
  transB: boolean;
  /** vec4 global loads of A are legal (contiguous dim, offset and batch stride all multiples of 4). */
  vecA: boolean;
  /** vec4 global loads of B are legal. */
  vecB: boolean;
  /** vec4 stores of out are legal (N, offset and batch stride multiples of 4). */
  vecC: boolean;
  /** Bounds guards are emitted (false only when M % BM == 0, N % BN == 0 and K % BK == 0). */
  edges: boolean;
  /** Unroll the K loop by two so the staging-buffer index is a constant (bigger shader). */
  unroll2: boolean;
  /** 0: the next K-slice is loaded before the compute of a step and staged after it. d > 0: each
   * staged vec4 is loaded before one k-step and stored d k-steps later, spread over the step
   * (fewer live prefetch registers, no branches inside the unrolled loop). */
  prefetchDistance: number;
  /** Tile rasterisation: consecutive workgroups sweep groups of `groupM` block-rows column by
   * column (1 = plain row-major order), for L2 reuse of B. */
  groupM: number;
  /** Grouped products over variable-length row segments (absent: the dense matmul); see
   * {@link MatmulGroupedMode}. */
  grouped?: MatmulGroupedMode;
}

/**
 * The grouped modes (MoE experts: G groups of rows given by G + 1 row offsets in a device i32
 * buffer `b_off`, read from element `P.offOff`, each clamped to [0, P.R] and made non-decreasing;
 * kernels/src/wgsl/grouped-matmul.ts). Same blocking and K-loop schedule as the dense kernel; only
 * the mapping of a workgroup to its operands differs. "kernel" binding mode, f32, edge guards on.
 * - "rows" (forward / dX, `Backend.groupedMatmulDev`): out[r0:r1] (+)= A[r0:r1]·op(B_g). A is R×K
 *   (not transA, row stride `ldk`), B_g starts at offB + g·strideB (K×N, or N×K with transB), out
 *   is R×N. The grid's `tilesM` row-tile slots (⌈R/BM⌉ + G of them) are dealt to the groups in
 *   order, ⌈n_g/BM⌉ each (n_g = the group's rows): a slot finds its group g and rows [r0, r1),
 *   r1 − r0 ≤ BM, by scanning the offsets and is then a dense tile with M = r1 − r0. Slots past
 *   the last group return before any barrier; rows outside [off[0], off[G]) are never touched.
 * - "wgrad" (weight gradient, `Backend.groupedWeightGrad`): out_g[M,N] (+)= A[rows_g]ᵀ·B[rows_g],
 *   batch index = g (batch = G, out batch stride strideC), transA: A is R×M (dy), B is R×N (x), the
 *   K loop runs over the group's rows [s0, s1). An empty group computes zeros (written, or added
 *   to out when accumulating: out unchanged).
 * The offsets are loaded from a read-only storage buffer, so the slot's group, its rows and the K
 * loop bound are uniform values (WGSL uniformity analysis: read-only storage loads are uniform)
 * and the early return and the barriers stay in uniform control flow.
 */
export type MatmulGroupedMode = "rows" | "wgrad";

/** Number of u32 words in the params uniform. */
export const MATMUL_PARAM_WORDS = 16;

/** Threads per workgroup of a tile: (BM/TM)·(BN/TN). */
export function tileThreads(t: MatmulTile): number {
  return (t.BM / t.TM) * (t.BN / t.TN);
}

/** Bytes of workgroup memory a tile needs (two buffers of each staged slice). */
export function tileWorkgroupBytes(t: MatmulTile): number {
  return 2 * t.BK * ((t.BM + t.padA) + (t.BN + t.padB)) * 4;
}

/**
 * Checks a tile's internal consistency. Throws an Error naming the offending field.
 * Requirements: TM, TN, BK, padA, padB multiples of 4; BM % TM == 0, BN % TN == 0; every thread
 * loads a whole number (≥ 1) of vec4s of each slice in either orientation.
 */
export function validateTile(t: MatmulTile): void {
  const where = `matmul tile ${tileKey(t)}`;
  for (const [name, v] of [["TM", t.TM], ["TN", t.TN], ["BK", t.BK], ["padA", t.padA], ["padB", t.padB]] as const) {
    if (!Number.isInteger(v) || v < 0 || v % 4 !== 0) throw new Error(`${where}: ${name} must be a non-negative multiple of 4, got ${v}`);
  }
  if (t.TM === 0 || t.TN === 0 || t.BK === 0) throw new Error(`${where}: TM, TN and BK must be positive`);
  if (t.BM % t.TM !== 0) throw new Error(`${where}: BM (${t.BM}) must be a multiple of TM (${t.TM})`);
  if (t.BN % t.TN !== 0) throw new Error(`${where}: BN (${t.BN}) must be a multiple of TN (${t.TN})`);
  const wg = tileThreads(t);
  if ((t.BM * t.BK) % (4 * wg) !== 0) throw new Error(`${where}: BM·BK (${t.BM * t.BK}) must be a multiple of 4·threads (${4 * wg})`);
  if ((t.BN * t.BK) % (4 * wg) !== 0) throw new Error(`${where}: BN·BK (${t.BN * t.BK}) must be a multiple of 4·threads (${4 * wg})`);
  if (wg > 1024) throw new Error(`${where}: ${wg} threads per workgroup exceeds 1024`);
}

/** Short stable string naming a tile, e.g. "128x128x8_8x8_p0_0". */
export function tileKey(t: MatmulTile): string {
  return `${t.BM}x${t.BN}x${t.BK}_${t.TM}x${t.TN}_p${t.padA}_${t.padB}`;
}

/** Stable string naming a variant (the pipeline cache key). */
export function variantKey(v: MatmulVariant): string {
  const flags = [
    v.storage, v.storage === "f16" ? (v.f16Native ? "nat" : "pk") : "",
    v.transA ? "tA" : "nA", v.transB ? "tB" : "nB",
    v.vecA ? "vA" : "sA", v.vecB ? "vB" : "sB", v.vecC ? "vC" : "sC",
    v.edges ? "e" : "x", `g${v.groupM}`, v.unroll2 ? "u2" : "", v.prefetchDistance ? `d${v.prefetchDistance}` : "",
  ];
  return `mmf_${tileKey(v.tile)}_${flags.join("")}${v.grouped ? `_grp${v.grouped}` : ""}`;
}

/**
 * Layout of the params uniform, as u32 words:
 * 0 M, 1 N, 2 K, 3 batch, 4 offA, 5 offB, 6 offC (element offsets), 7 strideA, 8 strideB,
 * 9 strideC (element strides between batch matrices; 0 broadcasts), 10 tilesM, 11 tilesN,
 * 12 gridX (workgroups along x of the dispatch), 13 accumulate (0 or 1), 14 ldk (row stride, in
 * elements, of the operands whose rows run along K: A when not transA, B when transB; K unless a
 * split-K chunk reads part of longer rows), 15 unused.
 */
export function matmulParamWords(p: {
  M: number; N: number; K: number; batch: number; offA: number; offB: number; offC: number;
  strideA: number; strideB: number; strideC: number; tilesM: number; tilesN: number; gridX: number; accumulate: boolean; ldk: number;
}): Uint32Array {
  const w = new Uint32Array(MATMUL_PARAM_WORDS);
  const vals = [p.M, p.N, p.K, p.batch, p.offA, p.offB, p.offC, p.strideA, p.strideB, p.strideC, p.tilesM, p.tilesN, p.gridX, p.accumulate ? 1 : 0, p.ldk];
  vals.forEach((x, i) => {
    if (!Number.isInteger(x) || x < 0 || x > 0xffffffff) throw new Error(`matmul params: word ${i} must be a u32, got ${x}`);
    w[i] = x;
  });
  return w;
}

/**
 * How the shader gets its buffers and params:
 * - "standalone": it declares them itself (bindings 0–3 of group 0, see the file comment);
 * - "kernel": it declares nothing and follows the backend's {@link Kernel} convention
 *   (webgpu/kernel.ts): buffers `b_a`, `b_b`, `b_out` and a uniform `P` with the u32 fields
 *   {@link MATMUL_PARAM_NAMES}, declared by the backend's assembler; those bindings are scalar
 *   arrays (`array<f32>`, 16-bit as packed `array<u32>`), so vec4 access and native f16 are refused.
 */
export type MatmulBindingMode = "standalone" | "kernel";

/** Names of the params (u32 each, in uniform order) — the first 15 words of {@link matmulParamWords}. */
export const MATMUL_PARAM_NAMES = ["M", "N", "K", "batch", "offA", "offB", "offC", "strideA", "strideB", "strideC", "tilesM", "tilesN", "gridX", "accumulate", "ldk"] as const;

/** Params of a grouped variant ({@link MatmulGroupedMode}): {@link MATMUL_PARAM_NAMES}, then G
 * (groups), R (rows: offsets are clamped to it) and offOff (element offset of the G + 1 offsets in
 * `b_off`). */
export const GROUPED_MATMUL_PARAM_NAMES = [...MATMUL_PARAM_NAMES, "G", "R", "offOff"] as const;

/** Generates the WGSL compute shader for one variant. Throws if the tile is inconsistent, or in
 * "kernel" mode when the variant asks for vec4 access or native f16. */
export function matmulFastWGSL(v: MatmulVariant, mode: MatmulBindingMode = "standalone"): string {
  const t = v.tile;
  validateTile(t);
  if (mode === "kernel" && (v.vecA || v.vecB || v.vecC || v.f16Native)) {
    throw new Error(`matmul ${variantKey(v)}: "kernel" binding mode has scalar bindings only (vecA/vecB/vecC/f16Native must be false)`);
  }
  if (v.grouped) {
    const why = mode !== "kernel" ? `"kernel" binding mode` : v.storage !== "f32" ? "f32 storage" : !v.edges ? "edges (bounds guards)" : v.grouped === "rows" ? (v.transA ? "transA false" : "") : v.transA && !v.transB ? "" : "transA true and transB false";
    if (why) throw new Error(`matmul ${variantKey(v)}: grouped mode "${v.grouped}" needs ${why}`);
  }
  const { BM, BN, BK, TM, TN } = t;
  const TX = BN / TN, TY = BM / TM, WG = TX * TY;
  const AS4 = (BM + t.padA) / 4; // vec4 words per k-row of the staged A slice
  const BS4 = (BN + t.padB) / 4;
  const nLA = (BM * BK) / (4 * WG), nLB = (BN * BK) / (4 * WG);
  const f16 = v.storage === "f16";
  const L: string[] = [];
  const e = (s: string) => L.push(s);

  if (mode === "standalone") {
    if (f16 && v.f16Native) e("enable f16;");
    const elemDecl = (vec: boolean): string => {
      if (!f16) return vec ? "array<vec4<f32>>" : "array<f32>";
      if (v.f16Native) return vec ? "array<vec4<f16>>" : "array<f16>";
      return vec ? "array<vec2<u32>>" : "array<u32>";
    };
    e(`struct Params { ${MATMUL_PARAM_NAMES.map((n) => `${n}: u32`).join(", ")}, pad0: u32 };`);
    e(`@group(0) @binding(0) var<storage, read> b_a: ${elemDecl(v.vecA)};`);
    e(`@group(0) @binding(1) var<storage, read> b_b: ${elemDecl(v.vecB)};`);
    e(`@group(0) @binding(2) var<storage, read_write> b_out: ${v.vecC ? "array<vec4<f32>>" : "array<f32>"};`);
    e(`@group(0) @binding(3) var<uniform> P: Params;`);
  }
  // [buffer][k][vec4 column]: with constant k, the only dynamic indices are the buffer (one clamp
  // per step) and the thread's column, which is loop-invariant, so the bounds clamps WGSL
  // compilers insert (naga's "Restrict" policy) are hoisted out of the inner loop.
  e(`var<workgroup> mm_As: array<array<array<vec4<f32>, ${AS4}>, ${BK}>, 2>;`);
  e(`var<workgroup> mm_Bs: array<array<array<vec4<f32>, ${BS4}>, ${BK}>, 2>;`);

  // --- element readers: vec4 at element index i (i % 4 == 0), or one scalar at i
  for (const [name, buf, vec] of [["A", "b_a", v.vecA], ["B", "b_b", v.vecB]] as const) {
    if (vec) {
      let body: string;
      if (!f16) body = `return ${buf}[i >> 2u];`;
      else if (v.f16Native) body = `return vec4<f32>(${buf}[i >> 2u]);`;
      else body = `let w = ${buf}[i >> 2u]; return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));`;
      e(`fn mm_ld${name}4(i: u32) -> vec4<f32> { ${body} }`);
    } else {
      let body: string;
      if (!f16) body = `return ${buf}[i];`;
      else if (v.f16Native) body = `return f32(${buf}[i]);`;
      else body = `let w = unpack2x16float(${buf}[i >> 1u]); return select(w.x, w.y, (i & 1u) == 1u);`;
      e(`fn mm_ld${name}1(i: u32) -> f32 { ${body} }`);
    }
  }

  // Load of 4 consecutive elements starting at index `idx` along the contiguous dimension, with
  // `rowOk` guarding the strided coordinate and `c`/`lim` the contiguous coordinate and its limit.
  const load4 = (name: "A" | "B", vec: boolean, idx: string, rowOk: string, c: string, lim: string): string => {
    if (vec) {
      if (!v.edges) return `mm_ld${name}4(${idx})`;
      // Guarded vec4 load; the index is clamped so that a skipped load still addresses memory.
      const ok = `${rowOk} && ${c} < ${lim}`;
      return `select(vec4<f32>(0.0), mm_ld${name}4(select(0u, ${idx}, ${ok})), ${ok})`;
    }
    const parts = [0, 1, 2, 3].map((j) => {
      const ij = j === 0 ? idx : `${idx} + ${j}u`;
      if (!v.edges) return `mm_ld${name}1(${ij})`;
      // Guarded scalar load; the index is clamped so that a skipped load still addresses memory.
      return `select(0.0, mm_ld${name}1(select(0u, ${ij}, ${rowOk} && ${c} + ${j}u < ${lim})), ${rowOk} && ${c} + ${j}u < ${lim})`;
    });
    return `vec4<f32>(${parts.join(", ")})`;
  };

  if (v.grouped) e(`fn mm_off(g: u32) -> u32 { return min(u32(max(b_off[P.offOff + g], 0)), P.R); }`);
  e(`@compute @workgroup_size(${WG})`);
  e(`fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {`);
  if (!v.grouped) e(`  let M = P.M; let N = P.N; let K = P.K;`);
  e(`  let lin = wg.x + wg.y * P.gridX;`);
  e(`  let perBatch = P.tilesM * P.tilesN;`);
  e(`  let b = lin / perBatch;`);
  e(`  if (b >= P.batch) { return; }`);
  e(`  let rem = lin - b * perBatch;`);
  if (v.groupM > 1) {
    e(`  let width = ${v.groupM}u * P.tilesN;`);
    e(`  let grp = rem / width;`);
    e(`  let firstM = grp * ${v.groupM}u;`);
    e(`  let gsz = min(P.tilesM - firstM, ${v.groupM}u);`);
    e(`  let inG = rem - grp * width;`);
    e(`  let tm = firstM + inG % gsz;`);
    e(`  let tn = inG / gsz;`);
  } else {
    e(`  let tm = rem / P.tilesN;`);
    e(`  let tn = rem - tm * P.tilesN;`);
  }
  if (!v.grouped) {
    e(`  let m0 = tm * ${BM}u; let n0 = tn * ${BN}u;`);
    e(`  let baseA = P.offA + b * P.strideA; let baseB = P.offB + b * P.strideB; let baseC = P.offC + b * P.strideC;`);
  } else if (v.grouped === "rows") {
    // row-tile slot tm → group g, rows [r0, r1): the same answer in every invocation
    e(`  let N = P.N; let K = P.K;`);
    e(`  var g = P.G; var r0 = 0u; var r1 = 0u; var seen = 0u;`);
    e(`  for (var h = 0u; h < P.G; h = h + 1u) {`);
    e(`    let s0 = mm_off(h); let s1 = max(mm_off(h + 1u), s0); let nt = (s1 - s0 + ${BM - 1}u) / ${BM}u;`);
    e(`    if (g == P.G && tm < seen + nt) { g = h; r0 = s0 + (tm - seen) * ${BM}u; r1 = min(r0 + ${BM}u, s1); }`);
    e(`    seen = seen + nt;`);
    e(`  }`);
    e(`  if (g >= P.G) { return; }`);
    e(`  let M = r1 - r0;`);
    e(`  let m0 = 0u; let n0 = tn * ${BN}u;`);
    e(`  let baseA = P.offA + r0 * P.ldk; let baseB = P.offB + g * P.strideB; let baseC = P.offC + r0 * N;`);
  } else {
    // batch index b = group: the K loop runs over its rows
    e(`  let M = P.M; let N = P.N;`);
    e(`  let s0 = mm_off(b); let s1 = max(mm_off(b + 1u), s0); let K = s1 - s0;`);
    e(`  let m0 = tm * ${BM}u; let n0 = tn * ${BN}u;`);
    e(`  let baseA = P.offA + s0 * M; let baseB = P.offB + s0 * N; let baseC = P.offC + b * P.strideC;`);
  }
  e(`  let tx = lid % ${TX}u; let ty = lid / ${TX}u;`);

  // --- per-thread load coordinates (constant over the K loop)
  // A: non-transposed (M×K, K contiguous) → vec4 along k; transposed (K×M) → vec4 along m.
  for (let i = 0; i < nLA; i++) {
    e(`  let va${i} = lid + ${i * WG}u;`);
    if (!v.transA) {
      e(`  let ar${i} = va${i} / ${BK / 4}u; let ak${i} = (va${i} % ${BK / 4}u) * 4u;`);
      e(`  let am${i} = m0 + ar${i}; let aOk${i} = am${i} < M; let aRow${i} = baseA + am${i} * P.ldk;`);
    } else {
      e(`  let ak${i} = va${i} / ${BM / 4}u; let aq${i} = va${i} % ${BM / 4}u;`);
      e(`  let am${i} = m0 + aq${i} * 4u;`);
    }
  }
  for (let i = 0; i < nLB; i++) {
    e(`  let vb${i} = lid + ${i * WG}u;`);
    if (!v.transB) {
      e(`  let bk${i} = vb${i} / ${BN / 4}u; let bq${i} = vb${i} % ${BN / 4}u;`);
      e(`  let bn${i} = n0 + bq${i} * 4u;`);
    } else {
      e(`  let br${i} = vb${i} / ${BK / 4}u; let bk${i} = (vb${i} % ${BK / 4}u) * 4u;`);
      e(`  let bn${i} = n0 + br${i}; let bOk${i} = bn${i} < N; let bRow${i} = baseB + bn${i} * P.ldk;`);
    }
  }

  // Staged loads are numbered 0 … nLA+nLB−1: A's first, then B's.
  const nL = nLA + nLB;
  /** Global load of staged vec4 number `q` of the K-slice starting at `k0` into its register. */
  const emitLoad = (q: number, k0: string) => {
    if (q < nLA) {
      const i = q;
      if (!v.transA) e(`    { let k = ${k0} + ak${i}; ra${i} = ${load4("A", v.vecA, `aRow${i} + k`, `aOk${i}`, "k", "K")}; }`);
      else e(`    { let k = ${k0} + ak${i}; ra${i} = ${load4("A", v.vecA, `baseA + k * M + am${i}`, "k < K", `am${i}`, "M")}; }`);
    } else {
      const i = q - nLA;
      if (!v.transB) e(`    { let k = ${k0} + bk${i}; rb${i} = ${load4("B", v.vecB, `baseB + k * N + bn${i}`, "k < K", `bn${i}`, "N")}; }`);
      else e(`    { let k = ${k0} + bk${i}; rb${i} = ${load4("B", v.vecB, `bRow${i} + k`, `bOk${i}`, "k", "K")}; }`);
    }
  };
  /** Workgroup-memory store of staged vec4 number `q` into staging buffer `buf` (u32 expression). */
  const emitStore = (q: number, buf: string) => {
    if (q < nLA) {
      const i = q;
      if (!v.transA) {
        // scatter the 4 k-values of row ar into 4 k-rows, component ar % 4 of word ar / 4
        for (let j = 0; j < 4; j++) e(`    mm_As[${buf}][ak${i} + ${j}u][ar${i} >> 2u][ar${i} & 3u] = ra${i}[${j}];`);
      } else {
        e(`    mm_As[${buf}][ak${i}][aq${i}] = ra${i};`);
      }
    } else {
      const i = q - nLA;
      if (!v.transB) {
        e(`    mm_Bs[${buf}][bk${i}][bq${i}] = rb${i};`);
      } else {
        for (let j = 0; j < 4; j++) e(`    mm_Bs[${buf}][bk${i} + ${j}u][br${i} >> 2u][br${i} & 3u] = rb${i}[${j}];`);
      }
    }
  };
  const emitGlobalLoads = (k0: string) => { for (let q = 0; q < nL; q++) emitLoad(q, k0); };
  const emitSharedStores = (buf: string) => { for (let q = 0; q < nL; q++) emitStore(q, buf); };

  for (let i = 0; i < nLA; i++) e(`  var ra${i}: vec4<f32>;`);
  for (let i = 0; i < nLB; i++) e(`  var rb${i}: vec4<f32>;`);
  const RC = TM, CC = TN / 4; // accumulator rows, vec4 columns
  for (let r = 0; r < RC; r++) for (let c = 0; c < CC; c++) e(`  var c${r}_${c} = vec4<f32>(0.0);`);

  e(`  let nT = (K + ${BK - 1}u) / ${BK}u;`);
  e(`  if (nT > 0u) {`);
  emitGlobalLoads("0u");
  emitSharedStores("0u");
  e(`  }`);
  e(`  workgroupBarrier();`);
  const emitCompute = (kk: number, cur: string, ind: string) => {
    // one block per k step: WGSL forbids redeclaring a \`let\` in the same scope
    e(`${ind}{`);
    for (let j = 0; j < TM / 4; j++) e(`${ind}let a${j} = mm_As[${cur}][${kk}][ty + ${j * TY}u];`);
    for (let j = 0; j < CC; j++) e(`${ind}let b${j} = mm_Bs[${cur}][${kk}][tx + ${j * TX}u];`);
    for (let r = 0; r < RC; r++) {
      const comp = "xyzw"[r % 4];
      for (let c = 0; c < CC; c++) e(`${ind}c${r}_${c} = fma(vec4<f32>(a${r >> 2}.${comp}), b${c}, c${r}_${c});`);
    }
    e(`${ind}}`);
  };
  // One K-step: prefetch slice t+1 into registers, consume buffer `cur`, stage t+1 into the other.
  const emitStep = (t: string, cur: string, ind: string) => {
    const other = cur === "0u" ? "1u" : cur === "1u" ? "0u" : `(${cur} ^ 1u)`;
    if (v.prefetchDistance === 0) {
      // all loads before the compute, all stores after it
      e(`${ind}{ let more = ${t} + 1u < nT;`);
      e(`${ind}if (more) {`);
      emitGlobalLoads(`(${t} + 1u) * ${BK}u`);
      e(`${ind}}`);
      for (let kk = 0; kk < BK; kk++) emitCompute(kk, cur, ind);
      e(`${ind}if (more) {`);
      emitSharedStores(other);
      e(`${ind}}`);
      e(`${ind}workgroupBarrier(); }`);
      return;
    }
    // Interleaved: load q is issued before k-step issue[q] and stored (into the buffer nobody reads
    // during this step) before k-step issue[q] + distance, so few prefetch registers are live at
    // once, and no branch splits the unrolled code. The last step re-reads its own slice (valid
    // addresses); that copy lands in the unused buffer and is never read.
    e(`${ind}{ let kn = min(${t} + 1u, nT - 1u) * ${BK}u;`);
    const issue = Array.from({ length: nL }, (_, q) => Math.floor((q * BK) / nL));
    for (let kk = 0; kk <= BK; kk++) {
      for (let q = 0; q < nL; q++) if (Math.min(issue[q]! + v.prefetchDistance, BK) === kk) emitStore(q, other);
      if (kk === BK) break;
      for (let q = 0; q < nL; q++) if (issue[q] === kk) emitLoad(q, "kn");
      emitCompute(kk, cur, ind);
    }
    e(`${ind}workgroupBarrier(); }`);
  };
  if (v.unroll2) {
    // two steps per iteration with constant buffer indices
    e(`  for (var t = 0u; t < nT; t = t + 2u) {`);
    emitStep("t", "0u", "    ");
    e(`    if (t + 1u < nT) {`);
    emitStep("(t + 1u)", "1u", "      ");
    e(`    }`);
    e(`  }`);
  } else {
    e(`  for (var t = 0u; t < nT; t = t + 1u) {`);
    e(`    let cur = t & 1u;`);
    emitStep("t", "cur", "    ");
    e(`  }`);
  }

  // --- epilogue: write the micro-tile
  for (let r = 0; r < RC; r++) {
    const rowExpr = `m0 + ${(r >> 2) * TY * 4 + (r & 3)}u + ty * 4u`;
    e(`  { let m = ${rowExpr};`);
    if (v.edges) e(`  if (m < M) {`);
    for (let c = 0; c < CC; c++) {
      const colExpr = `n0 + ${c * TX * 4}u + tx * 4u`;
      e(`    { let n = ${colExpr};`);
      if (v.vecC) {
        e(`    ${v.edges ? "if (n < N) " : ""}{ let i = (baseC + m * N + n) >> 2u;`);
        e(`      if (P.accumulate != 0u) { b_out[i] = b_out[i] + c${r}_${c}; } else { b_out[i] = c${r}_${c}; } }`);
      } else {
        for (let j = 0; j < 4; j++) {
          const guard = v.edges ? `if (n + ${j}u < N) ` : "";
          e(`    ${guard}{ let i = baseC + m * N + n + ${j}u;`);
          e(`      if (P.accumulate != 0u) { b_out[i] = b_out[i] + c${r}_${c}[${j}]; } else { b_out[i] = c${r}_${c}[${j}]; } }`);
        }
      }
      e(`    }`);
    }
    if (v.edges) e(`  }`);
    e(`  }`);
  }
  e(`}`);
  return L.join("\n");
}
