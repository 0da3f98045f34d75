/** Conformance: the tiled cross-entropy steps (crossEntropyTileStats over vocabulary tiles, then
 * crossEntropyTileFinish, then crossEntropyTileBackward per tile) against the whole-row float64
 * reference, at awkward tile widths, with ignored rows, z-loss on and off, and a row whose logits
 * would overflow exp without the running max. */

import { refTiledCrossEntropy } from "../reference/tiled-cross-entropy.ts";
import { Rng } from "./harness.ts";
import type { T } from "./index.ts";

/** Registers the tiled cross-entropy tests. */
export function tiledCrossEntropyTests(t: T): void {
  t("crossEntropyTile{Stats,Finish,Backward}: tiles of any width give the whole row's loss and gradient", async (c) => {
    const r = new Rng(830);
    const cases: [number, number, number, number][] = [
      // rows, vocab, tile width, z-loss coefficient
      [1, 1, 1, 0],
      [3, 7, 7, 0],
      [7, 13, 5, 1e-2],
      [5, 101, 16, 0],
      [6, 97, 97, 3e-1],
      [3, 4099, 2053, 1e-3], // ≥ 2048 columns: the 256-invocation workgroups
      [c.large(37, 5), c.large(1031, 17), c.large(256, 7), 1e-4],
    ];
    for (const [rows, vocab, tw, z] of cases) {
      const logits = r.f32(rows * vocab, -6, 6);
      const targets = r.i32(rows, 0, vocab);
      if (rows > 2) targets[1] = -100;
      if (rows > 3) for (let j = 0; j < vocab; j++) logits[2 * vocab + j] = logits[2 * vocab + j]! * 10 + 100; // exp overflows without max subtraction
      if (rows > 4) targets[3] = vocab - 1; // target in the last (partial) tile
      const g = 1.75;
      const gradScale = 0.37;
      const want = refTiledCrossEntropy(logits, targets, rows, vocab, -100, z, g, gradScale);
      const tv = c.ints(targets);
      const stats = c.output(3 * rows);
      const tileOf = (v0: number, w: number): Float32Array => {
        const a = new Float32Array(rows * w);
        for (let i = 0; i < rows; i++) for (let j = 0; j < w; j++) a[i * w + j] = logits[i * vocab + v0 + j]!;
        return a;
      };
      for (let v0 = 0; v0 < vocab; v0 += tw) {
        const w = Math.min(tw, vocab - v0);
        c.be.crossEntropyTileStats(c.input(tileOf(v0, w)), tv, stats.view, rows, w, v0, -100, v0 === 0);
      }
      await stats.checkGuards();
      const lse = c.output(rows);
      const losses = c.output(rows);
      c.be.crossEntropyTileFinish(stats.view, tv, lse.view, losses.view, rows, vocab, -100, z);
      const label = `[${rows},${vocab}] tiles of ${tw}, z ${z}`;
      c.close(`lse ${label}`, await lse.read(), want.lse, { factor: 4 });
      // loss = lse − x_t + z·lse²: cancellation relative to |lse| + |x_t| + z·lse² → mag
      c.close(`losses ${label}`, await losses.read(), want.losses, { factor: 4, mag: Array.from(want.lse, (l, i) => Math.abs(l) + Math.abs(logits[i * vocab + Math.max(0, targets[i]!)]!) + z * l * l) });
      await lse.checkGuards();
      await losses.checkGuards();
      const gv = c.input(Float32Array.of(g));
      const got = new Float64Array(rows * vocab);
      for (let v0 = 0; v0 < vocab; v0 += tw) {
        const w = Math.min(tw, vocab - v0);
        const tile = c.output(rows * w, "f32", tileOf(v0, w));
        c.be.crossEntropyTileBackward(tile.view, tv, lse.view, gv, rows, w, v0, -100, gradScale, z);
        const d = await tile.read();
        for (let i = 0; i < rows; i++) for (let j = 0; j < w; j++) got[i * vocab + v0 + j] = d[i * w + j]!;
        await tile.checkGuards();
      }
      c.close(`dlogits ${label}`, got, want.dlogits, { factor: 4, normwise: true });
    }
  });
}
