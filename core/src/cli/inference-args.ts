/**
 * Option parsing shared by `bun run generate` and `bun run eval`: `--name value` or
 * `--name=value`, each option at most once, numbers checked against their range. Mistakes throw
 * {@link UsageError} naming the option and what was expected (the CLIs exit 2).
 */
import { UsageError } from "./model-source.ts";
import { quoteUntrusted } from "../config/quote-untrusted.ts";
import { suggestBackend } from "../config/backend-name.ts";
import { suggest } from "../config/errors.ts";

/** How one option is read. */
export type OptionSpec =
  | { kind: "string" }
  | { kind: "flag" }
  | { kind: "int"; min: number }
  | { kind: "number"; min: number; max?: number; exclusiveMin?: boolean }
  | { kind: "enum"; values: readonly string[] };

/**
 * Parse `argv` (no positional arguments) by `specs` (option name with its dashes → spec).
 * Returns option name (without dashes) → value (string, number, or true for a flag).
 * @throws UsageError for an unknown or repeated option, a missing value, or a value out of range.
 */
export function parseOptions(argv: readonly string[], specs: Readonly<Record<string, OptionSpec>>, usage: string): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const eq = a.indexOf("=");
    const name = a.startsWith("--") && eq > 0 ? a.slice(0, eq) : a;
    const spec = specs[name];
    if (!spec) throw new UsageError(`${a.startsWith("-") ? `unknown option ${quoteUntrusted(name)}` : `unexpected argument ${quoteUntrusted(a)}`}\n${usage}`);
    const key = name.replace(/^--/, "");
    if (key in out) throw new UsageError(`${name} given twice\n${usage}`);
    if (spec.kind === "flag") {
      if (eq > 0 && a.startsWith("--")) throw new UsageError(`${name} takes no value\n${usage}`);
      out[key] = true;
      continue;
    }
    const raw = eq > 0 && a.startsWith("--") ? a.slice(eq + 1) : argv[++i];
    if (raw === undefined) throw new UsageError(`${name} needs a value\n${usage}`);
    if (spec.kind === "string") {
      if (raw === "" && name !== "--prompt") throw new UsageError(`${name}: expected a non-empty value\n${usage}`);
      out[key] = raw;
    } else if (spec.kind === "enum") {
      if (!spec.values.includes(raw)) {
        const near = name === "--backend" ? suggestBackend(raw) : suggest(raw, spec.values);
        throw new UsageError(`${name}: expected ${spec.values.join(", ")}, got ${quoteUntrusted(raw)}${near ? `; did you mean ${near}?${name === "--backend" && near === "webgpu" ? " (the GPU backend)" : ""}` : ""}\n${usage}`);
      }
      out[key] = raw;
    } else {
      const v = Number(raw);
      const int = spec.kind === "int";
      const okRange = spec.kind === "int" ? v >= spec.min : (spec.exclusiveMin ? v > spec.min : v >= spec.min) && (spec.max === undefined || v <= spec.max);
      if (raw.trim() === "" || !Number.isFinite(v) || (int && !Number.isInteger(v)) || !okRange) {
        const range = spec.kind === "int" ? `an integer ≥ ${spec.min}` : `a number ${spec.exclusiveMin ? ">" : "≥"} ${spec.min}${spec.max !== undefined ? ` and ≤ ${spec.max}` : ""}`;
        throw new UsageError(`${name}: expected ${range}, got ${quoteUntrusted(raw)}\n${usage}`);
      }
      out[key] = v;
    }
  }
  return out;
}
