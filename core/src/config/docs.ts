/**
 * Renders the key reference of docs/config.md from the schema itself (spec-job.ts and the specs it
 * includes), so the documentation lists exactly the keys, types and defaults the validator uses.
 * Run `bun core/src/config/docs.ts` to rewrite the generated part of docs/config.md (between the
 * BEGIN/END markers); a test fails when the file is stale.
 */
import { describeSpec, type ObjectSpec, type Spec } from "./schema.ts";
import { JOB_SPEC } from "./spec-job.ts";
import { renderDeepSpeedKeyTable } from "./deepspeed-key-table.ts";
import { readFile, writeFile } from "node:fs/promises";

/** Markers around the generated part of docs/config.md. */
export const DOC_BEGIN = "<!-- BEGIN GENERATED: bun core/src/config/docs.ts -->";
export const DOC_END = "<!-- END GENERATED -->";

/** Numbers like 500000000 as 5e8; others as JSON. */
function fmtDefault(v: unknown): string {
  if (typeof v === "number" && Number.isInteger(v) && Math.abs(v) >= 1e5) {
    const [m, e] = v.toExponential().split("e+");
    if (m.length <= 3) return `${m}e${e}`;
  }
  if (typeof v === "number" && v !== 0 && Math.abs(v) < 1e-3) return v.toExponential().replace("e-", "e-");
  return JSON.stringify(v);
}

function defaultCell(spec: Spec): string {
  if (spec.required) return "**required**";
  if (spec.default === undefined) return "derived";
  if (spec.kind === "object") return spec.default === null ? "`null`" : "see below";
  return "`" + fmtDefault(spec.default) + "`";
}

function esc(s: string): string {
  return s.replace(/\|/g, "\\|");
}

function isSection(spec: Spec): boolean {
  return spec.kind === "object" || (spec.kind === "custom" && spec.variants !== undefined);
}

function renderTable(spec: ObjectSpec, prefix: string, out: string[]): void {
  out.push("| key | type | default | meaning |", "| --- | --- | --- | --- |");
  for (const [key, f] of Object.entries(spec.fields)) {
    const name = prefix ? `${prefix}.${key}` : key;
    const type = f.kind === "custom" ? f.typeName : isSection(f) ? (f.nullable ? "object or null" : "object") : describeSpec(f);
    out.push(`| \`${name}\` | ${esc(type)} | ${defaultCell(f)} | ${esc(f.doc ?? "")} |`);
  }
  const aliases = Object.entries(spec.aliases ?? {});
  if (aliases.length) out.push("", "Other names accepted (DeepSpeed's aliases and old names): " + aliases.map(([o, n]) => `\`${o}\` → \`${n}\``).join(", ") + ".");
  const ignored = Object.entries(spec.ignored ?? {});
  if (ignored.length) out.push("", "Accepted and ignored (with a warning): " + ignored.map(([k, why]) => `\`${k}\` (${why})`).join("; ") + ".");
  const unsupported = Object.entries(spec.unsupported ?? {});
  if (unsupported.length) out.push("", "Refused when on (a feature ZeroMoE lacks): " + unsupported.map(([k, u]) => `\`${k}\` (accepted when ${u.offDoc}: ${u.why})`).join("; ") + ".");
  if (spec.unknownKeys === "warn") out.push("", "A key this section does not know warns (DeepSpeed reads it with `dict.get` and drops it).");
}

function renderSection(title: string, spec: ObjectSpec, prefix: string, level: number, out: string[]): void {
  out.push("", `${"#".repeat(level)} ${title}`, "");
  if (spec.doc) out.push(spec.doc + ".", "");
  renderTable(spec, prefix, out);
  for (const [key, f] of Object.entries(spec.fields)) {
    const name = prefix ? `${prefix}.${key}` : key;
    if (f.kind === "object") renderSection(`\`${name}\``, f, name, Math.min(level + 1, 4), out);
    else if (f.kind === "custom" && f.variants) {
      for (const [variant, vs] of Object.entries(f.variants)) {
        const sub = f.variantKey ? `${name}.${f.variantKey}` : name;
        const disc = f.variantKey ? "type" : "model_type";
        renderSection(`\`${sub}\` when \`${disc}\` is \`"${variant}"\``, vs, sub, Math.min(level + 1, 4), out);
      }
    }
  }
}

/** The generated markdown (without markers). */
export function renderConfigReference(): string {
  const out: string[] = [];
  renderSection("Top-level keys", JOB_SPEC, "", 2, out);
  out.push(
    "",
    "## DeepSpeed 0.19 keys and how each is handled",
    "",
    "Every key of DeepSpeed 0.19's config classes (runtime/config.py, runtime/constants.py, runtime/zero/config.py, runtime/zero/offload_config.py, runtime/precision_config.py, runtime/activation_checkpointing/config.py, runtime/swap_tensor/constants.py, profiling/constants.py, monitor/config.py, comm/config.py, runtime/tensor_parallel/config.py and the sections they name), as the checker classifies it. " +
      "\"acted on\": the key does what DeepSpeed documents. \"acted on; other values warn\": ZeroMoE always behaves as one value, any other value is accepted with one warning saying why. " +
      "\"accepted, warns\": accepted, one warning naming the key and why it has no effect here. \"refused when on\": accepted while it asks for nothing, refused with the reason when it asks for a feature ZeroMoE lacks. " +
      "A top-level key of a --deepspeed file that is none of these warns with a did-you-mean (DeepSpeed drops it); keys starting with `_` (`_comment`) are notes.",
    "",
    ...renderDeepSpeedKeyTable(),
  );
  return out.join("\n").trim() + "\n";
}

/** Replaces the generated region of a docs file's text; throws if the markers are missing. */
export function replaceGenerated(doc: string, generated: string): string {
  const a = doc.indexOf(DOC_BEGIN);
  const b = doc.indexOf(DOC_END);
  if (a < 0 || b < a) throw new Error(`docs/config.md: markers ${DOC_BEGIN} … ${DOC_END} not found`);
  return doc.slice(0, a + DOC_BEGIN.length) + "\n" + generated + doc.slice(b);
}

if (import.meta.main) {
  const path = new URL("../../../docs/config.md", import.meta.url).pathname;
  const doc = await readFile(path, "utf8");
  await writeFile(path, replaceGenerated(doc, renderConfigReference()));
  console.log(`updated ${path}`);
}
