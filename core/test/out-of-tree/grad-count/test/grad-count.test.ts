/**
 * Tests of zeromoe-plugin-grad-count with the public test kit `@zeromoe/core/testing`: two ranks of
 * data parallelism train the same tiny dense job with and without the plugin (loaded by path, as a
 * job's `plugins` list would name it); losses must be bit-identical, the plugin must own a wrapper
 * of `reduce`, and rank 0 must log one count line per step.
 */
import { describe, expect, test } from "bun:test";
import { resolve } from "node:path";
import { FIXTURE_ENTRY, launch, tinyJob, tinyLlamaModel, type TrainArgs, type TrainOut } from "@zeromoe/core/testing";

const PLUGIN = resolve(import.meta.dir, "../src/index.ts");

describe("grad-count", () => {
  test("training is unchanged; rank 0 logs the gradients counted per step", async () => {
    const job = (plugins: string[]) => tinyJob({ model: tinyLlamaModel(), gradient_accumulation_steps: 2, plugins });
    const runs: TrainArgs[] = [{ job: job([PLUGIN]), steps: 3 }, { job: job([]), steps: 3 }];
    const [rank0] = await launch<TrainOut[], { runs: TrainArgs[] }>({ worldSize: 2, entry: FIXTURE_ENTRY, args: { runs } });
    const [withPlugin, without] = rank0!;
    expect(withPlugin!.losses).toEqual(without!.losses);
    expect(withPlugin!.losses.every((l) => Number.isFinite(l) && l > 0)).toBe(true);
    expect(withPlugin!.owners.reduce).toBe("core+grad-count");
    const lines = withPlugin!.logs.filter((l) => l.startsWith("grad-count: "));
    expect(lines.length).toBe(3);
    // every unit's gradient is ready once per micro-batch: units × 2 micro-batches per step
    const n = Number(/^grad-count: (\d+) unit gradients over 2 micro-batches$/.exec(lines[0]!)?.[1]);
    expect(n).toBeGreaterThan(0);
    expect(n % 2).toBe(0);
    expect(lines.every((l) => l === lines[0])).toBe(true);
  }, 300_000);
});
