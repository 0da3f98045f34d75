/**
 * Activation checkpointing (Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost";
 * PyTorch `torch.utils.checkpoint`, DeepSpeed `activation_checkpointing`, HF
 * `gradient_checkpointing`): run a region without keeping its intermediates, and recompute it during
 * backward to get its gradients. Memory per region drops to its inputs and outputs; compute grows
 * by one extra forward of the region.
 *
 * The region function must be deterministic (same inputs → same outputs, e.g. the same MoE routing),
 * since backward differentiates the recomputation. Parameter units entered inside the region fire
 * their forward hooks again during the recomputation, then their backward hooks.
 */
import { withArena } from "./arena.ts";
import { adoptGrad, isGradEnabled, recomputeBackward, recordNode, takeGrad, withGradMode } from "./tape.ts";
import { Tensor } from "./tensor.ts";

/**
 * Run `fn(...inputs)` as a checkpointed region and return its outputs (at least one). In no-grad
 * mode this is just `fn(...inputs)`. Gradients reach `inputs` (and every parameter used inside)
 * through the recomputation when backward passes this point.
 * @throws if `fn` returns no tensor.
 */
export async function checkpoint(fn: (...xs: Tensor[]) => Promise<Tensor[]>, inputs: Tensor[]): Promise<Tensor[]> {
  if (!isGradEnabled()) return fn(...inputs);
  const outs = await withGradMode(false, () => withArena(() => fn(...inputs)));
  if (outs.length === 0) throw new Error("checkpoint: the region returned no tensor");
  const [out, ...extras] = outs as [Tensor, ...Tensor[]];
  recordNode({
    kind: "op",
    name: "checkpoint",
    inputs,
    out,
    extraOuts: extras,
    backward: async (g) => {
      // Own copy of the incoming gradient: the inner sweep may hand it on to an input.
      const g0 = new Tensor(g.be, g.shape, "f32", { buf: g.be.alloc("f32", Math.max(g.numel, 1), "activation"), owns: true });
      g.be.copy(g.view, g0.view, g.numel);
      const seeds = [g0, ...extras.map((t) => takeGrad(t))];
      // Detached aliases of non-parameter inputs collect their gradients in the inner sweep.
      const alias = inputs.map((x) => {
        if (x.param) return x;
        const a = new Tensor(x.be, x.shape, x.dtype, { base: x });
        a.requiresGrad = x.requiresGrad;
        return a;
      });
      const capture = alias.filter((a) => a.requiresGrad && !a.param);
      const got = await recomputeBackward(
        () => fn(...alias),
        (re) => {
          if (re.length !== seeds.length) throw new Error(`checkpoint: recomputation returned ${re.length} tensors, the forward returned ${seeds.length} (the region must be deterministic)`);
          const m = new Map<Tensor, Tensor>();
          re.forEach((t, i) => {
            const s = seeds[i];
            if (!s) return;
            if (t.requiresGrad) m.set(t, s);
            else s.dispose();
          });
          return m;
        },
        capture,
      );
      capture.forEach((a, i) => {
        const gx = got[i];
        if (gx) adoptGrad(inputs[alias.indexOf(a)]!, gx);
      });
    },
  });
  return outs;
}
