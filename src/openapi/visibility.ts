/**
 * The OpenAPI document as one caller may see it: a custom object type the caller may not view
 * contributes nothing — no paths, tags or component schemas, no `$ref` to them, no enum value,
 * title or description naming it (§4: nothing a user may not view is named). The full document
 * is built once per schema version; this filter runs once per set of hidden types.
 */
import type { OpenApiDocument } from "../core/json-schema";
import { yieldWhenDue } from "../turns";

const COT_PATH = /^\/api\/plugins\/custom-objects\/([^/{}]+)(?:\/\{id\})?\/?$/;
const COT_SCHEMA = /^CustomObject\.([^.]+)(?:\..+)?$/;
const COT_RECORD = /^CustomObject\.([^.]+)$/;
const COT_TAG = /^custom-objects: (.+)$/;
const SCHEMA_REF = "#/components/schemas/";
const NESTED = { $ref: `${SCHEMA_REF}NestedObject` };

/** The slugs of the custom object types the document describes. */
export function typeSlugsOf(doc: OpenApiDocument): string[] {
  const schemas = ((doc.components as Record<string, unknown> | undefined)?.schemas ??
    {}) as Record<string, unknown>;
  return Object.keys(schemas).flatMap((name) => COT_RECORD.exec(name)?.[1] ?? []);
}

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** The document without the types in `hidden` (a deep copy; `doc` is left as it is). */
export async function withoutTypes(
  doc: OpenApiDocument,
  hidden: ReadonlySet<string>,
): Promise<OpenApiDocument> {
  if (!hidden.size) return doc;
  const labels = new Set([...hidden].map((s) => `custom_objects.${s}`));
  const droppedSchema = (name: string) => {
    const slug = COT_SCHEMA.exec(name)?.[1];
    return slug !== undefined && hidden.has(slug);
  };
  const alternation = [...hidden].map(escapeRe).join("|");
  // Spellings that name a hidden type inside free text (descriptions, titles).
  const namingSource = `(?:custom[_-]objects[./]|CustomObject\\.|custom-objects: |\\/api\\/plugins\\/custom-objects\\/|\`)(?:${alternation})(?![-\\w])\`?`;
  const names = new RegExp(namingSource);
  // A polymorphic field's per-type filter is named by its type's id; its text names the type.
  const perTypeFilter = /_custom_objects_\d+(?:__[a-z]+)?$/;
  const hiddenFilter = (p: { name: string; description?: unknown }) =>
    perTypeFilter.test(p.name) && typeof p.description === "string" && names.test(p.description);
  const naming = new RegExp(namingSource, "g");
  const isHiddenRef = (node: unknown) =>
    !!node &&
    typeof node === "object" &&
    typeof (node as { $ref?: unknown }).$ref === "string" &&
    (node as { $ref: string }).$ref.startsWith(SCHEMA_REF) &&
    droppedSchema((node as { $ref: string }).$ref.slice(SCHEMA_REF.length));
  const isHiddenBranch = (node: unknown) => {
    if (isHiddenRef(node)) return true;
    const constant = (node as { properties?: { object_type?: { const?: unknown } } })?.properties
      ?.object_type?.const;
    return typeof constant === "string" && labels.has(constant);
  };

  const prune = (node: unknown, key: string): unknown => {
    if (typeof node === "string")
      return names.test(node) ? node.replace(naming, "another object type") : node;
    if (!node || typeof node !== "object") return node;
    if (Array.isArray(node)) {
      let items: unknown[] = node;
      if (key === "anyOf" || key === "oneOf") {
        // A reference to a hidden type reads as the generic nested form (once); an inline
        // polymorphic branch for a hidden type goes.
        const seen = new Set<string>();
        items = node
          .filter((n) => isHiddenRef(n) || !isHiddenBranch(n))
          .map((n) => (isHiddenRef(n) ? NESTED : n))
          .filter((n) => n !== NESTED || (!seen.has(NESTED.$ref) && seen.add(NESTED.$ref)));
        if (!items.length) items = [{ type: "object" }];
      } else if (key === "enum")
        items = node.filter((v) => !(typeof v === "string" && labels.has(v)));
      // A polymorphic field's per-type filter of a hidden type goes (0213).
      else if (key === "parameters")
        items = node.filter(
          (p) =>
            !(
              p &&
              typeof (p as { name?: unknown }).name === "string" &&
              hiddenFilter(p as { name: string; description?: unknown })
            ),
        );
      return items.map((n) => prune(n, ""));
    }
    if (isHiddenRef(node)) return { ...NESTED };
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(node)) out[k] = prune(v, k);
    return out;
  };

  const paths = Object.fromEntries(
    Object.entries(doc.paths).filter(([path]) => {
      const slug = COT_PATH.exec(path)?.[1];
      return slug === undefined || !hidden.has(slug);
    }),
  );
  const components = (doc.components ?? {}) as Record<string, unknown>;
  const schemas = Object.fromEntries(
    Object.entries((components.schemas ?? {}) as Record<string, unknown>).filter(
      ([name]) => !droppedSchema(name),
    ),
  );
  const tags = ((doc.tags ?? []) as Array<{ name: string }>).filter((t) => {
    const slug = COT_TAG.exec(t.name)?.[1];
    return slug === undefined || !hidden.has(slug);
  });
  // a path and a component schema a step, with turns between (decision 0205): the rest at once
  const prunedPaths = await prunedMembers(paths, prune);
  const prunedSchemas = await prunedMembers(schemas, prune);
  const outer = prune({ ...doc, paths: {}, tags, components: { ...components, schemas: {} } }, "");
  const out = outer as OpenApiDocument & { components: Record<string, unknown> };
  return { ...out, paths: prunedPaths, components: { ...out.components, schemas: prunedSchemas } };
}

/** Each member of `obj` pruned on its own (under its own key, as the whole walk would). */
async function prunedMembers<T>(
  obj: Record<string, T>,
  prune: (node: unknown, key: string) => unknown,
): Promise<Record<string, T>> {
  const out: Record<string, T> = {};
  for (const [k, v] of Object.entries(obj)) {
    await yieldWhenDue();
    out[k] = prune(v, k) as T;
  }
  return out;
}
