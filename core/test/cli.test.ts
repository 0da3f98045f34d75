import { describe, expect, test } from "bun:test";
import { loadTrainJob, parseTrainArgs, trainArgsToOverrides, UsageError } from "../src/cli/args.ts";
import { formatDuration, formatValue, Progress } from "../src/cli/progress.ts";

describe("parseTrainArgs", () => {
  test("every option, both --name value and --name=value forms", () => {
    const a = parseTrainArgs(["--config", "j.json", "--deepspeed=ds.json", "--steps", "17", "--world-size=3", "--seed", "4294967295", "--summary", "s.json", "--resume", "ckpt/step7", "--backend", "webgpu", "--init-from", "m.safetensors"]);
    expect(a).toEqual({ help: false, config: "j.json", deepspeed: "ds.json", steps: 17, worldSize: 3, seed: 4294967295, summary: "s.json", resume: "ckpt/step7", backend: "webgpu", initFrom: "m.safetensors" });
    expect(trainArgsToOverrides(a)).toEqual({ steps: 17, world_size: 3, seed: 4294967295, backend: "webgpu" });
    expect(parseTrainArgs([])).toEqual({ help: false } as never);
    expect(parseTrainArgs(["--set", "steps=3", "--set=optimizer.params.lr=1e-4"]).sets?.map((s) => s.path.join("."))).toEqual(["steps", "optimizer.params.lr"]);
    expect(parseTrainArgs(["-h"]).help).toBe(true);
  });
  test("loadTrainJob: default job with command-line overrides", async () => {
    const { config } = await loadTrainJob(parseTrainArgs(["--steps", "3", "--world-size", "2", "--backend", "cpu"]));
    expect([config.steps, config.world_size, config.backend, config.train_batch_size]).toEqual([3, 2, "cpu", 2 * config.train_micro_batch_size_per_gpu]);
  });
  const bad: [string[], RegExp][] = [
    [["--step", "3"], /unknown option "--step"; did you mean --steps\?/],
    [["--steps"], /argument missing/],
    [["extra"], /unexpected argument: extra/],
    [["--steps", "2.5"], /--steps: expected an integer, got "2.5"/],
    [["--world-size", "0"], /--world-size: expected an integer in \[1, 65536\], got 0/],
    [["--seed=-3"], /--seed: expected an integer in \[0, 4294967295\]/],
    [["--seed", "-3"], /--seed: expected an integer in \[0, 4294967295\], got -3/],
    [["--steps", "-5"], /--steps: expected an integer in \[0, 2147483647\], got -5/],
    [["--world-size", "-1"], /--world-size: expected an integer in \[1, 65536\], got -1/],
    [["--world-size", "-1.5"], /--world-size: expected an integer, got "-1.5"/],
    [["--backend", "webgpus"], /--backend: expected auto, webgpu or cpu, got "webgpus"; did you mean webgpu\?/],
    [["--config="], /--config: expected a path/],
  ];
  for (const [argv, re] of bad) {
    test(`usage error: ${argv.join(" ")}`, () => {
      let err: unknown;
      try {
        parseTrainArgs(argv);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(UsageError);
      expect((err as Error).message).toMatch(re);
      expect((err as Error).message).toContain("usage: bun run train");
    });
  }
});

describe("Progress", () => {
  const sink = (isTTY: boolean) => {
    const out: string[] = [];
    return { out, s: { write: (x: string) => out.push(x), isTTY, columns: 120 } };
  };
  test("plain mode prints every N steps and the last one, no control characters", () => {
    let t = 0;
    const { out, s } = sink(false);
    const p = new Progress({ total: 23, label: "train", printEvery: 10, sink: s, now: () => t });
    for (let i = 1; i <= 23; i++) {
      t += 500;
      p.update(i, { loss: 3.14159 - i * 0.01, lr: 0.0003 });
    }
    p.done();
    expect(out.length).toBe(3); // steps 10, 20, 23
    expect(out[0]).toBe("train step 10/23  2 it/s  eta 6.5s  loss 3.042  lr 3.00e-4\n");
    expect(out.join("")).not.toMatch(/\x1b|\r/);
  });
  test("tty mode redraws one line with a bar, and log() prints above it", () => {
    let t = 0;
    const { out, s } = sink(true);
    const p = new Progress({ total: 4, sink: s, tty: true, now: () => t });
    t = 1000;
    p.update(2, { loss: 1.5 });
    p.log("eval loss 1.7");
    p.done();
    expect(out[0].startsWith("\r\x1b[2K")).toBe(true);
    expect(out[0]).toContain("2/4");
    expect(out[0]).toMatch(/█+░+/);
    expect(out[1]).toMatch(/^\r\x1b\[2Keval loss 1\.7\n/);
    expect(out[2].endsWith("\n")).toBe(true);
  });
  test("formatting helpers", () => {
    expect(formatDuration(3725)).toBe("1h02m");
    expect(formatDuration(187)).toBe("3m07s");
    expect(formatDuration(Infinity)).toBe("?");
    expect(formatValue(0.000123)).toBe("1.23e-4");
    expect(formatValue(2.718281)).toBe("2.718");
    expect(formatValue(42)).toBe("42");
  });
});
