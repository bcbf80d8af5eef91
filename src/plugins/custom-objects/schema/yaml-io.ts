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
import { toYaml } from "../../../openapi/yaml";

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

/** The request's schema body: YAML when its Content-Type says so, else JSON (`readJson`). */
export async function readSchemaBody(c: Ctx): Promise<unknown> {
  const type = c.req.header("content-type")?.trim() ?? "";
  if (!YAML_TYPES.test(type)) return readJson(c);
  const text = new TextDecoder().decode(await readBody(c));
  if (!text.trim()) return {};
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
