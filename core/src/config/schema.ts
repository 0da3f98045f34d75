/**
 * A small declarative schema for JSON config sections, and the checker that applies it.
 *
 * A {@link Spec} says what one JSON value may be (type, range, allowed strings, nested keys) and
 * what its default is. {@link check} walks a parsed JSON value against a spec, fills defaults,
 * and pushes every problem it finds as a {@link ConfigIssue} (path + expectation) instead of
 * throwing, so a caller can report all errors at once. Unknown object keys get a "did you mean"
 * from {@link suggest}. The same specs drive `docs/config.md`'s completeness test.
 */
import { type ConfigIssue, suggest } from "./errors.ts";
import { describeValue } from "./json-bounds.ts";

/** Common fields of every spec. */
interface SpecBase {
  /** One-line meaning, for documentation and error hints. */
  doc?: string;
  /** Absent key → this value (deep-copied). `undefined` leaves the key absent in the output. */
  default?: unknown;
  /** Absent key is an error. */
  required?: boolean;
  /** `null` is accepted as a value (and kept). */
  nullable?: boolean;
  /** A DeepSpeed key accepted without effect here (spec-observe.ts noEffect / noEffectUnless): why,
   * and whether every given value warns (`always`) or only values other than ZeroMoE's own. */
  inert?: { why: string; always: boolean };
}

/** A finite JSON number; `int` requires an integer within ±Number.MAX_SAFE_INTEGER (2^53 − 1). Bounds are inclusive unless `exclusiveMin`. */
export interface NumberSpec extends SpecBase {
  kind: "number";
  int?: boolean;
  min?: number;
  max?: number;
  exclusiveMin?: boolean;
  exclusiveMax?: boolean;
}
export interface BooleanSpec extends SpecBase {
  kind: "boolean";
}
/** Any string (non-empty unless `allowEmpty`). */
export interface StringSpec extends SpecBase {
  kind: "string";
  allowEmpty?: boolean;
}
/** One of fixed strings. With `caseInsensitive`, input is matched ignoring case and the canonical
 * spelling from `values` is returned. */
export interface EnumSpec extends SpecBase {
  kind: "enum";
  values: readonly string[];
  caseInsensitive?: boolean;
  /** The did-you-mean for a wrong value (default: the nearest by edit distance). */
  suggestValue?: (value: string) => string | null;
}
/** A JSON array whose every item matches `items`, with optional length bounds. */
export interface ArraySpec extends SpecBase {
  kind: "array";
  items: Spec;
  minLength?: number;
  maxLength?: number;
}
/** A JSON object with known keys. */
export interface ObjectSpec extends SpecBase {
  kind: "object";
  fields: Readonly<Record<string, Spec>>;
  /** Old key name → current key name; the old name is accepted and moved (both given: error). */
  aliases?: Readonly<Record<string, string>>;
  /** Keys accepted and dropped, each with the reason shown as a warning (DeepSpeed/HF keys that
   * have no effect here). */
  ignored?: Readonly<Record<string, string>>;
  /** DeepSpeed keys whose feature ZeroMoE lacks: accepted while the value asks for nothing
   * ({@link Unsupported.off}), refused with the reason otherwise. */
  unsupported?: Readonly<Record<string, Unsupported>>;
  /** What a key that is none of the above gets: "refuse" (default; DeepSpeed's pydantic config
   * models forbid extra keys too) or "warn" (DeepSpeed reads this section with `dict.get` and drops
   * what it does not know: one warning with a did-you-mean). */
  unknownKeys?: "refuse" | "warn";
}

/** A DeepSpeed key accepted only at values that ask for nothing (see {@link ObjectSpec.unsupported}). */
export interface Unsupported {
  /** True when the value asks for nothing (the feature off). */
  off: (value: unknown) => boolean;
  /** The accepted values, for docs and messages, e.g. "false", "absent or enabled false". */
  offDoc: string;
  /** Why any other value is refused: the feature it asks for and that ZeroMoE lacks. */
  why: string;
}
/** Escape hatch for values whose shape depends on a sibling (model by `model_type`, scheduler
 * params by `type`): the function validates and returns the resolved value. */
export interface CustomSpec extends SpecBase {
  kind: "custom";
  /** Short type description for docs, e.g. "object (by model_type)". */
  typeName: string;
  check: (value: unknown, path: string, ctx: CheckContext) => unknown;
  /** For documentation: the object shapes this value can take, by discriminator value
   * (e.g. `llama`/`mixtral` for the model, `WarmupLR`… for scheduler params). */
  variants?: Readonly<Record<string, ObjectSpec>>;
  /** For documentation: the key under which the variant's fields sit (`params` for scheduler). */
  variantKey?: string;
}

export type Spec = NumberSpec | BooleanSpec | StringSpec | EnumSpec | ArraySpec | ObjectSpec | CustomSpec;

/** Collects issues and warnings during one validation pass. */
export interface CheckContext {
  issues: ConfigIssue[];
  warnings: string[];
  /** Which file each top-level key came from (for error messages). */
  sourceOf?: (path: string) => string | undefined;
}

/** Appends `key` to a dotted path (`a.b`), or an index (`a[3]`). */
export function joinPath(path: string, key: string | number): string {
  if (typeof key === "number") return `${path}[${key}]`;
  return path === "" ? key : `${path}.${key}`;
}

/** Records an issue at `path`. */
export function addIssue(ctx: CheckContext, path: string, message: string): void {
  const source = ctx.sourceOf?.(path);
  ctx.issues.push(source ? { path, message, source } : { path, message });
}

/** JSON-ish name of a value's type, for "got …" messages. */
export function typeOfJson(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  return typeof v;
}

/** Short rendering of a value for messages: json-bounds.ts describeValue (bounded work and
 * length, strings quoted by quote-untrusted.ts). */
export function show(v: unknown): string {
  return describeValue(v);
}

/** True for a plain JSON object (not null, not an array). */
export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function clone<T>(v: T): T {
  return v === undefined ? v : (structuredClone(v) as T);
}

const AUTO_HINT =
  '"auto" is a Hugging Face Trainer placeholder, not a DeepSpeed value: give the value itself';

/** Human-readable type of a spec, e.g. "integer in [0, 3]", `one of "cpu" | "nvme"`. */
export function describeSpec(spec: Spec): string {
  let s: string;
  switch (spec.kind) {
    case "number": {
      const t = spec.int ? "integer" : "number";
      const lo = spec.min !== undefined ? (spec.exclusiveMin ? `> ${spec.min}` : `>= ${spec.min}`) : "";
      const hi = spec.max !== undefined ? (spec.exclusiveMax ? `< ${spec.max}` : `<= ${spec.max}`) : "";
      if (lo && hi) s = `${t} in ${spec.exclusiveMin ? "(" : "["}${spec.min}, ${spec.max}${spec.exclusiveMax ? ")" : "]"}`;
      else s = [t, lo, hi].filter(Boolean).join(" ");
      break;
    }
    case "boolean":
      s = "boolean";
      break;
    case "string":
      s = "string";
      break;
    case "enum":
      s = "one of " + spec.values.map((v) => JSON.stringify(v)).join(" | ");
      break;
    case "array":
      s = `array of ${describeSpec(spec.items)}`;
      if (spec.minLength !== undefined && spec.minLength === spec.maxLength) s = `array of ${spec.minLength} × ${describeSpec(spec.items)}`;
      break;
    case "object":
      s = "object";
      break;
    case "custom":
      s = spec.typeName;
      break;
  }
  return spec.nullable && s !== "null" ? `${s} or null` : s;
}

/**
 * Validates `value` against `spec` at `path`, returning the resolved value (defaults filled in,
 * enum spelling canonicalised). On a problem, records an issue and returns `undefined`.
 * `value === undefined` means the key is absent: the default is used (or an issue if required).
 */
export function check(value: unknown, spec: Spec, path: string, ctx: CheckContext): unknown {
  if (value === undefined) {
    if (spec.required) {
      addIssue(ctx, path, `required key is missing (expected ${describeSpec(spec)})`);
      return undefined;
    }
    if (spec.default === undefined) return undefined;
    if (spec.kind === "object" && isPlainObject(spec.default)) return check(clone(spec.default), spec, path, ctx);
    return clone(spec.default);
  }
  if (value === null) {
    if (spec.nullable) return null;
    addIssue(ctx, path, `expected ${describeSpec(spec)}, got null`);
    return undefined;
  }
  if (value === "auto" && spec.kind !== "string" && spec.kind !== "enum") {
    addIssue(ctx, path, `${AUTO_HINT} (expected ${describeSpec(spec)})`);
    return undefined;
  }
  switch (spec.kind) {
    case "number":
      return checkNumber(value, spec, path, ctx);
    case "boolean":
      if (typeof value !== "boolean") {
        addIssue(ctx, path, `expected boolean, got ${typeOfJson(value)} ${show(value)}`);
        return undefined;
      }
      return value;
    case "string":
      if (typeof value !== "string" || (!spec.allowEmpty && value === "")) {
        addIssue(ctx, path, `expected ${spec.allowEmpty ? "a string" : "a non-empty string"}, got ${typeOfJson(value)} ${show(value)}`);
        return undefined;
      }
      return value;
    case "enum":
      return checkEnum(value, spec, path, ctx);
    case "array":
      return checkArray(value, spec, path, ctx);
    case "object":
      return checkObject(value, spec, path, ctx);
    case "custom":
      return spec.check(value, path, ctx);
  }
}

function checkNumber(value: unknown, spec: NumberSpec, path: string, ctx: CheckContext): number | undefined {
  if (typeof value !== "number" || !Number.isFinite(value)) {
    addIssue(ctx, path, `expected ${describeSpec(spec)}, got ${typeOfJson(value)} ${show(value)}`);
    return undefined;
  }
  if (spec.int && !Number.isInteger(value)) {
    addIssue(ctx, path, `expected ${describeSpec(spec)}, got non-integer ${value}`);
    return undefined;
  }
  // above 2^53 a JSON integer is not exact in a double (1e20 + 1 === 1e20): refuse it
  if (spec.int && !Number.isSafeInteger(value)) {
    addIssue(ctx, path, `out of range: expected ${describeSpec(spec)} within ±Number.MAX_SAFE_INTEGER (${Number.MAX_SAFE_INTEGER}), got ${value}`);
    return undefined;
  }
  const low = spec.min !== undefined && (spec.exclusiveMin ? value <= spec.min : value < spec.min);
  const high = spec.max !== undefined && (spec.exclusiveMax ? value >= spec.max : value > spec.max);
  if (low || high) {
    addIssue(ctx, path, `out of range: expected ${describeSpec(spec)}, got ${value}`);
    return undefined;
  }
  return value;
}

function checkEnum(value: unknown, spec: EnumSpec, path: string, ctx: CheckContext): string | undefined {
  if (typeof value === "string") {
    const hit = spec.caseInsensitive
      ? spec.values.find((v) => v.toLowerCase() === value.toLowerCase())
      : spec.values.find((v) => v === value);
    if (hit !== undefined) return hit;
    const near = spec.suggestValue ? spec.suggestValue(value) : suggest(value, spec.values);
    addIssue(ctx, path, `expected ${describeSpec(spec)}, got ${show(value)}${near ? `; did you mean "${near}"?` : ""}`);
    return undefined;
  }
  addIssue(ctx, path, `expected ${describeSpec(spec)}, got ${typeOfJson(value)} ${show(value)}`);
  return undefined;
}

function checkArray(value: unknown, spec: ArraySpec, path: string, ctx: CheckContext): unknown[] | undefined {
  if (!Array.isArray(value)) {
    addIssue(ctx, path, `expected ${describeSpec(spec)}, got ${typeOfJson(value)} ${show(value)}`);
    return undefined;
  }
  if ((spec.minLength !== undefined && value.length < spec.minLength) || (spec.maxLength !== undefined && value.length > spec.maxLength)) {
    const want = spec.minLength === spec.maxLength ? `exactly ${spec.minLength}` : `${spec.minLength ?? 0}..${spec.maxLength ?? "∞"}`;
    addIssue(ctx, path, `expected ${want} items, got ${value.length}`);
    return undefined;
  }
  const before = ctx.issues.length;
  const out = value.map((item, i) => check(item, spec.items, joinPath(path, i), ctx));
  return ctx.issues.length === before ? out : undefined;
}

/** Lists allowed keys for an "unknown key" message when no close match exists. */
function allowedKeys(spec: ObjectSpec): string {
  const keys = Object.keys(spec.fields);
  return keys.length <= 16 ? `allowed keys: ${keys.join(", ")}` : `see docs/config.md for the ${keys.length} allowed keys`;
}

function checkObject(value: unknown, spec: ObjectSpec, path: string, ctx: CheckContext): Record<string, unknown> | undefined {
  if (!isPlainObject(value)) {
    addIssue(ctx, path, `expected an object, got ${typeOfJson(value)} ${show(value)}`);
    return undefined;
  }
  const src: Record<string, unknown> = { ...value };
  for (const [oldName, newName] of Object.entries(spec.aliases ?? {})) {
    if (Object.hasOwn(src, oldName)) {
      // both names with the same value (a Hugging Face config written for Transformers 4 and 5) agree
      if (Object.hasOwn(src, newName) && JSON.stringify(src[oldName]) !== JSON.stringify(src[newName])) {
        addIssue(ctx, joinPath(path, oldName), `both "${oldName}" (old name) and "${newName}" are given, with different values; keep only "${newName}"`);
      } else if (!Object.hasOwn(src, newName)) {
        src[newName] = src[oldName];
      }
      delete src[oldName];
    }
  }
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(src)) {
    if (Object.hasOwn(spec.fields, key)) continue;
    if (spec.ignored && Object.hasOwn(spec.ignored, key)) {
      ctx.warnings.push(`${joinPath(path, key)}: ignored (${spec.ignored[key]})`);
      continue;
    }
    const unsupported = spec.unsupported && Object.hasOwn(spec.unsupported, key) ? spec.unsupported[key]! : undefined;
    if (unsupported) {
      if (!unsupported.off(src[key])) addIssue(ctx, joinPath(path, key), `${show(src[key])} is not supported: ${unsupported.why} (accepted: ${unsupported.offDoc})`);
      continue;
    }
    // DeepSpeed's own comment convention: keys starting with "_" (e.g. "_comment") are notes
    if (key.startsWith("_") && spec.unknownKeys === "warn") continue;
    const near = suggest(key, [...Object.keys(spec.fields), ...Object.keys(spec.aliases ?? {}), ...Object.keys(spec.ignored ?? {}), ...Object.keys(spec.unsupported ?? {})]);
    if (spec.unknownKeys === "warn") {
      ctx.warnings.push(`${joinPath(path, key)}: unknown key, ignored as DeepSpeed ignores it${near ? `; did you mean "${near}"?` : ""}`);
      continue;
    }
    addIssue(ctx, joinPath(path, key), `unknown key${near ? `; did you mean "${near}"?` : `; ${allowedKeys(spec)}`}`);
  }
  for (const [key, fieldSpec] of Object.entries(spec.fields)) {
    const v = check(src[key], fieldSpec, joinPath(path, key), ctx);
    if (v !== undefined) out[key] = v;
  }
  return out;
}
