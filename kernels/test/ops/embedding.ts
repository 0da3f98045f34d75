/** Conformance: embedding (+backward) and fused cross-entropy with ignoreIndex. */

import { refCrossEntropy, refEmbedding, refEmbeddingBackward } from "../reference/embedding.ts";
import { Rng } from "./harness.ts";
import type { T } from "./index.ts";

/** Registers the embedding and loss tests. */
export function embeddingTests(t: T): void {
  t("embedding lookup (out-of-range ids give zero rows) and backward (repeated ids accumulate)", async (c) => {
    const r = new Rng(800);
    for (const [vocab, dim, n] of [[1, 1, 1], [11, 7, 13], [37, 64, 5], [c.large(257, 3), c.large(67, 2), c.large(129, 2)]] as [number, number, number][]) {
      const table = r.f32(vocab * dim);
      const ids = r.i32(n, 0, vocab);
      if (n > 2) {
        ids[1] = ids[0]!; // repeated id
        ids[2] = vocab; // out of range → zeros
      }
      const tv = c.alloc("f32", vocab * dim); // table exactly vocab rows (no guard: vocab is inferred from its length)
      c.be.write({ buf: tv, off: 0 }, table);
      const out = c.output(n * dim);
      c.be.embedding({ buf: tv, off: 0 }, c.ints(ids), out.view, n, dim);
      c.exact(`embedding v=${vocab} d=${dim} n=${n}`, await out.read(), refEmbedding(table, vocab, ids, dim));
      await out.checkGuards();
      const dout = r.f32(n * dim);
      const dt0 = r.f32(vocab * dim);
      const dtv = c.alloc("f32", vocab * dim);
      c.be.write({ buf: dtv, off: 0 }, dt0);
      const validIds = Int32Array.from(ids, (v) => (v >= vocab ? 0 : v));
      c.be.embeddingBackward(c.input(dout), c.ints(validIds), { buf: dtv, off: 0 }, n, dim);
      c.close(`embeddingBackward v=${vocab} d=${dim} n=${n}`, await c.read({ buf: dtv, off: 0 }, vocab * dim), refEmbeddingBackward(dout, validIds, dt0, vocab, dim), { normwise: true, factor: 2 });
    }
  });

  t("crossEntropy: losses and scaled dlogits, ignoreIndex rows give 0", async (c) => {
    const r = new Rng(810);
    for (const [rows, vocab] of [[1, 1], [1, 5], [7, 13], [5, 64], [c.large(33, 3), c.large(1031, 5)]] as [number, number][]) {
      const logits = r.f32(rows * vocab, -6, 6);
      const targets = r.i32(rows, 0, vocab);
      if (rows > 2) targets[1] = -100;
      if (rows > 3) for (let j = 0; j < vocab; j++) logits[2 * vocab + j] = logits[2 * vocab + j]! * 10 + 100; // exp overflows without max subtraction
      const gradScale = 0.37;
      const { losses: wl, dlogits: wd } = refCrossEntropy(logits, targets, rows, vocab, -100, gradScale);
      const losses = c.output(rows);
      const dl = c.output(rows * vocab);
      c.be.crossEntropy(c.input(logits), c.ints(targets), losses.view, dl.view, rows, vocab, -100, gradScale);
      // loss = lse − x_t: cancellation relative to |lse| + |x_t| → mag
      c.close(`crossEntropy losses [${rows},${vocab}]`, await losses.read(), wl, { factor: 4, mag: Array.from(wl, (l, i) => {
        const xt = logits[i * vocab + Math.max(0, targets[i]!)]!;
        return Math.abs(l + xt) + Math.abs(xt); // |lse| + |x_t|
      }) });
      c.close(`crossEntropy dlogits [${rows},${vocab}]`, await dl.read(), wd, { factor: 4, normwise: true });
      await losses.checkGuards();
      await dl.checkGuards();
    }
  });
}
