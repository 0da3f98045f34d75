/**
 * Scaled-dot-product attention on the tensor cores: FlashAttention-2's partitioning (Dao 2023,
 * "FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning") with every
 * product — Q·Kᵀ and P·V in the forward; Q·Kᵀ, dO·Vᵀ, dS·K, Pᵀ·dO, dSᵀ·Q in the backward — on
 * 16×16×16 f16→f32 cooperative-matrix fragments (attention-coop-ops.ts), softmax statistics,
 * masks and scale factors in f32. Causal or not, grouped-query heads (head h reads kv head
 * ⌊h·Hkv/H⌋), any sequence length, head dims that are multiples of 16 up to 128. Same layouts,
 * saved lse and results as attention.ts / attention-flash.ts (q, out, dout [B, S, H, D]; k, v
 * [B, S, Hkv, D]; lse [B, H, S] natural log), which stay the FMA fallback.
 *
 * Operands: each f32 tensor is first scaled by a power of two and packed as f16, head-major and
 * zero-padded (attention-coop-pack.ts); the kernels load fragments straight from those copies
 * (no guards: padded rows are zeros) and fold the exponents back in f32: into the softmax scale
 * for Q·Kᵀ, into Δ for dO·Vᵀ, and into the stores.
 *
 * Work split: a workgroup of `sg` subgroups owns 16·sg rows (query rows for the forward and dQ,
 * key rows for dK/dV); each subgroup owns 16 of them outright — its accumulator fragments, its
 * slab of the score tile in workgroup memory — so no subgroup waits on another's data. Inner
 * blocks are 16·kf keys (forward, dQ) or queries (dK/dV). A score fragment goes from the tensor
 * cores to workgroup memory as f32 (naga's cooperative matrices have no element access), the
 * subgroup's 32 lanes apply mask and exponent to it (lane l: row l/2, every other column), and P
 * (or dS) returns as an f16 A fragment. Loop bounds are workgroup-uniform (cooperative-matrix
 * operations must be in uniform control flow), so the causal bound of a block is that of its last
 * row; masks do the rest.
 *
 * Forward, per (b, h, query block), in two passes over the key blocks up to the diagonal: the first
 * computes S = Q·Kᵀ and folds each lane's share of every row into a running max and sum (merged
 * with the partner lane's at the end): the row's lse; the second recomputes S and accumulates
 * O += exp2(S·c − lse)·V with P already normalised. Two passes cost one more Q·Kᵀ (1.5× the
 * products) but the O accumulator is never rescaled — per-row rescaling of a fragment would need
 * element access, i.e. a trip of O through workgroup memory every block.
 * Backward (Δ_i = dO_i·O_i first, attention.ts), deterministic without atomics as in
 * attention-flash.ts: the dQ kernel per (b, h, query block) accumulates dQ += dS·K; the dK/dV kernel
 * per (b, kv head, key block) loops over the group's query heads and the query blocks at or after
 * the key block and accumulates dV += Pᵀ·dO, dK += dSᵀ·Q. dS = P ⊙ (dP − Δ) has no a-priori range,
 * so each subgroup scales its dS tile by a power of two from the tile's largest |dS| before rounding
 * it to f16 (matmul-coop-scale.ts's exponent rule), multiplies it into a fresh accumulator and adds
 * that to the running one times the inverse power (exact).
 */
import type { Buf } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { attentionDeltaLaunch, ATTENTION_INDEX } from "./attention.ts";
import { ATTN_EXP, ATTN_EXP_WORDS, attentionCoopExponentsLaunch, attentionCoopPackLaunch, attentionPackedHalves, attentionPackedRows } from "./attention-coop-pack.ts";
import { attnCoopOps, type AttnCoopOps } from "./attention-coop-ops.ts";
import { entry, f32s, memoKernel, u32s } from "./launch.ts";
import type { CoopScratch } from "./matmul-coop-launch.ts";
import { COOP_AMAX_WORDS, COOP_SCALE_WGSL, coopAbsMaxLaunch } from "./matmul-coop-scale.ts";
import { COOP_SUBGROUP } from "./matmul-coop-tile.ts";

const NEG = "-3.0e38";

/** Block of one tensor-core attention kernel: `sg` subgroups (16·sg rows per workgroup) and inner
 * blocks of 16·kf columns. Both powers of two, sg ≤ 8, kf ≤ 8 (and kf ≤ 2·sg for dK/dV). */
export interface CoopAttnBlock {
  sg: number;
  kf: number;
}

/** Label suffix of a block: `4x4` (sg × kf). */
export function coopAttnBlockName(b: CoopAttnBlock): string {
  return `${b.sg}x${b.kf}`;
}

/** The blocks of the three kernels. */
export interface CoopAttnBlocks {
  fwd: CoopAttnBlock;
  dq: CoopAttnBlock;
  dkv: CoopAttnBlock;
}

/** Default blocks: 64 rows per workgroup (4 subgroups) everywhere; 64-key blocks in the forward
 * (one f32 and one f16 score slab: 27 KiB of workgroup memory at any head dim), 32-wide blocks in
 * the backward (two f32 and one or two f16 slabs: 24 / 29 KiB), so all three fit lavapipe's 32 KiB
 * as well as the H200's 48 KiB. */
export const COOP_ATTN_DEFAULT_BLOCKS: Readonly<CoopAttnBlocks> = { fwd: { sg: 4, kf: 4 }, dq: { sg: 4, kf: 2 }, dkv: { sg: 4, kf: 2 } };

/** Head dims the tensor-core kernels take: multiples of 16 up to 128. */
export function coopAttnHeadDimOk(D: number): boolean {
  return D > 0 && D % 16 === 0 && D <= 128;
}

const pow2ok = (x: number): boolean => Number.isInteger(x) && x >= 1 && x <= 8 && (x & (x - 1)) === 0;

/** Why `b` cannot be a block of kernel `kind`, or "". */
export function coopAttnBlockProblem(kind: keyof CoopAttnBlocks, b: CoopAttnBlock): string {
  if (!pow2ok(b.sg) || !pow2ok(b.kf)) return `sg and kf must be 1, 2, 4 or 8, got ${b.sg}, ${b.kf}`;
  if (kind === "dkv" && b.kf > 2 * b.sg) return `dK/dV needs kf ≤ 2·sg (one invocation per query of the block), got ${b.sg}x${b.kf}`;
  return "";
}

/** Row stride (elements) of the f32 and f16 score slabs of a block: 16·kf plus 16 bytes. */
function slabLd(b: CoopAttnBlock): { SLD: number; PLD: number } {
  return { SLD: 16 * b.kf + 4, PLD: 16 * b.kf + 8 };
}

/** Workgroup-memory bytes of kernel `kind` with block `b` (independent of the head dim). */
export function coopAttnBytes(kind: keyof CoopAttnBlocks, b: CoopAttnBlock): number {
  const { SLD, PLD } = slabLd(b);
  const rows = 16 * b.sg;
  const f = rows * SLD * 4;
  const h = rows * PLD * 2;
  const lanes = b.sg * COOP_SUBGROUP;
  if (kind === "fwd") return f + h + lanes * 8;
  if (kind === "dq") return 2 * f + h + lanes * 4;
  return 2 * f + 2 * h + lanes * 4 + 2 * 16 * b.kf * 4;
}

/** Invocations of a workgroup with block `b`. */
function threads(b: CoopAttnBlock): number {
  return b.sg * COOP_SUBGROUP;
}

/** Shared WGSL of the three kernels. */
function header(ops: AttnCoopOps, D: number, b: CoopAttnBlock): string {
  const { SLD, PLD } = slabLd(b);
  return `enable f16;
${ops.emulate ? "" : "enable wgpu_cooperative_matrix;\n"}const DH: u32 = ${D}u;
const DP: u32 = ${D}u; // row stride of the packed copies, in halves
const SLD: u32 = ${SLD}u;
const PLD: u32 = ${PLD}u;
const BR: u32 = ${16 * b.sg}u;
const BC: u32 = ${16 * b.kf}u;
${ATTENTION_INDEX}${COOP_SCALE_WGSL}
fn finite_abs_bits(x: f32) -> u32 {
  let u = bitcast<u32>(x) & 0x7fffffffu;
  return select(0u, u, u < 0x7f800000u);
}
`;
}

/** The per-invocation prologue: subgroup, lane, the lane's row r within the subgroup's 16 and its
 * column parity, the subgroup's slab bases, and the four exponents (i32). */
const LANES = `  let sg = li / ${COOP_SUBGROUP}u;
  let lane = li % ${COOP_SUBGROUP}u;
  let r = lane / 2u;
  let cpar = lane % 2u;
  let sl = sg * 16u * SLD;
  let pl = sg * 16u * PLD;
  let kq = bitcast<i32>(b_exps[${ATTN_EXP.q}]);
  let kk = bitcast<i32>(b_exps[${ATTN_EXP.k}]);
  let kv = bitcast<i32>(b_exps[${ATTN_EXP.v}]);
  let kdo = bitcast<i32>(b_exps[${ATTN_EXP.dout}]);`;

/**
 * Repeat `body` for i < n. For the real builtins the copies are unrolled with constant indices and
 * fragments live in named variables (`x0`, `x1`, …: cooperative matrices cannot be indexed); for the
 * emulation `body` runs in a WGSL loop over `v` with fragments in arrays (`x[v]`), which keeps the
 * emulated kernels small enough for a CPU driver to compile in reasonable time (fully unrolled they
 * took minutes on lavapipe). The index arithmetic is the same either way. `body(i, nm)`: i is the
 * index as a WGSL u32 expression, nm(x) the name of fragment x at it.
 */
function rep(ops: AttnCoopOps, n: number, v: string, body: (i: string, nm: (x: string) => string) => string[]): string[] {
  if (!ops.emulate) {
    const out: string[] = [];
    for (let k = 0; k < n; k++) out.push(...body(`${k}u`, (x) => `${x}${k}`));
    return out;
  }
  return [`for (var ${v} = 0u; ${v} < ${n}u; ${v}++) {`, ...body(v, (x) => `${x}[${v}]`), `}`];
}

/** Declarations of zeroed accumulators `name` × n (real: n variables; emulation: one array). */
function declAcc(ops: AttnCoopOps, name: string, n: number): string {
  if (ops.emulate) return `  var ${name}: array<EmuC, ${n}>;`;
  return Array.from({ length: n }, (_, k) => `  var ${name}${k} = ${ops.zeroC()};`).join("\n");
}

/** Fragments of `arr` held across the inner loop (real: `let name0…` loaded once; emulation: none,
 * each use loads, see {@link heldUse}). `idx(i)` is the element offset of fragment i. */
function declHeld(ops: AttnCoopOps, name: string, n: number, arr: string, idx: (i: string) => string, ld = "DP"): string {
  if (ops.emulate) return "";
  return Array.from({ length: n }, (_, k) => `  let ${name}${k} = ${ops.load("A", arr, idx(`${k}u`), ld, true)};`).join("\n");
}

/** A use of held fragment i (see {@link declHeld}); `nm` names fragments at index i. */
function heldUse(ops: AttnCoopOps, name: string, arr: string, idx: (i: string) => string, i: string, nm: (x: string) => string, ld = "DP"): string {
  return ops.emulate ? ops.load("A", arr, idx(i), ld, true) : nm(name);
}

/** Element offset of fragment j of the subgroup's f16 slab (P or dS). */
const slabIdx = (j: string) => `pl + 16u * ${j}`;

/** Emit, for column block j (a WGSL u32 expression), acc = Σ_t A_t·B_t over t < nf into a fresh
 * accumulator and its store to slab column block j of `slab`; `a(t, nm)` / `bf(t)` give the
 * fragments (t a WGSL expression) and their arrays. */
function productToSlab(ops: AttnCoopOps, nf: number, a: (t: string, nm: (x: string) => string) => [string, string], bf: (t: string) => [string, string], slab: string, j: string): string[] {
  const inner = rep(ops, nf, "t_", (t, nm) => {
    const [af, aa] = a(t, nm);
    const [bx, ba] = bf(t);
    return [`  acc = ${ops.mma(af, aa, bx, ba, "acc")};`];
  });
  return [`{`, `  var acc = ${ops.zeroC()};`, ...inner, `  ${ops.store("acc", slab, `sl + 16u * ${j}`, "SLD")}`, `}`];
}

/** Emit the store of accumulators `acc` (t < nf) times `mul` (a WGSL f32 expression) to the rows of
 * the subgroup, `rowBase` the element offset of row `rr` (a WGSL expression), `ok` the row's
 * validity: each fragment through the subgroup's f32 slab. */
function storeAcc(ops: AttnCoopOps, nf: number, acc: string, out: string, rowBase: string, ok: string, mul: string): string {
  return rep(ops, nf, "t_", (t, nm) => [
    `  ${ops.store(nm(acc), "Sf", "sl", "SLD")}`,
    `  workgroupBarrier();`,
    `  for (var e = lane; e < 256u; e += ${COOP_SUBGROUP}u) {`,
    `    let rr = e / 16u;`,
    `    if (${ok}) { ${out}[${rowBase} + 16u * ${t} + e % 16u] = Sf[sl + rr * SLD + e % 16u] * ${mul}; }`,
    `  }`,
    `  workgroupBarrier();`,
  ]).map((l) => "  " + l).join("\n");
}

/** Indent lines by `n` spaces and join them. */
function ind(lines: string[], n: number): string {
  return lines.map((l) => " ".repeat(n) + l).join("\n");
}

/** Label of a kernel. */
function label(kind: string, D: number, b: CoopAttnBlock, causal: boolean, emulate: boolean): string {
  return `attention_coop_${kind}_d${D}_${coopAttnBlockName(b)}${causal ? "" : "_full"}${emulate ? "_emu" : ""}`;
}

const F16 = (name: string) => ({ name, type: "f16" as const, write: false });
const RO = (name: string, type: "f32" | "u32") => ({ name, type, write: false });
const WR = (name: string) => ({ name, type: "f32" as const, write: true });

function forwardKernel(D: number, b: CoopAttnBlock, causal: boolean, emulate: boolean): Kernel {
  const lbl = label("fwd", D, b, causal, emulate);
  return memoKernel(lbl, () => {
    const ops = attnCoopOps(emulate);
    const NF = D / 16;
    const KF = b.kf;
    const valid = `key < P.S${causal ? " && key <= qr" : ""}`;
    const qIdx = (i: string) => `qa + 16u * ${i}`;
    const sTiles = ind(rep(ops, KF, "j_", (j) => productToSlab(ops, NF, (t, nm) => [heldUse(ops, "qf", "b_q", qIdx, t, nm), "b_q"], (t) => [ops.load("B", "b_k", `kb0 + (k0 + 16u * ${j}) * DP + 16u * ${t}`, "DP", false), "b_k"], "Sf", j)), 4);
    const pv = declHeld(ops, "pa", KF, "Ph", slabIdx, "PLD").replace(/^/gm, "  ") + "\n" +
      ind(rep(ops, NF, "t_", (t, nm) => rep(ops, KF, "j_", (j, nj) => [`  ${nm("o")} = ${ops.mma(heldUse(ops, "pa", "Ph", slabIdx, j, nj, "PLD"), "Ph", ops.load("B", "b_v", `kb0 + (k0 + 16u * ${j}) * DP + 16u * ${t}`, "DP", true), "b_v", nm("o"))};`])), 4);
    const body = `${entry(threads(b))} {
  let id = wg.x + wg.y * nwg.x; // inline: naga takes a helper's arguments as non-uniform, and the early return must stay workgroup-uniform for the cooperative-matrix ops after it
  if (id >= P.B * P.H * P.nqb) { return; }
  let qb = P.nqb - 1u - id / (P.B * P.H); // the blocks with the most keys first
  let h = id % P.H;
  let b = (id / P.H) % P.B;
  let kh = (h * P.Hkv) / P.H;
${LANES}
  let c2 = P.c2 * coop_pow2(-kq) * coop_pow2(-kk);
  let q0 = qb * BR + sg * 16u;
  let qr = q0 + r;
  let qa = ((b * P.H + h) * P.Sp + q0) * DP;
  let kb0 = (b * P.Hkv + kh) * P.Sp * DP;
  let nk = ${causal ? "(min(qb * BR + BR, P.S) + BC - 1u) / BC" : "(P.S + BC - 1u) / BC"};
${declHeld(ops, "qf", NF, "b_q", qIdx)}
  // pass 1: the row statistics (running max m and sum l of 2^(s·c) over this lane's columns)
  var m: f32 = ${NEG};
  var l: f32 = 0.0;
  for (var kt = 0u; kt < nk; kt++) {
    let k0 = kt * BC;
${sTiles}
    workgroupBarrier();
    var mt: f32 = ${NEG};
    for (var c = cpar; c < BC; c += 2u) {
      let key = k0 + c;
      if (${valid}) { mt = max(mt, Sf[sl + r * SLD + c] * c2); }
    }
    let mn = max(m, mt);
    var ls: f32 = 0.0;
    for (var c = cpar; c < BC; c += 2u) {
      let key = k0 + c;
      if (${valid}) { ls += exp2(Sf[sl + r * SLD + c] * c2 - mn); }
    }
    l = l * exp2(m - mn) + ls;
    m = mn;
    workgroupBarrier();
  }
  Ms[li] = vec2<f32>(m, l);
  workgroupBarrier();
  let pm = Ms[li ^ 1u];
  let mm = max(m, pm.x);
  let L2 = mm + log2(l * exp2(m - mm) + pm.y * exp2(pm.x - mm));
  if (cpar == 0u && qr < P.S) { b_lse[P.loff + ridx(b, h, qr)] = L2 * ${Math.LN2}; }
  // pass 2: O = Σ 2^(s·c − lse) · V
${declAcc(ops, "o", NF)}
  for (var kt = 0u; kt < nk; kt++) {
    let k0 = kt * BC;
${sTiles}
    workgroupBarrier();
    for (var c = cpar; c < BC; c += 2u) {
      let key = k0 + c;
      var p: f32 = 0.0;
      if (${valid}) { p = exp2(Sf[sl + r * SLD + c] * c2 - L2); }
      Ph[pl + r * PLD + c] = f16(p);
    }
    workgroupBarrier();
${pv}
  }
${storeAcc(ops, NF, "o", "b_out", "P.ooff + qidx(b, q0 + rr, h)", "q0 + rr < P.S", "coop_pow2(-kv)")}
}`;
    const code = `${header(ops, D, b)}
var<workgroup> Sf: array<f32, ${16 * b.sg * slabLd(b).SLD}>;
var<workgroup> Ph: array<f16, ${16 * b.sg * slabLd(b).PLD}>;
var<workgroup> Ms: array<vec2<f32>, ${threads(b)}>;
${ops.declarations()}${body}`;
    return {
      label: lbl,
      buffers: [F16("b_q"), F16("b_k"), F16("b_v"), RO("b_exps", "u32"), WR("b_out"), WR("b_lse")],
      params: [...u32s("B", "S", "H", "Hkv", "Sp", "ooff", "loff", "nqb"), ...f32s("c2")],
      code,
    };
  });
}

/** WGSL of the dS tile's power-of-two scaling: the subgroup's largest finite |dS| (each lane's in
 * `mx`) through `red`, the exponent, and the f16 dS slab `DSh` from the f32 one in `Df`. */
const DS_TO_F16 = `    red[li] = mx;
    workgroupBarrier();
    var sm = 0u;
    for (var u = 0u; u < ${COOP_SUBGROUP}u; u++) { sm = max(sm, red[sg * ${COOP_SUBGROUP}u + u]); }
    let ke = coop_scale_exp(sm);
    let se = coop_pow2(ke);
    let inv = coop_pow2(-ke);
    for (var c = cpar; c < BC; c += 2u) { DSh[pl + r * PLD + c] = f16(Df[sl + r * SLD + c] * se); }
    workgroupBarrier();`;

function dqKernel(D: number, b: CoopAttnBlock, causal: boolean, emulate: boolean): Kernel {
  const lbl = label("dq", D, b, causal, emulate);
  return memoKernel(lbl, () => {
    const ops = attnCoopOps(emulate);
    const NF = D / 16;
    const KF = b.kf;
    const qIdx = (i: string) => `qa + 16u * ${i}`;
    const tiles = ind(rep(ops, KF, "j_", (j) => [
      ...productToSlab(ops, NF, (t, nm) => [heldUse(ops, "qf", "b_q", qIdx, t, nm), "b_q"], (t) => [ops.load("B", "b_k", `kb0 + (k0 + 16u * ${j}) * DP + 16u * ${t}`, "DP", false), "b_k"], "Sf", j),
      ...productToSlab(ops, NF, (t, nm) => [heldUse(ops, "of", "b_do", qIdx, t, nm), "b_do"], (t) => [ops.load("B", "b_v", `kb0 + (k0 + 16u * ${j}) * DP + 16u * ${t}`, "DP", false), "b_v"], "Df", j),
    ]), 4);
    const acc = declHeld(ops, "da", KF, "DSh", slabIdx, "PLD").replace(/^/gm, "  ") + "\n" + ind(rep(ops, NF, "t_", (t, nm) => [
      `{`,
      `  var tmp = ${ops.zeroC()};`,
      ...rep(ops, KF, "j_", (j, nj) => [`  tmp = ${ops.mma(heldUse(ops, "da", "DSh", slabIdx, j, nj, "PLD"), "DSh", ops.load("B", "b_k", `kb0 + (k0 + 16u * ${j}) * DP + 16u * ${t}`, "DP", true), "b_k", "tmp")};`]),
      `  ${nm("dq")} = ${ops.add(nm("dq"), ops.scale("tmp", "inv"))};`,
      `}`,
    ]), 4);
    const body = `${entry(threads(b))} {
  let id = wg.x + wg.y * nwg.x; // inline: naga takes a helper's arguments as non-uniform, and the early return must stay workgroup-uniform for the cooperative-matrix ops after it
  if (id >= P.B * P.H * P.nqb) { return; }
  let qb = P.nqb - 1u - id / (P.B * P.H);
  let h = id % P.H;
  let b = (id / P.H) % P.B;
  let kh = (h * P.Hkv) / P.H;
${LANES}
  let c2 = P.c2 * coop_pow2(-kq) * coop_pow2(-kk);
  let q0 = qb * BR + sg * 16u;
  let qr = q0 + r;
  let qa = ((b * P.H + h) * P.Sp + q0) * DP;
  let kb0 = (b * P.Hkv + kh) * P.Sp * DP;
  let nk = ${causal ? "(min(qb * BR + BR, P.S) + BC - 1u) / BC" : "(P.S + BC - 1u) / BC"};
${declHeld(ops, "qf", NF, "b_q", qIdx)}
${declHeld(ops, "of", NF, "b_do", qIdx)}
  var L2: f32 = 0.0;
  var Dl: f32 = 0.0; // Δ in the units of dO·Vᵀ (times 2^(kdo + kv))
  if (qr < P.S) {
    L2 = b_lse[P.loff + ridx(b, h, qr)] * ${Math.LOG2E};
    Dl = b_delta[ridx(b, h, qr)] * coop_pow2(kdo) * coop_pow2(kv);
  }
${declAcc(ops, "dq", NF)}
  for (var kt = 0u; kt < nk; kt++) {
    let k0 = kt * BC;
${tiles}
    workgroupBarrier();
    var mx = 0u;
    for (var c = cpar; c < BC; c += 2u) {
      let key = k0 + c;
      let ix = sl + r * SLD + c;
      var ds: f32 = 0.0;
      if (qr < P.S && key < P.S${causal ? " && key <= qr" : ""}) { ds = exp2(Sf[ix] * c2 - L2) * (Df[ix] - Dl); }
      Df[ix] = ds;
      mx = max(mx, finite_abs_bits(ds));
    }
${DS_TO_F16}
${acc}
  }
${storeAcc(ops, NF, "dq", "b_dq", "P.dqoff + qidx(b, q0 + rr, h)", "q0 + rr < P.S", "P.scale * coop_pow2(-kdo) * coop_pow2(-kv) * coop_pow2(-kk)")}
}`;
    const code = `${header(ops, D, b)}
var<workgroup> Sf: array<f32, ${16 * b.sg * slabLd(b).SLD}>;
var<workgroup> Df: array<f32, ${16 * b.sg * slabLd(b).SLD}>;
var<workgroup> DSh: array<f16, ${16 * b.sg * slabLd(b).PLD}>;
var<workgroup> red: array<u32, ${threads(b)}>;
${ops.declarations()}${body}`;
    return {
      label: lbl,
      buffers: [F16("b_q"), F16("b_k"), F16("b_v"), F16("b_do"), RO("b_exps", "u32"), RO("b_lse", "f32"), RO("b_delta", "f32"), WR("b_dq")],
      params: [...u32s("B", "S", "H", "Hkv", "Sp", "loff", "dqoff", "nqb"), ...f32s("c2", "scale")],
      code,
    };
  });
}

function dkvKernel(D: number, b: CoopAttnBlock, causal: boolean, emulate: boolean): Kernel {
  const lbl = label("dkv", D, b, causal, emulate);
  return memoKernel(lbl, () => {
    const ops = attnCoopOps(emulate);
    const NF = D / 16;
    const KF = b.kf;
    const tiles = ind(rep(ops, KF, "j_", (j) => [
      ...productToSlab(ops, NF, (t) => [ops.load("A", "b_k", `ka + 16u * ${t}`, "DP", true), "b_k"], (t) => [ops.load("B", "b_q", `qh + (q0 + 16u * ${j}) * DP + 16u * ${t}`, "DP", false), "b_q"], "Sf", j),
      ...productToSlab(ops, NF, (t) => [ops.load("A", "b_v", `ka + 16u * ${t}`, "DP", true), "b_v"], (t) => [ops.load("B", "b_do", `qh + (q0 + 16u * ${j}) * DP + 16u * ${t}`, "DP", false), "b_do"], "Df", j),
    ]), 6);
    const held = [declHeld(ops, "pa", KF, "Ph", slabIdx, "PLD"), declHeld(ops, "da", KF, "DSh", slabIdx, "PLD")].filter((x) => x).join("\n").replace(/^/gm, "    ");
    const acc = (held ? held + "\n" : "") + ind(rep(ops, NF, "t_", (t, nm) => [
      `{`,
      ...rep(ops, KF, "j_", (j, nj) => [`  ${nm("dv")} = ${ops.mma(heldUse(ops, "pa", "Ph", slabIdx, j, nj, "PLD"), "Ph", ops.load("B", "b_do", `qh + (q0 + 16u * ${j}) * DP + 16u * ${t}`, "DP", true), "b_do", nm("dv"))};`]),
      `  var tmp = ${ops.zeroC()};`,
      ...rep(ops, KF, "j_", (j, nj) => [`  tmp = ${ops.mma(heldUse(ops, "da", "DSh", slabIdx, j, nj, "PLD"), "DSh", ops.load("B", "b_q", `qh + (q0 + 16u * ${j}) * DP + 16u * ${t}`, "DP", true), "b_q", "tmp")};`]),
      `  ${nm("dk")} = ${ops.add(nm("dk"), ops.scale("tmp", "inv"))};`,
      `}`,
    ]), 4);
    const body = `${entry(threads(b))} {
  let id = wg.x + wg.y * nwg.x; // inline: naga takes a helper's arguments as non-uniform, and the early return must stay workgroup-uniform for the cooperative-matrix ops after it
  if (id >= P.B * P.Hkv * P.nkb) { return; }
  let kb = id / (P.B * P.Hkv); // the blocks with the most queries first
  let kh = id % P.Hkv;
  let b = (id / P.Hkv) % P.B;
${LANES}
  let c2 = P.c2 * coop_pow2(-kq) * coop_pow2(-kk);
  let k0s = kb * BR + sg * 16u;
  let kr = k0s + r;
  let ka = ((b * P.Hkv + kh) * P.Sp + k0s) * DP;
  let h0 = (kh * P.H + P.Hkv - 1u) / P.Hkv; // the query heads h with ⌊h·Hkv/H⌋ = kh
  let h1 = ((kh + 1u) * P.H + P.Hkv - 1u) / P.Hkv;
  let nqt = (P.S + BC - 1u) / BC;
${declAcc(ops, "dk", NF)}
${declAcc(ops, "dv", NF)}
  for (var h = h0; h < h1; h++) {
    let qh = (b * P.H + h) * P.Sp * DP;
    for (var qt = ${causal ? "(kb * BR) / BC" : "0u"}; qt < nqt; qt++) {
      let q0 = qt * BC;
      if (li < BC) {
        var lv: f32 = 0.0;
        var dl: f32 = 0.0;
        if (q0 + li < P.S) {
          lv = b_lse[P.loff + ridx(b, h, q0 + li)] * ${Math.LOG2E};
          dl = b_delta[ridx(b, h, q0 + li)] * coop_pow2(kdo) * coop_pow2(kv);
        }
        Ls[li] = lv;
        Dls[li] = dl;
      }
${tiles}
      workgroupBarrier();
      var mx = 0u;
      for (var c = cpar; c < BC; c += 2u) {
        let q = q0 + c;
        let ix = sl + r * SLD + c;
        var p: f32 = 0.0;
        var ds: f32 = 0.0;
        if (q < P.S && kr < P.S${causal ? " && q >= kr" : ""}) {
          p = exp2(Sf[ix] * c2 - Ls[c]);
          ds = p * (Df[ix] - Dls[c]);
        }
        Ph[pl + r * PLD + c] = f16(p);
        Df[ix] = ds;
        mx = max(mx, finite_abs_bits(ds));
      }
${DS_TO_F16}
${acc}
    }
  }
${storeAcc(ops, NF, "dk", "b_dk", "P.dkoff + kidx(b, k0s + rr, kh)", "k0s + rr < P.S", "P.scale * coop_pow2(-kdo) * coop_pow2(-kv) * coop_pow2(-kq)")}
${storeAcc(ops, NF, "dv", "b_dv", "P.dvoff + kidx(b, k0s + rr, kh)", "k0s + rr < P.S", "coop_pow2(-kdo)")}
}`;
    const code = `${header(ops, D, b)}
var<workgroup> Sf: array<f32, ${16 * b.sg * slabLd(b).SLD}>;
var<workgroup> Df: array<f32, ${16 * b.sg * slabLd(b).SLD}>;
var<workgroup> Ph: array<f16, ${16 * b.sg * slabLd(b).PLD}>;
var<workgroup> DSh: array<f16, ${16 * b.sg * slabLd(b).PLD}>;
var<workgroup> red: array<u32, ${threads(b)}>;
var<workgroup> Ls: array<f32, ${16 * b.kf}>;
var<workgroup> Dls: array<f32, ${16 * b.kf}>;
${ops.declarations()}${body}`;
    return {
      label: lbl,
      buffers: [F16("b_q"), F16("b_k"), F16("b_v"), F16("b_do"), RO("b_exps", "u32"), RO("b_lse", "f32"), RO("b_delta", "f32"), WR("b_dk"), WR("b_dv")],
      params: [...u32s("B", "S", "H", "Hkv", "Sp", "loff", "dkoff", "dvoff", "nkb"), ...f32s("c2", "scale")],
      code,
    };
  });
}

/** Names of the scratch buffers of the tensor-core attention. */
export const COOP_ATTN_SCRATCH = { amaxA: "attn_coop_amax_a", amaxB: "attn_coop_amax_b", exps: "attn_coop_exps", q: "attn_coop_q", k: "attn_coop_k", v: "attn_coop_v", dout: "attn_coop_do" } as const;

/** Shape and options of one tensor-core attention call. */
export interface CoopAttnProblem {
  B: number;
  S: number;
  H: number;
  Hkv: number;
  D: number;
  /** Softmax scale (scores are scale·q·k). */
  scale: number;
  causal: boolean;
  blocks: CoopAttnBlocks;
  /** Plain-WGSL cooperative matrices (attention-coop-ops.ts). */
  emulate: boolean;
}

function checkProblem(p: CoopAttnProblem): void {
  if (!coopAttnHeadDimOk(p.D)) throw new Error(`tensor-core attention: head dim must be a multiple of 16 up to 128, got ${p.D}`);
  if (!(p.Hkv >= 1 && p.H % p.Hkv === 0)) throw new Error(`tensor-core attention: H (${p.H}) must be a multiple of Hkv (${p.Hkv})`);
  for (const kind of ["fwd", "dq", "dkv"] as const) {
    const why = coopAttnBlockProblem(kind, p.blocks[kind]);
    if (why) throw new Error(`tensor-core attention: ${kind} block ${coopAttnBlockName(p.blocks[kind])}: ${why}`);
  }
}

/** Padded rows of the packed copies: a multiple of every block dimension of the call. */
function packedRows(p: CoopAttnProblem): number {
  const dims = [p.blocks.fwd, p.blocks.dq, p.blocks.dkv].flatMap((b) => [16 * b.sg, 16 * b.kf]);
  return attentionPackedRows(p.S, Math.max(...dims));
}

/** The max-abs, exponent and pack dispatches of `tensors` (q, k, v[, dout]) into scratch copies. */
function prepare(p: CoopAttnProblem, scratch: CoopScratch, t: { q: [Buf, number]; k: [Buf, number]; v: [Buf, number]; dout?: [Buf, number] }): { launches: Launch[]; exps: Buf; pq: Buf; pk: Buf; pv: Buf; pdo: Buf | null; Sp: number } {
  const { B, S, H, Hkv, D } = p;
  const Sp = packedRows(p);
  const nq = B * S * H * D;
  const nk = B * S * Hkv * D;
  const amaxA = scratch(COOP_ATTN_SCRATCH.amaxA, "u32", COOP_AMAX_WORDS);
  const amaxB = scratch(COOP_ATTN_SCRATCH.amaxB, "u32", COOP_AMAX_WORDS);
  const exps = scratch(COOP_ATTN_SCRATCH.exps, "u32", ATTN_EXP_WORDS);
  const hq = attentionPackedHalves(B, H, Sp, D);
  const hk = attentionPackedHalves(B, Hkv, Sp, D);
  const pq = scratch(COOP_ATTN_SCRATCH.q, "f16", hq);
  const pk = scratch(COOP_ATTN_SCRATCH.k, "f16", hk);
  const pv = scratch(COOP_ATTN_SCRATCH.v, "f16", hk);
  const pdo = t.dout ? scratch(COOP_ATTN_SCRATCH.dout, "f16", hq) : null;
  const [vb, voff] = t.v;
  const [db, doff] = t.dout ?? t.v;
  const launches: (Launch | null)[] = [
    coopAbsMaxLaunch(t.q[0], t.q[1], nq, nq, t.k[0], t.k[1], nk, nk, 1, amaxA),
    coopAbsMaxLaunch(vb, voff, nk, nk, db, doff, t.dout ? nq : 0, nq, 1, amaxB),
    attentionCoopExponentsLaunch(amaxA, amaxB, exps),
    attentionCoopPackLaunch(t.q[0], t.q[1], pq, exps, ATTN_EXP.q, B, S, H, D, Sp),
    attentionCoopPackLaunch(t.k[0], t.k[1], pk, exps, ATTN_EXP.k, B, S, Hkv, D, Sp),
    attentionCoopPackLaunch(vb, voff, pv, exps, ATTN_EXP.v, B, S, Hkv, D, Sp),
    pdo ? attentionCoopPackLaunch(db, doff, pdo, exps, ATTN_EXP.dout, B, S, H, D, Sp) : null,
  ];
  return { launches: launches.filter((l): l is Launch => l !== null), exps, pq, pk, pv, pdo, Sp };
}

/**
 * Launches of the tensor-core attention forward: out [B, S, H, D] and lse [B, H, S] (natural log)
 * from q [B, S, H, D], k, v [B, S, Hkv, D] (all f32, at the given element offsets); scratch buffers
 * from `scratch` ({@link COOP_ATTN_SCRATCH}). Empty when there is nothing to compute.
 * @throws Error for a head dim other than a multiple of 16 up to 128, H not a multiple of Hkv, or a
 *   malformed block.
 */
export function attentionCoopLaunches(q: Buf, qoff: number, k: Buf, koff: number, v: Buf, voff: number, out: Buf, ooff: number, lse: Buf, loff: number, p: CoopAttnProblem, scratch: CoopScratch): Launch[] {
  const { B, S, H, Hkv, D } = p;
  if (B * S * H === 0) return [];
  checkProblem(p);
  const prep = prepare(p, scratch, { q: [q, qoff], k: [k, koff], v: [v, voff] });
  const blk = p.blocks.fwd;
  const nqb = Math.ceil(S / (16 * blk.sg));
  return [
    ...prep.launches,
    {
      kernel: forwardKernel(D, blk, p.causal, p.emulate),
      bufs: [prep.pq, prep.pk, prep.pv, prep.exps, out, lse],
      params: [B, S, H, Hkv, prep.Sp, ooff, loff, nqb, p.scale * Math.LOG2E],
      workgroups: B * H * nqb,
    },
  ];
}

/**
 * Launches of the tensor-core attention backward: dq, dk, dv (overwritten) from q, k, v, the
 * forward's out and lse, and dout (layouts as {@link attentionCoopLaunches}); `delta` is an f32
 * scratch of ≥ B·H·S elements (Δ = rowsum(dout ⊙ out), attention.ts), the other scratches come
 * from `scratch`.
 * @throws Error as {@link attentionCoopLaunches}.
 */
export function attentionCoopBackwardLaunches(
  q: Buf, qoff: number, k: Buf, koff: number, v: Buf, voff: number, out: Buf, ooff: number, lse: Buf, loff: number,
  dout: Buf, dooff: number, dq: Buf, dqoff: number, dk: Buf, dkoff: number, dv: Buf, dvoff: number, delta: Buf,
  p: CoopAttnProblem, scratch: CoopScratch,
): Launch[] {
  const { B, S, H, Hkv, D } = p;
  if (B * S * H === 0) return [];
  checkProblem(p);
  const prep = prepare(p, scratch, { q: [q, qoff], k: [k, koff], v: [v, voff], dout: [dout, dooff] });
  const nqb = Math.ceil(S / (16 * p.blocks.dq.sg));
  const nkb = Math.ceil(S / (16 * p.blocks.dkv.sg));
  const c2 = p.scale * Math.LOG2E;
  return [
    ...prep.launches,
    attentionDeltaLaunch(out, ooff, dout, dooff, delta, B, S, H, D),
    {
      kernel: dqKernel(D, p.blocks.dq, p.causal, p.emulate),
      bufs: [prep.pq, prep.pk, prep.pv, prep.pdo!, prep.exps, lse, delta, dq],
      params: [B, S, H, Hkv, prep.Sp, loff, dqoff, nqb, c2, p.scale],
      workgroups: B * H * nqb,
    },
    {
      kernel: dkvKernel(D, p.blocks.dkv, p.causal, p.emulate),
      bufs: [prep.pq, prep.pk, prep.pv, prep.pdo!, prep.exps, lse, delta, dk, dv],
      params: [B, S, H, Hkv, prep.Sp, loff, dkoff, dvoff, nkb, c2, p.scale],
      workgroups: B * Hkv * nkb,
    },
  ];
}
