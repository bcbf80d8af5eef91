/**
 * Validation at the boundary of the hand-written routes (docs/decisions/0042-route-schemas.md):
 * a route states its query and body as valibot schemas, `@hono/valibot-validator` (queries) or
 * `jsonBody` (bodies, through `readJson`: 415, 413 and the depth limit first) checks them, and
 * one hook turns every failure into the §4 400 `{"field": ["message"]}`. The same schemas, plus
 * `describeRoute`'s summary and responses, are read back from the route table by the OpenAPI
 * generator (`src/openapi/builder.ts`), so a route and its description cannot drift apart.
 */
import { vValidator } from "@hono/valibot-validator";
import type { MiddlewareHandler } from "hono";
import * as v from "valibot";
import type { HonoEnv } from "./context";
import { ValidationError, type FieldErrors } from "./errors";
import { readJson } from "./http";
import { nulFieldErrors } from "./nul";

/** Where a route's description hangs on its middleware (read by the OpenAPI generator). */
export const ROUTE_DOC = Symbol.for("host.route-doc");

/** The OpenAPI side of one route; every part is optional and they merge in handler order. */
export interface RouteDoc {
  /** Operation fields (summary, operationId, tags, responses, security, description, …). */
  operation?: Record<string, unknown>;
  /** The query string as a valibot object schema: one parameter per entry. */
  query?: v.GenericSchema;
  /** The JSON body as a valibot schema. */
  body?: v.GenericSchema;
  /** `false` for `/livez`-style paths documented without a trailing slash. */
  slash?: boolean;
}

type Issue = v.BaseIssue<unknown>;

/** Valibot issues → DRF field errors: keyed by the top-level key, `non_field_errors` for the value itself. */
function fieldErrors(issues: readonly Issue[]): FieldErrors {
  const out: Record<string, string[]> = Object.create(null);
  for (const issue of issues) {
    const key = issue.path?.[0]?.key;
    const field = typeof key === "string" ? key : "non_field_errors";
    const list = (out[field] ??= []);
    if (!list.includes(issue.message)) list.push(issue.message);
  }
  return out;
}

/** The one hook: a failed parse is a §4 400. */
function validationHook(result: { success: boolean; issues?: readonly Issue[] }): void {
  if (!result.success) throw new ValidationError(fieldErrors(result.issues ?? []));
}

/** One message per field: a pipe stops at its first failing check. */
const firstIssues = <S extends v.GenericSchema>(schema: S) =>
  v.config(schema, { abortPipeEarly: true });

const withDoc = <H extends object>(handler: H, doc: RouteDoc): H =>
  Object.assign(handler, { [ROUTE_DOC]: doc });

/** Describes a route for the OpenAPI document (no run-time effect). */
export function describeRoute(
  operation: Record<string, unknown>,
  options: { slash?: boolean } = {},
): MiddlewareHandler<HonoEnv> {
  return withDoc<MiddlewareHandler<HonoEnv>>(async (_c, next) => next(), { operation, ...options });
}

/** Validates the query string (`c.req.valid("query")`); a repeated key arrives as an array. */
export function query<S extends v.GenericSchema>(schema: S) {
  return withDoc(vValidator("query", firstIssues(schema), validationHook), { query: schema });
}

/**
 * Reads the JSON body (`readJson`: 415 for another media type, 413 past MAX_BODY_BYTES, the
 * depth limit, `{}` when empty) and validates it (`c.req.valid("json")`).
 */
export function jsonBody<S extends v.GenericSchema>(
  schema: S,
): MiddlewareHandler<
  HonoEnv,
  string,
  { in: { json: v.InferInput<S> }; out: { json: v.InferOutput<S> } }
> {
  const checked = firstIssues(schema);
  const handler: MiddlewareHandler<HonoEnv> = async (c, next) => {
    const raw = await readJson(c);
    // no hand-written body stores JSON text: a NUL anywhere would be cut off (decision 0124)
    const nul = nulFieldErrors(raw);
    if (Object.keys(nul).length) throw new ValidationError(nul);
    const result = await v.safeParseAsync(checked, raw);
    validationHook(result);
    // A loose object hands on every key it was sent: valibot leaves out prototype names
    // (`constructor`, `__proto__`), which the model's own validation must still see and refuse.
    // Spreading defines own properties, so `__proto__` never sets a prototype.
    const output =
      (schema.type === "loose_object" || LOOSE in schema) && raw && typeof raw === "object"
        ? { ...(raw as object), ...(result.output as object) }
        : result.output;
    c.req.addValidatedData("json", output as object);
    await next();
  };
  return withDoc(handler, { body: schema }) as never;
}

/**
 * A JSON object (valibot's object schemas accept arrays): `entries` checked, other keys handed
 * on; `message` when the body is not an object.
 */
export const jsonObject = <E extends v.ObjectEntries>(entries: E, message: string) =>
  Object.assign(
    v.pipe(
      v.unknown(),
      v.check((x) => !!x && typeof x === "object" && !Array.isArray(x), message),
      v.looseObject(entries, message),
    ),
    { [LOOSE]: true },
  );

const LOOSE = Symbol("loose");

/**
 * The message of an object schema for its missing keys (valibot reports a missing key against
 * the object): `missing[key]`, else `otherwise`.
 */
export const missingKeyMessages =
  (missing: Record<string, string>, otherwise = "This field is required.") =>
  (issue: v.BaseIssue<unknown>): string => {
    const key = issue.path?.[issue.path.length - 1]?.key;
    return typeof key === "string" && Object.hasOwn(missing, key) ? missing[key]! : otherwise;
  };

/** Repeatable query parameter: one value or several, always an array after parsing. */
export const repeated = <S extends v.GenericSchema<string, unknown>>(item: S) =>
  v.pipe(
    v.union([item, v.array(item)]),
    v.transform((x) => (Array.isArray(x) ? x : [x]) as v.InferOutput<S>[]),
  );
