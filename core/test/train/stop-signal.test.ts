/**
 * Stop-signal handlers (core/src/train/stop-signal.ts): the first SIGINT/SIGTERM asks for a clean
 * stop; the same request delivered twice within REPEAT_WINDOW_MS still means "stop cleanly"; a later
 * second signal ends the process at once with 128 + signal.
 *
 * Regression: `kill -TERM -- -<pgid>` of `bun run train` (what systemd and Slurm do) reached the
 * script twice (directly, and forwarded by `bun run`), so it exited 143 at once without the
 * checkpoint, losing the steps since the last save.
 */
import { afterEach, describe, expect, spyOn, test } from "bun:test";
import { createStopFlag, installStopHandlers, REPEAT_WINDOW_MS } from "../../src/train/stop-signal.ts";

let remove: (() => void) | null = null;
afterEach(() => {
  remove?.();
  remove = null;
});

describe("stop-signal handlers", () => {
  test("a signal delivered twice at once is one stop request; a later one exits with 128 + signal", async () => {
    const exits: number[] = [];
    const exit = spyOn(process, "exit").mockImplementation(((code?: number) => {
      exits.push(code ?? 0);
    }) as typeof process.exit);
    try {
      const flag = createStopFlag();
      const seen: string[] = [];
      remove = installStopHandlers(flag, (name) => seen.push(name));
      process.emit("SIGTERM");
      process.emit("SIGTERM"); // the forwarded copy
      expect(flag[0]).toBe(15);
      expect(seen).toEqual(["SIGTERM"]);
      expect(exits).toEqual([]);
      await Bun.sleep(REPEAT_WINDOW_MS + 50);
      process.emit("SIGINT");
      expect(exits).toEqual([130]);
    } finally {
      exit.mockRestore();
    }
  });
});
