/**
 * The classification of every DeepSpeed key ZeroMoE knows, read from the specs themselves
 * (spec-deepspeed.ts, spec-deepspeed-other.ts, the `checkpoint` section of spec-job.ts), so the
 * table in docs/config.md and the checker cannot disagree: each key is acted on, acted on only at
 * some values (others warn), accepted with a warning (no effect here), an alias of another key, or
 * refused unless its value asks for nothing (a feature ZeroMoE lacks). Sections also say what
 * happens to a key they do not know (refused as DeepSpeed's pydantic models refuse it, or warned
 * about as DeepSpeed drops it).
 */
import type { ObjectSpec, Spec } from "./schema.ts";
import { DEEPSPEED_ALIASES, DEEPSPEED_FIELDS, DEEPSPEED_IGNORED, DEEPSPEED_UNSUPPORTED } from "./spec-deepspeed.ts";
import { CHECKPOINT_DEEPSPEED_IGNORED } from "./spec-deepspeed-other.ts";

/** How ZeroMoE handles one DeepSpeed key. */
export type KeyHandling = "acted" | "acted-some-values" | "warns" | "alias" | "refused-unless-off" | "section";

/** One row of the table: a dotted key path, its handling and the note shown with it. */
export interface DeepSpeedKeyRow {
  key: string;
  handling: KeyHandling;
  note: string;
}

function fieldRow(key: string, spec: Spec): DeepSpeedKeyRow {
  if (spec.inert) return { key, handling: spec.inert.always ? "warns" : "acted-some-values", note: spec.inert.why };
  return { key, handling: "acted", note: "" };
}

function walk(prefix: string, spec: ObjectSpec, rows: DeepSpeedKeyRow[]): void {
  const name = (k: string): string => (prefix ? `${prefix}.${k}` : k);
  for (const [k, f] of Object.entries(spec.fields)) {
    if (f.kind === "object") {
      rows.push({ key: name(k), handling: "section", note: f.unknownKeys === "warn" ? "a key it does not know warns (DeepSpeed drops it)" : "a key it does not know is refused (as DeepSpeed's config model refuses it)" });
      walk(name(k), f, rows);
    } else rows.push(fieldRow(name(k), f));
  }
  for (const [k, to] of Object.entries(spec.aliases ?? {})) rows.push({ key: name(k), handling: "alias", note: `read as ${name(to)}` });
  for (const [k, why] of Object.entries(spec.ignored ?? {})) rows.push({ key: name(k), handling: "warns", note: why });
  for (const [k, u] of Object.entries(spec.unsupported ?? {})) rows.push({ key: name(k), handling: "refused-unless-off", note: `accepted when ${u.offDoc}; otherwise refused: ${u.why}` });
}

/** Every DeepSpeed key path ZeroMoE classifies, in spec order. */
export function deepspeedKeyTable(): DeepSpeedKeyRow[] {
  const rows: DeepSpeedKeyRow[] = [];
  walk("", { kind: "object", fields: DEEPSPEED_FIELDS, aliases: DEEPSPEED_ALIASES, ignored: DEEPSPEED_IGNORED, unsupported: DEEPSPEED_UNSUPPORTED }, rows);
  rows.push({ key: "checkpoint", handling: "section", note: "shared with the job's own checkpoint keys (dir, save_interval, keep_last); in a --deepspeed file only DeepSpeed's keys" });
  for (const [k, why] of Object.entries(CHECKPOINT_DEEPSPEED_IGNORED)) rows.push({ key: `checkpoint.${k}`, handling: "warns", note: why });
  return rows;
}

const LABEL: Record<KeyHandling, string> = {
  acted: "acted on",
  "acted-some-values": "acted on; other values warn",
  warns: "accepted, warns (no effect)",
  alias: "alias",
  "refused-unless-off": "refused when on",
  section: "section",
};

/** The table as markdown rows (`| key | handling | note |`). */
export function renderDeepSpeedKeyTable(): string[] {
  const esc = (s: string): string => s.replace(/\|/g, "\\|");
  const out = ["| DeepSpeed key | handling | note |", "| --- | --- | --- |"];
  for (const r of deepspeedKeyTable()) out.push(`| \`${r.key}\` | ${LABEL[r.handling]} | ${esc(r.note)} |`);
  return out;
}
