/**
 * A small YAML emitter for JSON data (the OpenAPI document): block mappings and sequences, plain
 * scalars where YAML reads them back as the same string, JSON-quoted strings otherwise (a JSON
 * string is a valid YAML double-quoted scalar). The `yaml` package took seconds on a document
 * with a hundred types; this is a single pass, or (`yamlPieces`) one with turns.
 */
import { yieldWhenDue } from "../turns";

// Words YAML 1.1/1.2 readers turn into booleans or null.
const RESERVED = /^(?:true|false|yes|no|on|off|y|n|null|~)$/i;
// Safe as a plain scalar: starts with a letter, `/`, `_`, `$` or `#` is excluded; no `: ` or ` #`.
const PLAIN = /^[A-Za-z_/$][\w./$(){}<>,+=@'*-]*(?: [\w./$(){}<>,+=@'*`-]+)*$/;
const NUMBERISH = /^[-+.]?\d|^\.(?:inf|nan)$/i;

// Dotted versions (`3.1.0`) read back as strings in YAML 1.1 and 1.2 alike.
const VERSION = /^\d+(?:\.\d+){2,}$/;

function scalar(s: string): string {
  if (VERSION.test(s)) return s;
  if (
    s.length &&
    s.length < 200 &&
    PLAIN.test(s) &&
    !RESERVED.test(s) &&
    !NUMBERISH.test(s) &&
    !s.includes(": ") &&
    !s.endsWith(":")
  )
    return s;
  return JSON.stringify(s);
}

function key(k: string): string {
  return scalar(k);
}

function emit(value: unknown, indent: string, out: string[]): void {
  // Called for values placed after "key:" or "- "; writes the value and its line end.
  if (value === null || value === undefined) return void out.push(" null\n");
  switch (typeof value) {
    case "string":
      return void out.push(" ", scalar(value), "\n");
    case "number":
      return void out.push(" ", Number.isFinite(value) ? String(value) : "null", "\n");
    case "boolean":
      return void out.push(value ? " true\n" : " false\n");
  }
  if (Array.isArray(value)) {
    if (!value.length) return void out.push(" []\n");
    out.push("\n");
    for (const item of value) {
      out.push(indent, "-");
      emitItem(item, `${indent}  `, out);
    }
    return;
  }
  const entries = Object.entries(value as Record<string, unknown>).filter(
    ([, v]) => v !== undefined,
  );
  if (!entries.length) return void out.push(" {}\n");
  out.push("\n");
  for (const [k, v] of entries) {
    out.push(indent, key(k), ":");
    emit(v, `${indent}  `, out);
  }
}

/** A sequence item: a mapping starts on the dash's line. */
function emitItem(item: unknown, indent: string, out: string[]): void {
  if (item && typeof item === "object" && !Array.isArray(item)) {
    const entries = Object.entries(item as Record<string, unknown>).filter(
      ([, v]) => v !== undefined,
    );
    if (entries.length) {
      entries.forEach(([k, v], i) => {
        out.push(i === 0 ? " " : indent, key(k), ":");
        emit(v, `${indent}  `, out);
      });
      return;
    }
  }
  emit(item, indent, out);
}

/** YAML text of a JSON-compatible value whose top level is a mapping. */
export function toYaml(doc: Record<string, unknown>): string {
  const out: string[] = [];
  for (const [k, v] of Object.entries(doc)) {
    if (v === undefined) continue;
    out.push(key(k), ":");
    emit(v, "  ", out);
  }
  return out.join("");
}

/** Members of an object written a member a step, as `Steps` names them (inner objects likewise). */
export type Steps = { [member: string]: Steps };

/**
 * `toYaml(doc)` in pieces, the top-level member `hole.key` as `hole.marker`; the members named in
 * `steps` are written a member a step with turns between (decision 0210): 1,000 types' OpenAPI
 * document (~43 MB of YAML) held the loop 0.8 s. Joined, the same text.
 */
export async function yamlPieces(
  doc: Record<string, unknown>,
  steps: Steps,
  hole: { key: string; marker: string },
): Promise<string[]> {
  const out: string[] = [];
  for (const [k, v] of Object.entries(doc)) {
    if (v === undefined) continue;
    if (k === hole.key) {
      out.push(hole.marker);
      continue;
    }
    out.push(key(k), ":");
    await emitStepped(v, "  ", out, steps[k]);
  }
  return out;
}

/**
 * `toYaml(doc)`, the items of its top-level sequence `list` written an item a step with turns
 * between (decision 0217: a schema export's 1,000 types in one go held the loop ~20 ms). The
 * same text.
 */
export async function yamlWithTurns(doc: Record<string, unknown>, list: string): Promise<string> {
  const out: string[] = [];
  for (const [k, v] of Object.entries(doc)) {
    if (v === undefined) continue;
    out.push(key(k), ":");
    if (k !== list || !Array.isArray(v) || !v.length) {
      emit(v, "  ", out);
      continue;
    }
    out.push("\n");
    for (const item of v) {
      await yieldWhenDue();
      const own: string[] = ["  -"];
      emitItem(item, "    ", own);
      out.push(own.join(""));
    }
  }
  return out.join("");
}

/** One top-level member's YAML text, as `toYaml` writes it. */
export function yamlMember(k: string, v: unknown): string {
  const out: string[] = [key(k), ":"];
  emit(v, "  ", out);
  return out.join("");
}

/**
 * `emit`, a member a step where `steps` names the value's members. A value written at once is
 * pushed as one string: millions of small pieces alive at once cost long garbage collections.
 */
async function emitStepped(value: unknown, indent: string, out: string[], steps?: Steps) {
  if (!steps || !value || typeof value !== "object" || Array.isArray(value)) {
    const own: string[] = [];
    emit(value, indent, own);
    return void out.push(own.join(""));
  }
  const entries = Object.entries(value as Record<string, unknown>).filter(
    ([, v]) => v !== undefined,
  );
  if (!entries.length) return void out.push(" {}\n");
  out.push("\n");
  for (const [k, v] of entries) {
    await yieldWhenDue();
    out.push(indent, key(k), ":");
    await emitStepped(v, `${indent}  `, out, steps[k]);
  }
}
