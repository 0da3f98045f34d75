/** Full parameters of a (possibly sharded) engine, for comparing runs in tests. Exported as
 * `@zeromoe/core/testing`. */
import type { Communicator } from "../comm/communicator.ts";
import type { Engine } from "../engine/engine.ts";

/**
 * Every parameter of `engine`'s model as f32 values by name (`number[]` of the parameter's numel,
 * row-major): a unit's shard is cast to f32 and all_gathered over the unit's group where its
 * parameters are sharded (padding dropped). Collective: every rank of the world calls it, after the
 * same steps. Units this rank does not hold (expert parallelism) are absent.
 */
export async function gatherFullParams(engine: Engine, comm: Communicator): Promise<Record<string, number[]>> {
  const be = engine.env.be;
  const params: Record<string, number[]> = {};
  for (const st of engine.states) {
    const u = st.unit;
    const sharded = st.plan.params === "sharded";
    const buf = sharded ? st.paramStorage().buf : u.data!; // paramStorage: also an offloaded shard
    const n = sharded ? st.plan.shardSize : u.numel;
    const f32 = be.alloc("f32", Math.max(1, n), "other");
    if (n > 0) {
      if (buf.dtype === "f32") be.copy({ buf, off: 0 }, { buf: f32, off: 0 }, n);
      else be.cast({ buf, off: 0 }, { buf: f32, off: 0 }, n);
    }
    const host = Float32Array.from((await be.read({ buf: f32, off: 0 }, n)) as Float32Array);
    be.free(f32);
    const full = sharded ? (await comm.allGather(host, undefined, { group: st.plan.group })).subarray(0, u.numel) : host;
    for (const p of u.params) params[p.name] = Array.from(full.subarray(p.offset, p.offset + p.numel));
  }
  return params;
}
