/**
 * The GraphQL schema one caller sees: NetBox 4 names for host models (`site(id:)`,
 * `site_list(filters:, pagination:)`) and upstream netbox-custom-objects names for custom
 * object types (`custom_objects_<slug>`, `custom_objects_<slug>_list`). It is built from the
 * model registry's field descriptions and contains only the models the caller may view, so
 * introspection names nothing else; relation fields whose targets are hidden are left out.
 */
import {
  GraphQLBoolean,
  GraphQLFloat,
  GraphQLID,
  GraphQLInputObjectType,
  GraphQLInt,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLScalarType,
  type GraphQLSchema,
  GraphQLString,
  GraphQLUnionType,
  type GraphQLFieldConfig,
  type GraphQLFieldConfigMap,
  type GraphQLInputFieldConfigMap,
  type GraphQLInputType,
  type GraphQLOutputType,
} from "graphql";
import type { ApiRecord, FieldDescription, Relation } from "../core/rest/resource";
import type { FilterKind } from "../core/rest/query";
import { LABEL, type GraphQLContext } from "./loaders";
import { listRecords } from "./resolve";
import { chargeRelated, placeObjects } from "./answer-weight";
import { yieldWhenDue } from "../turns";
import { schemaWithTurns, validateWithTurns } from "./assemble";
import { filterShapeExtensions, type Entry, type FilterShape } from "./shared";

/** Root field and type names NetBox 4 gives the host models GraphQL serves. */
export const HOST_NAMES: Record<string, { field: string; type: string }> = {
  "dcim.site": { field: "site", type: "SiteType" },
  "dcim.device": { field: "device", type: "DeviceType" },
  "ipam.prefix": { field: "prefix", type: "PrefixType" },
  "ipam.ipaddress": { field: "ip_address", type: "IPAddressType" },
  "tenancy.tenant": { field: "tenant", type: "TenantType" },
  "extras.tag": { field: "tag", type: "TagType" },
  "extras.customfieldchoiceset": {
    field: "custom_field_choice_set",
    type: "CustomFieldChoiceSetType",
  },
  "users.user": { field: "user", type: "UserType" },
  "users.group": { field: "group", type: "GroupType" },
  "users.owner": { field: "owner", type: "OwnerType" },
  "users.ownergroup": { field: "owner_group", type: "OwnerGroupType" },
};

const QUERY_FIELD_PREFIX = "custom_objects_";

/**
 * Upstream's naming for custom object types: the slug lower-cased with anything but
 * `[0-9a-zA-Z_]` turned into `_`, prefixed with `custom_objects_`; a name whose field or
 * `_list` companion is taken gets the type's id appended.
 */
export function customObjectNames(cots: Array<{ id: number; slug: string }>): Map<number, string> {
  const used = new Set<string>();
  const out = new Map<number, string>();
  for (const cot of cots) {
    const base = QUERY_FIELD_PREFIX + cot.slug.toLowerCase().replace(/[^0-9a-zA-Z_]/g, "_");
    let name = base;
    if (used.has(name) || used.has(`${name}_list`)) name = `${base}_${cot.id}`;
    used.add(name);
    used.add(`${name}_list`);
    out.set(cot.id, name);
  }
  return out;
}

/** A record key as a GraphQL name (`[_A-Za-z][_0-9A-Za-z]*`, never `__…`), or null. */
function graphqlName(name: string): string | null {
  let out = name.replace(/[^0-9A-Za-z_]/g, "_");
  if (/^[0-9]/.test(out)) out = `_${out}`;
  if (out.startsWith("__")) out = `f${out}`;
  return out ? out : null;
}

// ---- scalars --------------------------------------------------------------------------------

const passThrough = (name: string, description: string) =>
  new GraphQLScalarType({
    name,
    description,
    serialize: (v) => v,
    parseValue: (v) => v,
    parseLiteral: () => undefined,
  });

/** Integers beyond GraphQL's 32-bit `Int` (custom object integer fields are 64-bit). */
const BigIntScalar = new GraphQLScalarType({
  name: "BigInt",
  description: "A whole number of up to 53 bits.",
  serialize: (v) => (typeof v === "number" ? v : Number(v)),
  parseValue: (v) => (typeof v === "number" && Number.isSafeInteger(v) ? v : Number.NaN),
});
const DecimalScalar = new GraphQLScalarType({
  name: "Decimal",
  description: "A decimal number, as a string to keep its precision.",
  serialize: (v) => (v === null || v === undefined ? null : String(v)),
});
const JSONScalar = passThrough("JSON", "Any JSON value.");

const ChoiceValue = new GraphQLObjectType({
  name: "CustomObjectChoiceValue",
  description: "A select value with its label from the field's choice set.",
  fields: {
    value: { type: new GraphQLNonNull(GraphQLString) },
    label: { type: new GraphQLNonNull(GraphQLString) },
  },
});

const OffsetPaginationInput = new GraphQLInputObjectType({
  name: "OffsetPaginationInput",
  fields: { offset: { type: GraphQLInt, defaultValue: 0 }, limit: { type: GraphQLInt } },
});

// ---- lookups --------------------------------------------------------------------------------

function lookupInput(name: string, value: GraphQLInputType, lookups: string[]) {
  const fields: GraphQLInputFieldConfigMap = {};
  for (const l of lookups)
    fields[l] = {
      type:
        l === "in_list"
          ? new GraphQLList(new GraphQLNonNull(value))
          : l === "is_null"
            ? GraphQLBoolean
            : value,
    };
  return new GraphQLInputObjectType({ name, fields });
}

const TEXT_LOOKUPS = [
  "exact",
  "i_exact",
  "contains",
  "i_contains",
  "starts_with",
  "i_starts_with",
  "ends_with",
  "i_ends_with",
  "in_list",
  "is_null",
];
const ORDERED_LOOKUPS = ["exact", "gt", "gte", "lt", "lte", "in_list", "is_null"];
const LOOKUP_INPUTS = {
  string: lookupInput("StringLookup", GraphQLString, TEXT_LOOKUPS),
  number: lookupInput("FloatLookup", GraphQLFloat, ORDERED_LOOKUPS),
  id: lookupInput("IDLookup", GraphQLID, ORDERED_LOOKUPS),
  boolean: lookupInput("BooleanLookup", GraphQLBoolean, ["exact", "is_null"]),
  datetime: lookupInput("DatetimeLookup", GraphQLString, ORDERED_LOOKUPS),
  date: lookupInput("DateLookup", GraphQLString, ORDERED_LOOKUPS),
} satisfies Record<FilterKind | "id", GraphQLInputObjectType>;

// ---- schema ---------------------------------------------------------------------------------

/** The types built for one schema, each once, from the entries the caller may view. */
class SchemaBuilder {
  readonly byLabel: Map<string, Entry>;
  readonly objectTypes = new Map<string, GraphQLObjectType>();
  readonly filterTypes = new Map<string, GraphQLInputObjectType>();
  readonly unions = new Map<string, GraphQLUnionType>();

  constructor(
    entries: Entry[],
    readonly labelsById: Map<number, string>,
  ) {
    this.byLabel = new Map(entries.map((e) => [e.label, e]));
  }

  readonly #relationKeys = new Map<string, ReadonlySet<string>>();

  /** The keys of a loaded record that hold nested forms: its relations and tags. */
  relationKeys = (rec: ApiRecord): ReadonlySet<string> => {
    const label = (rec as Record<symbol, unknown>)[LABEL] as string;
    let keys = this.#relationKeys.get(label);
    if (!keys) {
      const relations = this.byLabel.get(label)?.resource.relations ?? [];
      keys = new Set(["tags", ...relations.map((r) => r.name)]);
      this.#relationKeys.set(label, keys);
    }
    return keys;
  };

  /** The labels a relation points at (its one target, or a polymorphic field's types). */
  targetsOf(rel: Relation): string[] {
    if (rel.polymorphic)
      return (rel.targetTypeIds ?? [])
        .map((id) => this.labelsById.get(id))
        .filter((l): l is string => !!l);
    const label =
      rel.target ?? (rel.targetTypeId != null ? this.labelsById.get(rel.targetTypeId) : undefined);
    return label ? [label] : [];
  }

  /** The entry's object type, made once (its fields are built lazily, so types may cycle). */
  objectType(entry: Entry): GraphQLObjectType {
    const known = this.objectTypes.get(entry.label);
    if (known) return known;
    const type = new GraphQLObjectType<ApiRecord, GraphQLContext>({
      name: entry.type,
      fields: () => this.fieldsOf(entry),
    });
    this.objectTypes.set(entry.label, type);
    return type;
  }

  /** id, display, url, the described fields, created/last_updated and tags when tagged. */
  fieldsOf(entry: Entry): GraphQLFieldConfigMap<ApiRecord, GraphQLContext> {
    const r = entry.resource;
    const out: GraphQLFieldConfigMap<ApiRecord, GraphQLContext> = {
      id: { type: new GraphQLNonNull(GraphQLID) },
      display: { type: GraphQLString },
      url: { type: GraphQLString },
    };
    const relations = new Map((r.relations ?? []).map((rel) => [rel.name, rel]));
    for (const f of r.describe ?? []) {
      const name = graphqlName(f.name);
      if (!name || Object.hasOwn(out, name) || ["created", "last_updated", "tags"].includes(name))
        continue;
      const config =
        f.kind === "relation" ? this.relationField(entry, relations.get(f.name)) : scalarField(f);
      if (config) out[name] = config;
    }
    out.created = { type: GraphQLString };
    out.last_updated = { type: GraphQLString };
    const tags = this.byLabel.get("extras.tag");
    if (r.tagged && tags) {
      out.tags = {
        type: new GraphQLNonNull(new GraphQLList(new GraphQLNonNull(this.objectType(tags)))),
        resolve: async (rec, _args, g) => {
          const ids = ((rec.tags as { id: number }[] | undefined) ?? []).map((t) => t.id);
          if (!(await placeObjects(g, ids.length))) return [];
          return (await g.loaders.of(tags).loadMany(ids)).filter((x) => x && !(x instanceof Error));
        },
      };
    }
    return out;
  }

  /** A relation resolves to its targets' own types; targets the caller may not view are not named. */
  relationField(
    entry: Entry,
    rel: Relation | undefined,
  ): GraphQLFieldConfig<ApiRecord, GraphQLContext> | null {
    if (!rel) return null;
    const targets = this.targetsOf(rel)
      .map((label) => this.byLabel.get(label))
      .filter((e): e is Entry => !!e);
    if (!targets.length) return null;
    let type: GraphQLOutputType;
    if (targets.length === 1) type = this.objectType(targets[0]!);
    else {
      const unionName = `${entry.type}_${graphqlName(rel.name)}_Related`;
      let union = this.unions.get(unionName);
      if (!union) {
        union = new GraphQLUnionType({
          name: unionName,
          types: () => targets.map((t) => this.objectType(t)),
          resolveType: (value: ApiRecord) =>
            this.byLabel.get((value as Record<symbol, unknown>)[LABEL] as string)?.type,
        });
        this.unions.set(unionName, union);
      }
      type = union;
    }
    const allowed = new Set(targets.map((t) => t.label));
    const fixed = rel.polymorphic ? null : targets[0]!.label;
    const load = async (v: unknown, g: GraphQLContext) => {
      if (!v || typeof v !== "object") return null;
      const ref = v as { id?: unknown; object_type?: unknown };
      const label = fixed ?? (typeof ref.object_type === "string" ? ref.object_type : null);
      if (!label || !allowed.has(label) || typeof ref.id !== "number") return null;
      return g.loaders.of(this.byLabel.get(label)!).load(ref.id);
    };
    // counted before they load (a list of ids the record shows anyway), charged as loaded
    if (rel.many) {
      return {
        type: new GraphQLNonNull(new GraphQLList(new GraphQLNonNull(type))),
        resolve: async (rec, _a, g, info) => {
          const refs = (rec[rel.name] as unknown[] | null) ?? [];
          if (!(await placeObjects(g, refs.length))) return [];
          const related = (await Promise.all(refs.map((v) => load(v, g)))).filter((x) => x);
          chargeRelated(g, info, related, this.relationKeys);
          return related;
        },
      };
    }
    return {
      type,
      resolve: async (rec, _a, g, info) => {
        if (!rec[rel.name]) return null;
        if (!(await placeObjects(g, 1))) return null;
        const related = await load(rec[rel.name], g);
        chargeRelated(g, info, [related], this.relationKeys);
        return related;
      },
    };
  }

  /** The entry's `<Type>Filter` input, made once. */
  filterType(entry: Entry): GraphQLInputObjectType {
    const known = this.filterTypes.get(entry.label);
    if (known) return known;
    const shape: FilterShape = { keys: new Map(), related: new Map() };
    const type: GraphQLInputObjectType = new GraphQLInputObjectType({
      name: `${entry.type}Filter`,
      extensions: filterShapeExtensions(shape),
      fields: () => this.filterFields(entry, shape, type),
    });
    this.filterTypes.set(entry.label, type);
    return type;
  }

  /** The filter input's fields; `shape` records which GraphQL name stands for which list filter. */
  filterFields(
    entry: Entry,
    shape: FilterShape,
    type: GraphQLInputObjectType,
  ): GraphQLInputFieldConfigMap {
    const fields: GraphQLInputFieldConfigMap = {};
    // A single relation filters on its target's fields (`site: {slug: {exact: "hq"}}`), as
    // NetBox's do; an id filter of the same name moves to `<name>_id`.
    for (const rel of entry.resource.relations ?? []) {
      const target =
        !rel.polymorphic && !rel.many && rel.expr
          ? this.byLabel.get(this.targetsOf(rel)[0] ?? "")
          : undefined;
      const name = graphqlName(rel.name);
      if (!target || !name || Object.hasOwn(fields, name)) continue;
      fields[name] = { type: this.filterType(target) };
      shape.keys.set(name, rel.name);
      shape.related.set(name, { entry: target, expr: rel.expr! });
    }
    for (const [key, spec] of Object.entries(entry.resource.list.filters)) {
      if (spec.alias) continue; // a REST spelling of a filter named below
      // a per-type filter of a polymorphic field names its type: only visible types
      if (
        spec.targetTypeId !== undefined &&
        !this.byLabel.has(this.labelsById.get(spec.targetTypeId) ?? "")
      )
        continue;
      let name = graphqlName(key);
      if (name && Object.hasOwn(fields, name) && spec.kind === "number") name = `${name}_id`;
      if (!name || Object.hasOwn(fields, name)) continue;
      const kind =
        key === "id" || (key.endsWith("_id") && spec.kind === "number") || name.endsWith("_id")
          ? "id"
          : spec.kind;
      fields[name] = { type: LOOKUP_INPUTS[kind] };
      shape.keys.set(name, key);
    }
    fields.AND = { type: new GraphQLList(new GraphQLNonNull(type)) };
    fields.OR = { type: new GraphQLList(new GraphQLNonNull(type)) };
    fields.NOT = { type };
    return fields;
  }

  /**
   * Resolves every type's fields, one type a step with turns between (decision 0205): left as
   * thunks, `new GraphQLSchema` resolves them all in one stretch (~0.1–0.25 s at 300 types).
   * Maps iterate the types a step adds, so types first named by a relation are resolved too.
   */
  async resolveThunks(): Promise<void> {
    for (const type of this.objectTypes.values()) {
      await yieldWhenDue();
      type.getFields();
    }
    for (const type of this.filterTypes.values()) {
      await yieldWhenDue();
      type.getFields();
    }
    for (const union of this.unions.values()) union.getTypes();
  }

  /**
   * The root fields: `<field>(id:)` and `<field>_list(filters:, pagination:)` per entry, an
   * entry a step with turns between (decision 0217).
   */
  async queryFields(entries: Entry[]): Promise<GraphQLFieldConfigMap<unknown, GraphQLContext>> {
    const query: GraphQLFieldConfigMap<unknown, GraphQLContext> = {};
    for (const entry of entries) {
      await yieldWhenDue();
      const type = this.objectType(entry);
      const filters = this.filterType(entry);
      query[entry.field] = {
        type,
        args: { id: { type: new GraphQLNonNull(GraphQLID) } },
        resolve: async (_root, args: { id: string }, g) => {
          if (!/^\d{1,15}$/.test(String(args.id))) return null;
          if (!(await placeObjects(g, 1))) return null;
          return g.loaders.of(entry).load(Number(args.id));
        },
      };
      query[`${entry.field}_list`] = {
        type: new GraphQLNonNull(new GraphQLList(new GraphQLNonNull(type))),
        args: { filters: { type: filters }, pagination: { type: OffsetPaginationInput } },
        resolve: async (
          _root,
          args: {
            filters?: Record<string, unknown> | null;
            pagination?: { offset?: number | null; limit?: number | null } | null;
          },
          g,
        ) => {
          const records = await listRecords(
            g,
            entry,
            filters,
            args.filters ?? null,
            args.pagination ?? null,
          );
          return (await placeObjects(g, records.length)) ? records : [];
        },
      };
    }
    if (!Object.keys(query).length) {
      query.host_version = {
        type: GraphQLString,
        description: "Nothing here is visible to this caller.",
        resolve: () => null,
      };
    }
    return query;
  }
}

/** A non-relation field: its GraphQL scalar, choices as their value, selects with labels. */
function scalarField(f: FieldDescription): GraphQLFieldConfig<ApiRecord, GraphQLContext> {
  const key = f.name;
  const plain = (type: GraphQLOutputType): GraphQLFieldConfig<ApiRecord, GraphQLContext> => ({
    type,
    resolve: (rec) => rec[key] ?? null,
  });
  switch (f.kind) {
    case "integer":
      return plain(BigIntScalar);
    case "decimal":
      return plain(DecimalScalar);
    case "boolean":
      return plain(GraphQLBoolean);
    case "json":
      return plain(JSONScalar);
    case "choice":
      return {
        type: GraphQLString,
        resolve: (rec) => {
          const v = rec[key] as { value?: unknown } | string | null | undefined;
          return v && typeof v === "object" ? (v.value ?? null) : (v ?? null);
        },
      };
    case "select":
      return {
        type: ChoiceValue,
        resolve: async (rec, _a, g) =>
          rec[key] == null ? null : g.loaders.choice(f.choiceSetId ?? null, String(rec[key])),
      };
    case "multiselect":
      return {
        type: new GraphQLNonNull(new GraphQLList(new GraphQLNonNull(ChoiceValue))),
        resolve: async (rec, _a, g) =>
          Promise.all(
            ((rec[key] as unknown[] | null) ?? []).map((v) =>
              g.loaders.choice(f.choiceSetId ?? null, String(v)),
            ),
          ),
      };
    default:
      return plain(GraphQLString);
  }
}

/**
 * Builds the schema for `entries` (the models the caller may view). `labelsById` names the
 * object types that custom object relations point at. Every part is done with turns (decisions
 * 0205, 0217): the root fields an entry a step, the types' fields a type a step, the type map a
 * type a step and graphql-js's validation a few types a step (kept with the schema, so the first
 * query does not validate it in its own stretch).
 */
export async function buildSchema(
  entries: Entry[],
  labelsById: Map<number, string>,
): Promise<GraphQLSchema> {
  const builder = new SchemaBuilder(entries, labelsById);
  const fields = await builder.queryFields(entries);
  await builder.resolveThunks();
  const query = new GraphQLObjectType({ name: "Query", fields });
  await yieldWhenDue();
  query.getFields();
  const schema = await schemaWithTurns(query);
  await validateWithTurns(schema);
  return schema;
}
