/**
 * Frozen parameters (job key `freeze`, core/src/engine/freeze.ts; issue 17, DeepSpeed #4055's
 * scenario): at ZeRO stages 0–3, dense and with MoE expert parallelism (ep_size 2), fp32 and bf16,
 * with weight decay 0.1 on —
 * - frozen parameters are bit-identical to their initial values after training;
 * - every trainable parameter moved;
 * - the optimizer bytes (tag `optim`) and gradient bytes (tag `grad`) of each rank drop by exactly
 *   the frozen units' share of that rank's buffers (recomputed here from the shard rule);
 * - gradient communication drops (no reduce for frozen units);
 * - the frozen runs at stages 0–3 agree with each other (the ZeRO equivalence still holds).
 * Pattern errors (a unit frozen in part, a pattern matching nothing) name the parameters.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { CpuBackend } from "@zeromoe/kernels";
import { awkwardModel, FIXTURE_ENTRY, launch, tinyJob, type TrainArgs, type TrainOut } from "@zeromoe/core/testing";
import { ConfigError, resolveJobConfig } from "@zeromoe/core/config";
import { applyFreeze, freezeMatcher } from "../../src/engine/freeze.ts";
import { createModel } from "../../src/engine/model-factory.ts";

const WORLD = 2;
const STEPS = 3;
const FREEZE = ["model.embed_tokens", "model.layers.0.*", "model.layers.1.block_sparse_moe.experts.3.*"];
const MODEL = { ...awkwardModel(), num_local_experts: 4 };
/** Units of MODEL: name, kind, numel, expert index. */
const UNITS: { name: string; numel: number; expert?: number }[] = [
  { name: "embed", numel: 6425 },
  { name: "layers.0", numel: 1350 },
  ...[0, 1, 2, 3].map((e) => ({ name: `layers.0.experts.${e}`, numel: 525, expert: e })),
  { name: "layers.1", numel: 1350 },
  ...[0, 1, 2, 3].map((e) => ({ name: `layers.1.experts.${e}`, numel: 525, expert: e })),
  { name: "head", numel: 6450 },
];
const FROZEN_UNITS = new Set(["embed", "layers.0", "layers.0.experts.0", "layers.0.experts.1", "layers.0.experts.2", "layers.0.experts.3", "layers.1.experts.3"]);

interface Case { stage: number; ep: number; dtype: "f32" | "bf16" }
const CASES: Case[] = [
  ...[0, 1, 2, 3].map((stage) => ({ stage, ep: 1, dtype: "f32" as const })),
  ...[0, 1, 2, 3].map((stage) => ({ stage, ep: 2, dtype: "f32" as const })),
  { stage: 2, ep: 2, dtype: "bf16" },
  { stage: 3, ep: 1, dtype: "bf16" },
];

const job = (c: Case, freeze: string[]): Record<string, unknown> =>
  tinyJob({
    model: MODEL,
    zero_optimization: { stage: c.stage, stage3_param_persistence_threshold: 0, reduce_bucket_size: 3000 },
    moe: { ep_size: c.ep },
    ...(c.dtype === "bf16" ? { bf16: { enabled: true } } : {}),
    optimizer: { type: "AdamW", params: { lr: 1e-2, weight_decay: 0.1 } },
    freeze,
  });

/** Bytes rank `rank` holds for `unit` in a buffer of `perElem` bytes per element sharded (or not) over its group. */
function heldBytes(u: { numel: number; expert?: number }, c: Case, rank: number, sharded: boolean, perElem: number): number {
  const experts = 4;
  if (u.expert !== undefined && c.ep > 1 && Math.floor(u.expert / (experts / c.ep)) !== rank % c.ep) return 0; // another EP rank's expert
  const g = u.expert !== undefined ? WORLD / c.ep : WORLD;
  return (sharded ? Math.ceil(u.numel / g) : u.numel) * perElem;
}

let init: Record<string, number[]>;
let full: TrainOut[][] = [];
let frozen: TrainOut[][] = [];

beforeAll(async () => {
  const runs: TrainArgs[] = [{ job: job(CASES[0]!, []), steps: 0 }];
  for (const c of CASES) runs.push({ job: job(c, []), steps: STEPS }, { job: job(c, FREEZE), steps: STEPS });
  const res = await launch<TrainOut[]>({ worldSize: WORLD, entry: FIXTURE_ENTRY, args: { runs } });
  init = res[0]![0]!.params;
  full = CASES.map((_, i) => res.map((r) => r[1 + 2 * i]!));
  frozen = CASES.map((_, i) => res.map((r) => r[2 + 2 * i]!));
}, 300_000);

/** Every rank's gathered parameters (under expert parallelism each rank returns its own experts). */
const allParams = (rs: TrainOut[]): Record<string, number[]> => Object.assign({}, ...rs.map((r) => r.params));
const isFrozen = (name: string): boolean => FREEZE.some((p) => freezeMatcher(p)(name));
const label = (c: Case): string => `stage ${c.stage}, ep_size ${c.ep}, ${c.dtype}`;

describe("freeze", () => {
  CASES.forEach((c, i) => {
    test(`${label(c)}: frozen tensors bit-identical, trainable ones moved`, () => {
      const p = allParams(frozen[i]!);
      const names = Object.keys(init);
      expect(names.filter(isFrozen).length).toBe(1 + 7 + 4 * 3 + 3);
      for (const n of names) {
        if (c.dtype === "bf16") continue; // init is the f32 run's: compare bf16 runs below
        if (isFrozen(n)) expect(p[n]).toEqual(init[n]!);
        else expect(p[n]).not.toEqual(init[n]!);
      }
      expect(frozen[i]![0]!.losses[STEPS - 1]!).toBeLessThan(frozen[i]![0]!.losses[0]!);
      expect(frozen[i]![0]!.logs.join("\n")).toContain("freeze: 7 units frozen (10400 of 19775 parameters, 52.6%)");
    });

    test(`${label(c)}: optimizer and gradient bytes drop by the frozen units' share`, () => {
      const mixed = c.dtype !== "f32";
      const pb = mixed ? 2 : 4;
      for (let r = 0; r < WORLD; r++) {
        let optSaved = 0;
        let gradSaved = 0;
        for (const u of UNITS.filter((x) => FROZEN_UNITS.has(x.name))) {
          optSaved += heldBytes(u, c, r, c.stage >= 1, mixed ? 12 : 8);
          gradSaved += heldBytes(u, c, r, c.stage >= 2, pb);
        }
        expect(optSaved).toBeGreaterThan(0);
        const f = frozen[i]![r]!.memory.current;
        const a = full[i]![r]!.memory.current;
        expect(a.optim! - f.optim!).toBe(optSaved);
        expect(a.grad! - (f.grad ?? 0)).toBe(gradSaved);
        // the parameters themselves stay (frozen weights are still used)
        expect(f.param).toBe(a.param!);
      }
    });

    test(`${label(c)}: less gradient communication`, () => {
      const key = c.stage === 0 ? "all_reduce" : "reduce_scatter";
      const f = frozen[i]![0]!.comm;
      const a = full[i]![0]!.comm;
      if (c.ep === 2 && c.stage === 0) expect(f.all_reduce!).toBeLessThan(a.all_reduce!);
      else expect(f[key]!).toBeLessThan(a[key]!);
      if (c.stage === 1 || c.stage === 2) expect(f.all_gather ?? 0).toBeLessThan(a.all_gather!);
    });
  });

  test("stages 0-3 agree with frozen units (fp32, ep_size 1 and 2)", () => {
    for (const ep of [1, 2]) {
      const idx = CASES.map((c, i) => (c.ep === ep && c.dtype === "f32" ? i : -1)).filter((i) => i >= 0);
      for (const i of idx.slice(1)) {
        expect(frozen[i]![0]!.losses).toEqual(frozen[idx[0]!]![0]!.losses);
        expect(allParams(frozen[i]!)).toEqual(allParams(frozen[idx[0]!]!));
      }
    }
  });

  test("bf16: frozen tensors equal the bf16 run's initial values (untouched over the run)", () => {
    for (const i of CASES.map((c, i) => (c.dtype === "bf16" ? i : -1)).filter((i) => i >= 0)) {
      const f = allParams(frozen[i]!);
      // initial bf16 values = the f32 init rounded to bf16; frozen ones must still be exactly that
      for (const n of Object.keys(init).filter(isFrozen)) {
        const want = Array.from(init[n]!, (x) => new Float32Array(new Uint32Array([(new Uint32Array(new Float32Array([x]).buffer)[0]! + 0x7fff + ((new Uint32Array(new Float32Array([x]).buffer)[0]! >>> 16) & 1)) & 0xffff0000]).buffer)[0]!);
        expect(f[n]).toEqual(want);
      }
    }
  });
});

describe("freeze patterns", () => {
  const units = () => {
    const { config } = resolveJobConfig(tinyJob({ model: MODEL }));
    return createModel(new CpuBackend(), config.model, { dtype: "f32", seed: 1, allocate: false }).units.units;
  };

  test("globs and module names", () => {
    expect(freezeMatcher("model.layers.0.*")("model.layers.0.self_attn.q_proj.weight")).toBe(true);
    expect(freezeMatcher("model.layers.0.*")("model.layers.10.self_attn.q_proj.weight")).toBe(false);
    expect(freezeMatcher("model.layers.1")("model.layers.1.input_layernorm.weight")).toBe(true);
    expect(freezeMatcher("model.layers.1")("model.layers.10.input_layernorm.weight")).toBe(false);
    expect(freezeMatcher("*.experts.?.w1.weight")("model.layers.1.block_sparse_moe.experts.3.w1.weight")).toBe(true);
    const r = applyFreeze(units(), ["*.experts.*"]);
    expect(r.units.length).toBe(8);
    expect(r.elements).toBe(8 * 525);
  });

  test("a unit frozen only in part is refused, naming both sides", () => {
    let err: unknown;
    try {
      applyFreeze(units(), ["lm_head.weight"]);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toContain('freeze: the patterns freeze lm_head.weight but not model.norm.weight of the same unit "head"');
  });

  test("a pattern matching nothing is refused, naming it", () => {
    expect(() => applyFreeze(units(), ["model.embed_tokens", "model.embeddings.*"])).toThrow('freeze[1]: "model.embeddings.*" matches no parameter of the model');
  });

  test("the job key is checked by the schema", () => {
    expect(() => resolveJobConfig(tinyJob({ freeze: "model.embed_tokens" }))).toThrow(/freeze/);
    expect(resolveJobConfig(tinyJob({})).config.freeze).toEqual([]);
  });
});
