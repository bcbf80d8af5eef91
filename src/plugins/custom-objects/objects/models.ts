/**
 * The run-time model registry: COT + field records → a Drizzle table, a REST `Resource` and a
 * `ModelInfo`, cached per COT and rebuilt whenever the COT's `shape_version` moves. Every lookup
 * reads that version from the database (one indexed row), so two app instances or isolates
 * sharing a database never serve a stale shape.
 */
import { asc, eq, inArray, sql, type SQL } from "drizzle-orm";
import type { Executor, Orm, Queries } from "../../../db/client";
import { Prebuilt } from "../../../db/driver-internals";
import { customObjectTypeFields, customObjectTypes, objectTypes } from "../../../db/schema";
import type { ModelInfo } from "../../../core/models/registry";
import type { FieldDescription, Resource } from "../../../core/rest/resource";
import { sumOf } from "../../../db/d1-limits";
import { yieldWhenDue } from "../../../turns";
import { APP_LABEL } from "../constants";
import { ident, linkTableName, tableName, valueColumn } from "../ddl";
import {
  FIELD_TYPE_MODULES,
  fieldType,
  type FieldRow,
  type Storage,
  type TypeKey,
} from "../field-types";
import { listSpec } from "./list";
import { modelInfo } from "./nested";
import { declareOwner } from "./owner";
import { contextRederiver, reader } from "./read";
import { shapeOf, verboseName, type CotRow, type CotTable } from "./shape";
import { writer } from "./write";
import {
  indexSchemaFrom,
  indexSchemaStatement,
  readIndexSchema,
  withSearchIndex,
} from "../search/search-index";
import type { ObjectTypeRow } from "../../../core/object-types";

export { StaleModel } from "./write";
export {
  nestedCot,
  type CotRow,
} from "./shape";

export interface CotModel {
  cot: CotRow;
  /** Fields in record order: group_name, weight, name. */
  fields: FieldRow[];
  table: CotTable;
  resource: Resource;
  info: ModelInfo;
}

/**
 * A custom object type's model, put together from its parts: the shape (fields, table), the
 * list spec, the reader, the writer and the nested forms.
 * @param embedded object type id → host model whose nested form can ride on the row query.
 */
function buildModel(
  cot: CotRow,
  rawFields: FieldRow[],
  embedded: Map<number, ModelInfo> = new Map(),
  typeKeys: ReadonlyMap<number, TypeKey> = new Map(),
): CotModel {
  const shape = shapeOf(cot, rawFields, embedded);
  const { fields, table, column, slug, moduleOf, storage } = shape;
  const read = reader(shape);
  const list = listSpec(shape, typeKeys);
  const load = read.load;
  const resource: Resource = {
    appLabel: APP_LABEL,
    model: slug,
    objectTypeId: cot.objectTypeId ?? undefined,
    verboseName: verboseName(cot),
    table,
    list,
    // Upstream's brief form carries `_context` when the type has context fields.
    briefFields: shape.contextFields.length
      ? ["id", "url", "display", "_context"]
      : ["id", "url", "display"],
    load,
    loadPlan: read.loadPlan,
    ...writer(shape, read),
    // A flat field (coordinates) is described by its parts, as it reads; companions follow.
    describe: fields.flatMap((f): FieldDescription[] => {
      const m = moduleOf.get(f)!;
      if (m.flat) return (m.parts ?? []).map((p) => ({ name: `${f.name}_${p}`, kind: "decimal" }));
      return [
        { name: f.name, kind: m.describeKind, choiceSetId: f.choiceSetId ?? null },
        ...shape.companions
          .filter((x) => x.f === f)
          .map((x) => ({ name: x.key, kind: x.c.describeKind })),
      ];
    }),
    tagged: true,
    relations: fields
      .filter((f) => storage(f) !== "column")
      .map((f) => ({
        name: f.name,
        many: storage(f) === "links",
        polymorphic: f.isPolymorphic,
        targetTypeId: f.isPolymorphic ? undefined : (f.relatedObjectTypeId ?? undefined),
        targetTypeIds: f.isPolymorphic ? f.relatedObjectTypeIds : undefined,
        expr: storage(f) === "reference" && !f.isPolymorphic ? column(valueColumn(f)!) : undefined,
        targetsOf: targetsOf(f, storage(f)),
      })),
    rederive: contextRederiver(shape),
    linkBytes: linkBytesOf(
      cot.id,
      fields.filter((f) => storage(f) === "links"),
    ),
  };

  declareOwner(shape, resource);
  const info = modelInfo(shape, resource, read);
  return { cot, fields, table, resource, info };
}

/** About what one link's nested form takes in an answer (`{id, url, display}`: ~90 bytes). */
const LINK_FORM_BYTES = 100;

/**
 * The bytes a row's multi-object links take as nested forms (decision 0190): counted through
 * each link table's `source_id` index, so a page of rows linked thousands of times each is
 * weighed before it is read.
 */
function linkBytesOf(cotId: number, linkFields: FieldRow[]): SQL | undefined {
  if (!linkFields.length) return undefined;
  const row = ident(tableName(cotId));
  return sumOf(
    linkFields.map(
      (f) =>
        sql`(SELECT count(*) FROM ${ident(linkTableName(cotId, f.id))} WHERE "source_id" = ${row}."id") * ${sql.raw(String(LINK_FORM_BYTES))}`,
    ),
  );
}

/** What a model is built from: a type's row and fields, the object types they name, its index. */
interface ModelParts {
  cot: CotRow;
  fields: FieldRow[];
  /** The object types the fields point at, by id (read step by step: the polymorphic ones'). */
  types: Map<number, ObjectTypeRow>;
  indexSchema: Map<string, string>;
  stepwise?: true;
}

/**
 * `Relation.targetsOf` of a field: the ids a multi-object field links the objects `own` to, or a
 * polymorphic one points at among objects of type `typeId` (decision 0165); none for a plain
 * reference (its column says).
 */
function targetsOf(
  f: FieldRow,
  storage: Storage,
): ((own: SQL, typeId?: number) => SQL) | undefined {
  const ofType = (column: SQL, typeId?: number) =>
    f.isPolymorphic ? sql` AND ${column} = ${typeId ?? null}` : sql``;
  if (storage === "links")
    return (own, typeId) =>
      sql`SELECT "target_id" FROM ${ident(linkTableName(f.customObjectTypeId, f.id))} WHERE "source_id" IN (${own})${ofType(sql`"target_type"`, typeId)}`;
  if (!f.isPolymorphic) return undefined;
  const row = ident(tableName(f.customObjectTypeId));
  return (own, typeId) =>
    sql`SELECT ${row}.${ident(`${f.name}_id`)} FROM ${row} WHERE ${row}."id" IN (${own})${ofType(sql`${row}.${ident(`${f.name}_type`)}`, typeId)}`;
}

/** A row of the linking statement: a field pointing at an object type, with its type's version. */
type LinkingRow = { fieldId: number; cotId: number; shapeVersion: number };
/** A type's id and shape version, as the version look-ups read them. */
type Version = { id: number; shapeVersion: number };

/** Types whose fields point at objects. */
const REFERENCE_TYPES = FIELD_TYPE_MODULES.filter((m) => m.storage !== "column").map((m) => m.name);

/** Caches built models by COT id; `shape_version` in the database decides freshness. */
export class CotRegistry {
  #models = new Map<number, CotModel>();

  constructor(
    private readonly orm: Orm,
    /** The database's `reader` (reads outside transactions may come through it too). */
    private readonly reader: Orm,
    /**
     * Host models (static shapes) by object type id, for nested forms embedded in row queries.
     * Runs on `db`: inside a write that is the open transaction, which holds the connection.
     */
    private readonly hostModels?: (
      objectTypeIds: number[],
      db: Executor,
      rows?: ReadonlyMap<number, ObjectTypeRow>,
    ) => Promise<Map<number, ModelInfo>>,
    /**
     * The database's change stamp (`core/database-stamp.ts`), or null where there is none. While
     * it is the one a slug's version was read under, nothing has committed since, so the cached
     * model is still the type's shape and the version lookup is skipped (outside transactions).
     */
    private readonly stamp: () => string | null = () => null,
    /**
     * The database's `read` (one round trip remote): there, outside transactions, a type's parts
     * are read in one go (decision 0165: a stale model costs one more round trip, not five).
     */
    private readonly read?: (queries: Queries) => Promise<readonly unknown[]>,
  ) {}

  /** The model a version lookup outside transactions found for a slug, with the stamp it was read under. */
  #checked = new Map<string, { stamp: string; model: CotModel }>();

  /** Version lookups, prepared once (Drizzle's query building is a hot spot). */
  static #version = { id: customObjectTypes.id, shapeVersion: customObjectTypes.shapeVersion };
  #versionBySlug = new Prebuilt<Version[]>((orm) =>
    orm
      .select(CotRegistry.#version)
      .from(customObjectTypes)
      .where(eq(customObjectTypes.slug, sql.placeholder("slug")))
      .limit(1),
  );
  #versionById = new Prebuilt<Version[]>((orm) =>
    orm
      .select(CotRegistry.#version)
      .from(customObjectTypes)
      .where(eq(customObjectTypes.id, sql.placeholder("id")))
      .limit(1),
  );

  /** A type's row, its fields, the object types they point at and its index: one read. */
  async #partsInOneRead(id: number): Promise<ModelParts | null> {
    const f = customObjectTypeFields;
    const reader = this.reader;
    const pointedAt = sql`SELECT ${f.relatedObjectTypeId} FROM ${f} WHERE ${f.customObjectTypeId} = ${id} AND ${f.relatedObjectTypeId} IS NOT NULL UNION SELECT je.value FROM ${f}, json_each(${f.relatedObjectTypeIds}) je WHERE ${f.customObjectTypeId} = ${id}`;
    const [cots, fields, types, schema] = (await this.read!([
      reader.select().from(customObjectTypes).where(eq(customObjectTypes.id, id)),
      reader.select().from(f).where(eq(f.customObjectTypeId, id)).orderBy(asc(f.id)),
      reader.select().from(objectTypes).where(sql`${objectTypes.id} IN (${pointedAt})`),
      reader.all(indexSchemaStatement(id)),
    ] as unknown as Queries)) as [CotRow[], FieldRow[], ObjectTypeRow[], unknown];
    const cot = cots[0];
    if (!cot) return null;
    return {
      cot,
      fields,
      types: new Map(types.map((t) => [t.id, t])),
      indexSchema: indexSchemaFrom(schema),
    };
  }

  /** The same parts step by step (inside a transaction: its own uncommitted changes). */
  async #partsStepwise(db: Executor, id: number): Promise<ModelParts | null> {
    const [cot] = await db.select().from(customObjectTypes).where(eq(customObjectTypes.id, id));
    if (!cot) return null;
    const fields = await db
      .select()
      .from(customObjectTypeFields)
      .where(eq(customObjectTypeFields.customObjectTypeId, cot.id))
      .orderBy(asc(customObjectTypeFields.id));
    const polyTypes = [
      ...new Set(fields.filter((f) => f.isPolymorphic).flatMap((f) => f.relatedObjectTypeIds)),
    ];
    const types = new Map(
      polyTypes.length
        ? (await db.select().from(objectTypes).where(inArray(objectTypes.id, polyTypes))).map(
            (ot) => [ot.id, ot] as const,
          )
        : [],
    );
    return { cot, fields, types, indexSchema: await readIndexSchema(db, cot.id), stepwise: true };
  }

  async #fresh(
    db: Executor,
    row: Pick<CotRow, "id" | "shapeVersion"> | undefined,
  ): Promise<CotModel | null> {
    if (!row) return null;
    const cached = this.#models.get(row.id);
    if (cached && cached.cot.shapeVersion === row.shapeVersion) return cached;
    // where a read costs a round trip (no change stamp), outside transactions: one read
    const oneRead = this.read && (db === this.orm || db === this.reader) && this.stamp() === null;
    const parts = oneRead
      ? await this.#partsInOneRead(row.id)
      : await this.#partsStepwise(db, row.id);
    if (!parts) return null;
    const { cot, fields, types } = parts;
    const targets = fields
      .filter(
        (f) =>
          fieldType(f.type).storage !== "column" &&
          !f.isPolymorphic &&
          f.relatedObjectTypeId != null,
      )
      .map((f) => f.relatedObjectTypeId!);
    // Polymorphic fields' per-type filters are named after their types: `<app_label>_<model>` for
    // host models; custom object types by object type id, as their slugs are hidden from callers
    // who may not view them and filter names are the same for every caller (decision 0046).
    const polyTypes = new Set(
      fields.filter((f) => f.isPolymorphic).flatMap((f) => f.relatedObjectTypeIds),
    );
    const typeKeys = new Map(
      [...types.values()]
        .filter((ot) => polyTypes.has(ot.id))
        .map(
          (ot) =>
            [
              ot.id,
              {
                key:
                  ot.appLabel === APP_LABEL
                    ? `${APP_LABEL}_${ot.id}`
                    : `${ot.appLabel}_${ot.model}`,
                label: `${ot.appLabel}.${ot.model}`,
              },
            ] as const,
        ),
    );
    const model = buildModel(
      cot,
      fields,
      targets.length && this.hostModels
        ? await this.hostModels(targets, db, parts.stepwise ? undefined : types)
        : new Map(),
      typeKeys,
    );
    // `q` and text lookups narrowed through the type's full-text index, when it is current (decision 0050).
    model.resource.list = withSearchIndex(model.resource.list, cot.id, fields, parts.indexSchema);
    // Only cache what was read outside a transaction's uncommitted changes (callers pass the ORM).
    this.#models.set(cot.id, model);
    return model;
  }

  async bySlug(db: Executor, slug: string): Promise<CotModel | null> {
    const stamp = db === this.orm || db === this.reader ? this.stamp() : null;
    if (stamp) {
      const seen = this.#checked.get(slug);
      if (seen?.stamp === stamp) return seen.model;
    }
    const [row] = await this.#versionBySlug.with(db, { slug }, this.orm);
    const model = await this.#fresh(db, row);
    if (stamp && model) {
      if (this.#checked.size >= 1000) this.#checked.clear();
      this.#checked.set(slug, { stamp, model });
    }
    return model;
  }

  /**
   * The type's model as its row now says (`shapeVersion`, read by a guard that found the cached one
   * stale), read outside transactions; none kept when it cannot be read.
   */
  async refresh(id: number, shapeVersion: number): Promise<void> {
    this.forget(id);
    try {
      await this.#fresh(this.reader, { id, shapeVersion });
    } catch {
      this.forget(id); // read when next asked for, the usual way
    }
  }

  async byId(db: Executor, id: number): Promise<CotModel | null> {
    const [row] = await this.#versionById.with(db, { id }, this.orm);
    return this.#fresh(db, row);
  }

  /**
   * Every COT's model, fresh, in id order, with a signature of their shape versions (one
   * statement when nothing changed): readers that build something from all types at once
   * (GraphQL) rebuild it when the signature moves.
   */
  async all(db: Executor): Promise<{ signature: string; models: CotModel[] }> {
    const rows = await this.#versions.with(db, {}, this.orm);
    const models: CotModel[] = [];
    for (const row of rows) {
      // after a schema change every type's model is built again: turns between them (0205)
      await yieldWhenDue();
      const model = await this.#fresh(db, row);
      if (model) models.push(model);
    }
    const all = { signature: rows.map((r) => `${r.id}:${r.shapeVersion}`).join(","), models };
    if (db === this.orm || db === this.reader) this.#all = all;
    return all;
  }

  /** What `all` last read outside a transaction. */
  #all: { signature: string; models: CotModel[] } | null = null;

  /**
   * `all` from what it last read, with the guard that proves it current in the caller's one read
   * (every type's id and shape version; decision 0085); null until `all` has read once.
   */
  allGuarded() {
    const cached = this.#all;
    if (!cached) return null;
    return {
      all: cached,
      guard: {
        name: "custom object types",
        statements: [
          this.reader
            .select(CotRegistry.#version)
            .from(customObjectTypes)
            .orderBy(asc(customObjectTypes.id)),
        ],
        settle: async ([rows]: unknown[]): Promise<boolean> => {
          const versions = rows as Array<{ id: number; shapeVersion: number }>;
          if (versions.map((r) => `${r.id}:${r.shapeVersion}`).join(",") === cached.signature)
            return true;
          await this.all(this.reader);
          return false;
        },
      },
    };
  }

  #versions = new Prebuilt<Version[]>((orm) =>
    orm.select(CotRegistry.#version).from(customObjectTypes).orderBy(asc(customObjectTypes.id)),
  );

  /** A model this registry already holds for `slug`, without asking the database. */
  cachedBySlug(slug: string): CotModel | null {
    for (const model of this.#models.values()) if (model.cot.slug === slug) return model;
    return null;
  }

  /** A model this registry already holds for the type of object type `objectTypeId`. */
  cachedByObjectType(objectTypeId: number): CotModel | null {
    for (const model of this.#models.values())
      if (model.cot.objectTypeId === objectTypeId) return model;
    return null;
  }

  /**
   * Every field that can point at objects of `objectTypeId` (ordered by COT, then field), with
   * its model. One prepared statement reads the fields' ids together with their COTs' shape
   * versions; the field definitions come from the models those versions validate.
   */
  async fieldsPointingAt(
    db: Executor,
    objectTypeId: number,
  ): Promise<{ field: FieldRow; model: CotModel }[]> {
    return this.#linkingFrom(db, await this.#linking.with(db, { ot: objectTypeId }, this.orm));
  }

  /**
   * `fieldsPointingAt` kept per object type with its proof — the linking statement's rows (field
   * ids with their types' shape versions) — for a caller's one read: `statement` reads them again
   * beside the caller's own (a guard, `core/fresh-read.ts`), `settle` compares, and on a change
   * brings the entry up to date and answers false (decision 0085). Null until first read.
   */
  linkingGuarded(objectTypeId: number) {
    const cached = this.#linkingCache.get(objectTypeId);
    if (!cached) return null;
    return {
      fields: cached.fields,
      statement: this.#linkingQuery(this.reader).where(this.#linkingWhere(objectTypeId)),
      /** The same proof as a batch statement: it fails the batch unless the rows are as kept. */
      guard: (orm: Orm) => this.#linkingGuard(orm, objectTypeId, cached.proof),
      settle: async (rows: unknown): Promise<boolean> => {
        const proof = JSON.stringify(rows);
        if (proof === cached.proof) return true;
        const fields = await this.#linkingFrom(this.reader, rows as LinkingRow[]);
        this.#linkingCache.set(objectTypeId, { proof, fields });
        return false;
      },
    };
  }

  /** Reads `fieldsPointingAt` for `linkingGuarded` to keep (outside transactions). */
  async loadLinking(objectTypeId: number) {
    const rows = await this.#linking.with(this.reader, { ot: objectTypeId }, this.orm);
    const fields = await this.#linkingFrom(this.reader, rows);
    this.keepLinking(objectTypeId, rows, fields);
    return fields;
  }

  /** Keeps `fields` (resolved from `rows`, `pointingQuery`'s answer) for `linkingGuarded`. */
  keepLinking(
    objectTypeId: number,
    rows: LinkingRow[],
    fields: { field: FieldRow; model: CotModel }[],
  ) {
    if (this.#linkingCache.size >= 1000) this.#linkingCache.clear();
    this.#linkingCache.set(objectTypeId, { proof: JSON.stringify(rows), fields });
  }

  #linkingCache = new Map<
    number,
    { proof: string; fields: { field: FieldRow; model: CotModel }[] }
  >();

  /** `fieldsPointingAt`'s read as a query (for a read phase); `pointingFields` resolves its rows. */
  pointingQuery(db: Executor, objectTypeId: number) {
    return this.#linkingQuery(db).where(this.#linkingWhere(sql`${objectTypeId}`));
  }

  /** The fields and models of `pointingQuery`'s rows. */
  pointingFields(db: Executor, rows: LinkingRow[]) {
    return this.#linkingFrom(db, rows);
  }

  async #linkingFrom(db: Executor, rows: LinkingRow[]) {
    const out: { field: FieldRow; model: CotModel }[] = [];
    for (const row of rows) {
      const model = await this.#fresh(db, { id: row.cotId, shapeVersion: row.shapeVersion });
      const field = model?.fields.find((f) => f.id === row.fieldId);
      if (model && field) out.push({ field, model });
    }
    return out;
  }

  #linkingQuery(db: Executor) {
    const f = customObjectTypeFields;
    const t = customObjectTypes;
    return db
      .select({ fieldId: f.id, cotId: f.customObjectTypeId, shapeVersion: t.shapeVersion })
      .from(f)
      .innerJoin(t, eq(t.id, f.customObjectTypeId))
      .orderBy(f.customObjectTypeId, f.id)
      .$dynamic();
  }

  /** A guard that the linking statement's rows for `ot` are those of `proof` (in order). */
  #linkingGuard(orm: Orm, ot: number, proof: string) {
    const rows = JSON.parse(proof) as LinkingRow[];
    const print = rows.map((r) => `${r.fieldId}:${r.cotId}:${r.shapeVersion}`).join(",");
    const f = customObjectTypeFields;
    const t = customObjectTypes;
    const each = sql`SELECT ${f.id} || ':' || ${f.customObjectTypeId} || ':' || ${t.shapeVersion} AS p FROM ${f} INNER JOIN ${t} ON ${t.id} = ${f.customObjectTypeId} WHERE ${this.#linkingWhere(ot)} ORDER BY ${f.customObjectTypeId}, ${f.id}`;
    return orm.run(
      sql`INSERT INTO write_guard (ok) SELECT coalesce((SELECT group_concat(p, ',') FROM (${each})), '') = ${print}`,
    );
  }

  #linkingWhere(ot: unknown) {
    const f = customObjectTypeFields;
    return sql`${f.type} IN (${sql.join(
      REFERENCE_TYPES.map((t) => sql`${t}`),
      sql`, `,
    )}) AND (${f.relatedObjectTypeId} = ${ot} OR (${f.isPolymorphic} = 1 AND EXISTS (SELECT 1 FROM json_each(${f.relatedObjectTypeIds}) je WHERE je.value = ${ot})))`;
  }

  #linking = new Prebuilt<LinkingRow[]>((orm) =>
    this.#linkingQuery(orm).where(this.#linkingWhere(sql.placeholder("ot"))),
  );

  forget(id: number) {
    this.#models.delete(id);
  }
}
