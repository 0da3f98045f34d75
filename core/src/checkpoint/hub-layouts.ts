/**
 * Where a model parameter's values sit in a Hugging Face checkpoint, in either weight layout:
 *
 * - the Hub layout `save_pretrained` writes (one tensor per expert matrix): the parameter's own name;
 * - Transformers 5's fused in-memory layout (`model.state_dict()` of a Transformers ≥ 5 MoE model):
 *   per layer `mlp.experts.gate_up_proj` [E, 2·I, H] (expert e's rows 0..I−1 = gate_proj / Mixtral
 *   w1, rows I..2I−1 = up_proj / w3) and `mlp.experts.down_proj` [E, H, I] (= down_proj / w2), and
 *   Mixtral's router as `mlp.gate.weight` instead of `block_sparse_moe.gate.weight`.
 *
 * Every alternative is one contiguous element range of the stored tensor, so a rank reads only its
 * own part of it (safetensors.ts `readTensorElements`). Source: Transformers 5.17
 * `conversion_mapping.py` and the fixtures' `state_dict.safetensors` (core/test/fixtures/README.md).
 */

/** A parameter's values: elements [offset, offset + numel) of tensor `tensor`, whose stored shape
 * must be `shape`. */
export interface TensorSource {
  tensor: string;
  offset: number;
  /** The shape the stored tensor must have. */
  shape: number[];
}

/** Stored shapes by name (a checkpoint's index). */
export type ShapeIndex = ReadonlyMap<string, readonly number[]>;

/**
 * The source of parameter `name` of shape `shape` in `index`: its own name when stored, else the
 * fused layout's range. Null when neither is stored. A fused tensor of an unexpected shape is still
 * returned (with the shape it must have) so the caller reports both shapes.
 */
export function findSource(name: string, shape: readonly number[], index: ShapeIndex): TensorSource | null {
  if (index.has(name)) return { tensor: name, offset: 0, shape: [...shape] };
  let m = /^model\.layers\.(\d+)\.block_sparse_moe\.gate\.weight$/.exec(name);
  if (m) {
    const t = `model.layers.${m[1]}.mlp.gate.weight`;
    return index.has(t) ? { tensor: t, offset: 0, shape: [...shape] } : null;
  }
  // Mixtral experts.{e}.w1/w3/w2, Qwen/DeepSeek experts.{e}.gate_proj/up_proj/down_proj
  m = /^(model\.layers\.\d+)\.(?:block_sparse_moe|mlp)\.experts\.(\d+)\.(w1|w3|w2|gate_proj|up_proj|down_proj)\.weight$/.exec(name);
  if (!m || shape.length !== 2) return null;
  const e = Number(m[2]);
  const which = m[3]!;
  const down = which === "w2" || which === "down_proj";
  const tensor = `${m[1]}.mlp.experts.${down ? "down_proj" : "gate_up_proj"}`;
  const stored = index.get(tensor);
  if (!stored) return null;
  const E = stored[0] ?? 0;
  const [r, c] = shape as [number, number];
  if (down) return { tensor, offset: e * r * c, shape: [E, r, c] };
  const up = which === "w3" || which === "up_proj";
  return { tensor, offset: e * 2 * r * c + (up ? r * c : 0), shape: [E, 2 * r, c] };
}
