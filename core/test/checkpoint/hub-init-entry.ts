/** Rank entry for hub-dir.test.ts: builds an engine for `job`, initialises it from the Hub
 * checkpoint `path` (initFromHub), and returns every parameter this rank can gather. */
import { CpuBackend } from "@zeromoe/kernels";
import type { Communicator } from "../../src/comm/communicator.ts";
import { initFromHub } from "../../src/checkpoint/hub-dir.ts";
import { resolveJobConfig } from "../../src/config/index.ts";
import { Engine } from "../../src/engine/engine.ts";
import { pluginsForJob } from "../../src/engine/plugin-loader.ts";
import { gatherFullParams } from "../../src/testing/gather-full-params.ts";

export default async function main(comm: Communicator, _rank: number, _ws: number, args: { job: Record<string, unknown>; path: string }): Promise<{ params: Record<string, number[]>; elements: number; warning: string | null }> {
  const { config } = resolveJobConfig({ ...args.job, world_size: comm.worldSize });
  const engine = await Engine.create({ config, comm, backend: new CpuBackend(), plugins: await pluginsForJob(config), log: () => {} });
  const r = await initFromHub(engine, args.path);
  return { params: await gatherFullParams(engine, comm), elements: r.elements, warning: r.warning };
}
