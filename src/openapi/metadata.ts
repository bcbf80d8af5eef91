/**
 * `OPTIONS` on a list or detail endpoint: Django REST framework's metadata, as NetBox answers it
 * (`{name, description, renders, parses, actions: {POST|PUT: {<field>: {type, required,
 * read_only, label, choices?, …}}}}`). pynetbox's `Endpoint.choices()` reads
 * `actions.POST.<field>.choices` from it. The fields come from the request body the OpenAPI
 * document describes for that path, so host models and custom object types (with the caller's
 * visibility) answer alike. A path the document does not describe falls through (404 / 405).
 */
import type { MiddlewareHandler } from "hono";
import type { HonoEnv } from "../core/context";
import { baseUrlOf } from "../core/http";
import { hasPermission } from "../core/auth/permissions";
import type { OpenApiDocuments } from "./generate";
import { ENUM_LABELS } from "../core/json-schema";

type Json = Record<string, any>;

/** `/api/dcim/sites/12/` → the document's `/api/dcim/sites/{id}/`. */
function pathItem(paths: Json, path: string): { item: Json; detail: boolean } | null {
  const withSlash = path.endsWith("/") ? path : `${path}/`;
  if (paths[withSlash]) return { item: paths[withSlash], detail: false };
  const m = /^(.*\/)\d+\/$/.exec(withSlash);
  if (m && paths[`${m[1]}{id}/`]) return { item: paths[`${m[1]}{id}/`], detail: true };
  return null;
}

function resolve(doc: Json, schema: Json | undefined, depth = 0): Json | undefined {
  if (!schema || depth > 8) return undefined;
  if (typeof schema.$ref === "string") {
    const name = schema.$ref.replace(/^#\/components\/schemas\//, "");
    return resolve(doc, doc.components?.schemas?.[name], depth + 1);
  }
  // A list endpoint takes one object or a list of them: the object is the form.
  for (const key of ["oneOf", "anyOf"]) {
    if (Array.isArray(schema[key])) {
      for (const s of schema[key]) {
        const r = resolve(doc, s, depth + 1);
        if (r?.properties) return r;
      }
    }
  }
  return schema;
}

const title = (name: string) => name.replace(/_/g, " ").replace(/^./, (c) => c.toUpperCase());
/** DRF's choices of an enum: `display_name` is the value's label where the schema names one. */
const choicesOf = (schema: Json) => {
  const values: unknown[] = schema.enum;
  const labels: unknown[] = Array.isArray(schema[ENUM_LABELS]) ? schema[ENUM_LABELS] : [];
  return values.flatMap((v, i) =>
    v === null ? [] : [{ value: v, display_name: String(labels[i] ?? v) }],
  );
};

/** One field of DRF's metadata from its JSON Schema. */
function fieldInfo(doc: Json, name: string, raw: Json, required: boolean): Json {
  const s = resolve(doc, raw) ?? {};
  const types = (Array.isArray(s.type) ? s.type : [s.type]).filter(
    (t: unknown) => t && t !== "null",
  );
  const anyOf = Array.isArray(s.anyOf) ? s.anyOf.map((x: Json) => resolve(doc, x) ?? {}) : [];
  const info: Json = { type: "field", required, read_only: false, label: title(name) };
  if (s.description) info.help_text = s.description;
  if (Array.isArray(s.enum)) {
    info.type = "choice";
    info.choices = choicesOf(s);
  } else if (types[0] === "array") {
    const items = resolve(doc, s.items) ?? {};
    if (Array.isArray(items.enum)) {
      info.type = "multiple choice";
      info.choices = choicesOf(items);
    } else info.type = items.properties || items.type === "integer" ? "related object" : "list";
  } else if (types[0] === "integer") info.type = "integer";
  else if (types[0] === "number") info.type = "decimal";
  else if (types[0] === "boolean") info.type = "boolean";
  else if (types[0] === "string")
    info.type =
      s.format === "date-time"
        ? "datetime"
        : s.format === "date"
          ? "date"
          : s.format === "uri"
            ? "url"
            : "string";
  else if (types[0] === "object" || anyOf.length) info.type = "nested object";
  else if (!types.length && !s.properties) info.type = "json";
  if (typeof s.maxLength === "number") info.max_length = s.maxLength;
  if (typeof s.minimum === "number") info.min_value = s.minimum;
  if (typeof s.maximum === "number") info.max_value = s.maximum;
  return info;
}

export function optionsMetadata(documents: OpenApiDocuments): MiddlewareHandler<HonoEnv> {
  return async (c, next) => {
    if (c.req.method !== "OPTIONS") return next();
    const canView = (slug: string) => hasPermission(c, "view", "custom_objects", slug);
    const doc = (await documents.document(baseUrlOf(c), canView)) as unknown as Json;
    const found = pathItem(doc.paths ?? {}, c.req.path);
    if (!found) return next();
    const { item, detail } = found;
    const methods = ["get", "post", "put", "patch", "delete"].filter((m) => item[m]);
    const allow = [
      ...methods.map((m) => m.toUpperCase()),
      ...(item.get ? ["HEAD"] : []),
      "OPTIONS",
    ];
    const write = detail ? item.put : item.post;
    const body: Json = {
      name: String(item.get?.summary ?? item.post?.summary ?? c.req.path),
      description: "",
      renders: ["application/json"],
      parses: ["application/json"],
    };
    const form = resolve(doc, write?.requestBody?.content?.["application/json"]?.schema);
    if (form?.properties) {
      const required = new Set<string>(form.required ?? []);
      const fields: Json = {
        id: { type: "integer", required: false, read_only: true, label: "ID" },
      };
      for (const [name, schema] of Object.entries(form.properties as Json))
        fields[name] = fieldInfo(doc, name, schema, required.has(name));
      body.actions = { [detail ? "PUT" : "POST"]: fields };
    }
    c.header("Allow", allow.join(", "));
    c.header("Vary", "Accept, Authorization");
    return c.json(body, 200);
  };
}
