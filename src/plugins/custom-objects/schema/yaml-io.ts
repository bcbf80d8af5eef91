/**
 * Schema documents in YAML as well as JSON (custom objects 0.7): a request body sent as
 * `application/yaml` is parsed with the `yaml` package (aliases and nesting bounded); an answer
 * goes out as YAML when `Accept` prefers it. Everything else stays JSON.
 */
import type { Context } from "hono";
import { parse } from "yaml";
import type { Ctx } from "../../../core/context";
import { ApiError } from "../../../core/errors";
import { readBody, readJson } from "../../../core/http";
import { MAX_JSON_DEPTH } from "../../../core/limits";
import { toYaml, yamlWithTurns } from "../../../openapi/yaml";
import { yieldWhenDue } from "../../../turns";

const YAML_TYPES = /^(application\/(x-)?yaml|text\/(x-)?yaml)\b/i;

const invalidYaml = (message: string) =>
  new ApiError(400, {
    error: "invalid_schema",
    detail: `The body is not valid YAML: ${message}`,
    schema_errors: [{ path: "$", message }],
  });

/** Nesting depth of a parsed value, without recursion (a hostile document cannot overflow it). */
function depthExceeds(root: unknown, limit: number): boolean {
  const stack: Array<[unknown, number]> = [[root, 1]];
  while (stack.length) {
    const [value, depth] = stack.pop()!;
    if (!value || typeof value !== "object") continue;
    if (depth > limit) return true;
    for (const child of Object.values(value)) stack.push([child, depth + 1]);
  }
  return false;
}

/**
 * Whether YAML text may nest deeper than `limit`, judged on its characters before the parser,
 * which recurses once a level (decision 0190): 500,000 `[` held the loop 1.9 s before its stack
 * overflowed. Flow brackets count wherever they stand (a quoted one too: an upper bound, as only
 * a text with `limit` unclosed brackets in strings is refused for nothing), and so does each
 * compact indicator (`- `, `? `) leading a line. Block nesting by indentation needs the square of
 * its depth in characters; the parsed value's depth check takes it.
 */
function yamlNestingExceeds(text: string, limit: number): boolean {
  let flow = 0;
  let lineStart = true;
  let compact = 0;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (ch === 10 /* \n */) {
      lineStart = true;
      compact = 0;
    } else if (ch === 91 /* [ */ || ch === 123 /* { */) {
      lineStart = false;
      if (++flow > limit) return true;
    } else if (ch === 93 /* ] */ || ch === 125 /* } */) {
      lineStart = false;
      if (flow > 0) flow--;
    } else if (lineStart && (ch === 45 /* - */ || ch === 63) /* ? */) {
      const next = text.charCodeAt(i + 1);
      if (next === 32 || next === 9 || next === 10 || Number.isNaN(next)) {
        if (++compact > limit) return true;
      } else lineStart = false;
    } else if (ch !== 32 && ch !== 9 && ch !== 13) lineStart = false;
  }
  return false;
}

/** The request's schema body: YAML when its Content-Type says so, else JSON (`readJson`). */
export async function readSchemaBody(c: Ctx): Promise<unknown> {
  const type = c.req.header("content-type")?.trim() ?? "";
  if (!YAML_TYPES.test(type)) return readJson(c);
  const text = new TextDecoder().decode(await readBody(c));
  if (!text.trim()) return {};
  if (yamlNestingExceeds(text, MAX_JSON_DEPTH))
    throw invalidYaml(`nests deeper than ${MAX_JSON_DEPTH} levels`);
  let value: unknown;
  try {
    // Few aliases (no "billion laughs"); YAML 1.2 core schema, so `yes`/`no` stay strings.
    value = parse(text, { maxAliasCount: 50, schema: "core", uniqueKeys: true });
  } catch (e) {
    throw invalidYaml(
      String((e as Error)?.message ?? e)
        .split("\n")[0]!
        .slice(0, 300),
    );
  }
  if (depthExceeds(value, MAX_JSON_DEPTH))
    throw invalidYaml(`nests deeper than ${MAX_JSON_DEPTH} levels`);
  return value ?? {};
}

/** True when `Accept` names YAML before (or instead of) JSON. */
function prefersYaml(accept: string | undefined): boolean {
  if (!accept) return false;
  const ranked = accept
    .split(",")
    .map((part, i) => {
      const [type = "", ...params] = part.trim().split(";");
      const q = params.map((p) => /^\s*q=([\d.]+)/.exec(p)?.[1]).find(Boolean);
      return { type: type.trim().toLowerCase(), q: q === undefined ? 1 : Number(q), i };
    })
    .filter((r) => r.q > 0)
    .sort((a, b) => b.q - a.q || a.i - b.i);
  const first = ranked.find((r) => YAML_TYPES.test(r.type) || /json|\*\/\*/.test(r.type));
  return !!first && YAML_TYPES.test(first.type);
}

/** Answers `body` as YAML when the caller's `Accept` prefers it, else as JSON. */
export function schemaAnswer(c: Context, body: object, status: 200 | 202 = 200) {
  if (!prefersYaml(c.req.header("accept"))) return c.json(body, status);
  return c.body(toYaml(body as Record<string, unknown>), status, {
    "Content-Type": "application/yaml; charset=utf-8",
  });
}

/**
 * `schemaAnswer` for a whole schema document (the export): its `types` written a type a step
 * with turns between, in JSON or YAML (decision 0217). The same bytes.
 */
export async function documentAnswer(c: Context, doc: object) {
  const members = doc as Record<string, unknown>;
  if (prefersYaml(c.req.header("accept")))
    return c.body(await yamlWithTurns(members, "types"), 200, {
      "Content-Type": "application/yaml; charset=utf-8",
    });
  return c.body(await jsonWithTurns(members, "types"), 200, {
    "Content-Type": "application/json",
  });
}

/** `JSON.stringify(doc)`, the items of its array member `list` written an item a step. */
async function jsonWithTurns(doc: Record<string, unknown>, list: string): Promise<string> {
  const parts: string[] = [];
  for (const [k, v] of Object.entries(doc)) {
    if (v === undefined) continue;
    if (k !== list || !Array.isArray(v)) {
      parts.push(`${JSON.stringify(k)}:${JSON.stringify(v)}`);
      continue;
    }
    const items: string[] = [];
    for (const item of v) {
      await yieldWhenDue();
      items.push(JSON.stringify(item) ?? "null");
    }
    parts.push(`${JSON.stringify(k)}:[${items.join(",")}]`);
  }
  return `{${parts.join(",")}}`;
}
