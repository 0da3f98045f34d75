/**
 * Frozen parameters (the job's `freeze` key): which units train.
 *
 * `freeze` is a list of Hugging Face parameter-name patterns. A pattern matches a parameter when
 * - it is a glob that matches the whole name: `*` matches any run of characters (dots included),
 *   `?` one character, everything else itself (e.g. `model.layers.0.*`, `*.self_attn.*`,
 *   `model.embed_tokens.weight`); or
 * - it names a module the parameter belongs to: the name starts with `pattern.`
 *   (`model.layers.1` freezes every parameter of layer 1, as `requires_grad_(False)` on the module).
 *
 * Freezing acts on units (nn/unit.ts), the granules the engine shards, reduces and steps: a frozen
 * unit (`trainable = false`) gets no gradient buffer, no optimizer state (no master, m, v), no weight
 * decay, no gradient reduction and no parameter all_gather after the step, at every ZeRO stage and
 * for expert units alike (engine/unit-state.ts, engine/optimizer.ts). A pattern set that freezes
 * only some parameters of a unit is refused, naming the unit's other parameters, because the unit's
 * flat gradient and optimizer buffers cannot leave part of it out; a pattern that matches nothing is
 * refused too (a typo would otherwise train everything). The DeepSpeed scenario is issue #4055
 * (frozen embeddings under ZeRO).
 */
import { ConfigError, type ConfigIssue } from "../config/errors.ts";
import type { Unit } from "../nn/unit.ts";

/** A compiled `freeze` pattern: matches a parameter name (see the module comment). */
export function freezeMatcher(pattern: string): (name: string) => boolean {
  const re = new RegExp("^" + pattern.split("").map((c) => (c === "*" ? ".*" : c === "?" ? "." : c.replace(/[.+^${}()|[\]\\]/g, "\\$&"))).join("") + "$");
  return (name) => re.test(name) || name.startsWith(pattern + ".");
}

/** What {@link applyFreeze} froze. */
export interface FreezeResult {
  /** Names of the frozen units, model order. */
  units: string[];
  /** Elements frozen (sum of the frozen units' numel). */
  elements: number;
}

/**
 * Mark every unit all of whose parameters match a `freeze` pattern as not trainable
 * (`unit.trainable = false`); the others stay trainable.
 * @param units the model's units (all of them, also those other ranks hold, so every rank decides alike)
 * @param patterns the job's `freeze` list
 * @throws ConfigError (path `freeze[i]`) for a pattern that matches no parameter, and (path `freeze`)
 *   for a unit only part of whose parameters match, naming the matched and unmatched ones.
 */
export function applyFreeze(units: readonly Unit[], patterns: readonly string[]): FreezeResult {
  const out: FreezeResult = { units: [], elements: 0 };
  if (patterns.length === 0) return out;
  const matchers = patterns.map(freezeMatcher);
  const used = new Array<boolean>(patterns.length).fill(false);
  const issues: ConfigIssue[] = [];
  for (const u of units) {
    const hit = u.params.map((p) => {
      let any = false;
      matchers.forEach((m, i) => {
        if (m(p.name)) {
          used[i] = true;
          any = true;
        }
      });
      return any;
    });
    const n = hit.filter(Boolean).length;
    if (n === 0) continue;
    if (n < u.params.length) {
      const frozen = u.params.filter((_, i) => hit[i]).map((p) => p.name);
      const rest = u.params.filter((_, i) => !hit[i]).map((p) => p.name);
      issues.push({
        path: "freeze",
        message: `the patterns freeze ${frozen.join(", ")} but not ${rest.join(", ")} of the same unit "${u.name}"; a unit (the granule ZeroMoE shards and steps) is frozen whole: freeze those too or leave the unit trainable`,
      });
      continue;
    }
    u.trainable = false;
    out.units.push(u.name);
    out.elements += u.numel;
  }
  used.forEach((ok, i) => {
    if (!ok) issues.push({ path: `freeze[${i}]`, message: `"${patterns[i]}" matches no parameter of the model (names are Hugging Face's, e.g. "${units[0]?.params[0]?.name ?? "model.embed_tokens.weight"}")` });
  });
  if (issues.length > 0) throw new ConfigError(issues, "invalid job (freeze)");
  return out;
}
