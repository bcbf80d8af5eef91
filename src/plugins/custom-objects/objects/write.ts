/**
 * Writing objects of a custom object type: one prepared preflight statement, input conversion
 * through the field type modules, reference and uniqueness checks, the prepared
 * INSERT … RETURNING, updates, link-table writes and deletes.
 */
import { MAX_LINKS_PER_VALUE } from "../../../core/limits";
import type { InValue } from "@libsql/client";
import {
  and,
  eq,
  getTableColumns,
  getTableName,
  Param,
  Placeholder,
  sql,
  type DriverValueEncoder,
  type SQL,
} from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import type { Orm } from "../../../db/client";
import { executePositional, Prebuilt } from "../../../db/driver-internals";
import { choiceSets, customObjectTypes, owners, tags } from "../../../db/schema";
import { editStamp, nowIso } from "../../../db/schema/common";
import { ApiError, ErrorCollector, ValidationError, type FieldErrors } from "../../../core/errors";
import { mapConstraintError } from "../../../core/rest/constraints";
import { viewableRefs } from "../../../core/auth/restrict";
import { resolveTags, setTags } from "../../../core/models/define";
import { nameableTags } from "../../../core/models/tag-scope";
import { takeRestoreId } from "../../../core/changes/restore-id";
import { partialClash } from "../schema/constraints";
import {
  clashExplainer,
  explainClashes,
  refusedByKeyOf,
  type UniqueKey,
  type WrittenRow,
} from "../../../core/models/unique-clash";
import type { ModelInfo } from "../../../core/models/registry";
import type { ApiRecord, Resource, WriteContext } from "../../../core/rest/resource";
import { APP_LABEL } from "../constants";
import {
  LOCAL_CONTEXT_COLUMN,
  fieldColumns,
  ident,
  linkTableName,
  tableName,
  valueColumn,
} from "../ddl";
import type { FieldRow, ScalarEncoder, Storage } from "../field-types";
import { plainRef, resolveRef } from "../field-types/reference";
import { scalarEncoder, takeCompanions } from "./values";
import { scheduleSearchFlush } from "../search/flush";
import type { Nested, Reader } from "./read";
import { hasOwner, writeOwner } from "./owner";
import { relatedInfos, verboseName, type Shape } from "./shape";
import { stagedObjectWrites } from "./staged";
import { yieldWhenDue } from "../../../turns";

/**
 * A write started from a cached model whose COT has changed (or gone) since: nothing has been
 * written yet, and `liveResource` retries with the model read inside its transaction. Should it
 * ever reach a client, it is the same retryable 409 as a read that raced a schema change.
 */
export class StaleModel extends ApiError {
  constructor() {
    super(409, {
      detail: "The object type changed while this request ran; retry it.",
      error: "schema_changed",
    });
  }
}

export type Writer = Required<
  Pick<
    Resource,
    "createLoaded" | "createMany" | "create" | "update" | "delete" | "fieldForColumn" | "staged"
  >
>;

export type Ref = { typeId: number; id: number };
export type Pending = { field: FieldRow; ref: Ref };
export type Preflight = { choices: Map<number, Set<string>>; found: (field: string) => boolean };
/** A bulk create's shared state: one preflight, and the references its chunk names. */
type Batch = { pre: Preflight; pending: Pending[] };
/** The related objects a bulk create has found so far (`typeId:id`), with their nested forms. */
export type Seen = { found: Set<string>; nested: Nested };
export type Converted = {
  values: Record<string, unknown>;
  multi: Map<FieldRow, Ref[]>;
  tagIds: number[] | null;
};

/**
 * Where a conversion's look-ups come from: the database as it goes (`ObjectWriter.live`, inside a
 * transaction), or what a staged write's read phase already read (`objects/staged.ts`).
 */
export interface Lookups {
  preflight(ctx: WriteContext, refIds: Record<string, number | null>): Promise<Preflight>;
  existingRefs(ctx: WriteContext, pending: Pending[]): Promise<Seen>;
  unviewable(ctx: WriteContext, refs: Pending[]): Promise<Pending[]>;
  heldRefs(
    ctx: WriteContext,
    existing: Record<string, any>,
    refs: Pending[],
  ): Promise<Set<Pending>>;
  /** The tags `raw` names: those the writer may view, and those `existing` holds (0153). */
  tags(
    ctx: WriteContext,
    raw: unknown,
    existing: Record<string, any> | null,
  ): Promise<{ ids: number[] } | { error: string }>;
  /** Whether the owner `id` exists and the writer may view it. */
  owner(ctx: WriteContext, id: number): Promise<boolean>;
}

/** Most rows one multi-row INSERT carries (SQLite binds at most 32,766 values per statement). */
const INSERT_ROWS = 100;
const MAX_BOUND = 16_000;

/**
 * A field as `convert` takes it: its storage, its columns (a reference's id and type columns)
 * and, for a column, its encoder.
 */
type FieldPlan = {
  f: FieldRow;
  kind: Storage;
  columns: string[];
  encode: ScalarEncoder | null;
};

/** The choices of a field whose choice set the preflight did not find: none. */
const NO_CHOICES: ReadonlySet<string> = new Set();

/** One input's conversion under way: what it has produced and found wrong so far. */
type Conversion = {
  errors: ErrorCollector;
  values: Record<string, unknown>;
  multi: Map<FieldRow, Ref[]>;
  pre: Preflight;
  /** The ids the request names in host-model object fields (the preflight checked them). */
  refIds: Record<string, number | null>;
  /** References still to check for existence (a bulk's are shared by its chunk). */
  pending: Pending[];
  /** Every reference this input names, for the visibility check. */
  named: Pending[];
  /** Part of a bulk create's chunk (`convert`'s `batch`). */
  batched: boolean;
  look: Lookups;
};

/** A multi-row INSERT of a given size, compiled once (see `ObjectWriter.insertManyStatement`). */
type InsertMany = {
  sql: string;
  slots: Int32Array;
  constants: unknown[];
  encoders: Array<DriverValueEncoder<unknown, unknown> | undefined>;
};

/** A VALUES tuple as Drizzle writes one row of placeholders (`null` for the id). */
const ROW_TUPLE = /^\((?:\?|null)(?:, (?:\?|null))*\)$/;

/**
 * A one-row INSERT (`one`) for `n` rows, as Drizzle writes them: its VALUES tuple `n` times,
 * joined by ", ", each row's slots `width` on from the last; what follows the tuple (RETURNING,
 * with any values it binds) once, after them.
 */
export function repeatRows(one: InsertMany, n: number, width: number): InsertMany {
  const start = one.sql.indexOf(" values (") + 1 + "values ".length;
  const end = one.sql.indexOf(")", start) + 1;
  const tuple = one.sql.slice(start, end);
  if (start === "values ".length || !ROW_TUPLE.test(tuple))
    throw new Error(`repeatRows: not a one-row INSERT: ${one.sql}`);
  const perRow = tuple.split("?").length - 1;
  const total = perRow * n + one.slots.length - perRow;
  const slots = new Int32Array(total);
  const constants: unknown[] = new Array(total);
  const encoders: InsertMany["encoders"] = new Array(total);
  for (let k = 0; k < total; k++) {
    // a row's position, or (past the rows) one of what follows the tuple
    const row = k < perRow * n ? Math.floor(k / perRow) : -1;
    const p = row < 0 ? k - perRow * (n - 1) : k - row * perRow;
    const slot = one.slots[p]!;
    slots[k] = slot < 0 || row < 0 ? slot : row * width + slot;
    constants[k] = one.constants[p];
    encoders[k] = one.encoders[p];
  }
  const rows = Array.from({ length: n }, () => tuple).join(", ");
  return { sql: one.sql.slice(0, start) + rows + one.sql.slice(end), slots, constants, encoders };
}

/**
 * A multi-row INSERT's bound values, in one loop over its slots: straight from the rows, with no
 * flattened copy of them and no callback per value (2,300 values per chunk of 100 rows).
 */
function positionalArgs(
  q: InsertMany,
  rowsIn: Array<Record<string, unknown>>,
  columns: readonly string[],
): InValue[] {
  const { slots, constants, encoders } = q;
  const width = columns.length;
  const args = new Array<InValue>(slots.length);
  for (let k = 0; k < slots.length; k++) {
    const slot = slots[k]!;
    if (slot < 0) {
      args[k] = constants[k] as InValue;
      continue;
    }
    const value = rowsIn[Math.floor(slot / width)]![columns[slot % width]!];
    const encoder = encoders[k];
    args[k] = (encoder ? encoder.mapToDriverValue(value) : value) as InValue;
  }
  return args;
}

const notFoundMessage = (id: number) =>
  `Related object not found using the provided numeric ID: ${id}`;

const isObjectValue = (x: unknown) => !!x && typeof x === "object" && !Array.isArray(x);

/**
 * One prepared statement starts every write: the COT's shape version and slug (a write that
 * began from a cached model that has gone stale stops here, before writing anything), the
 * allowed values of its choice sets, and whether the host objects named by the request's
 * object fields exist. Other references (polymorphic, multiobject, custom objects) are
 * checked by `existingRefs`.
 */
function preflightStatement(shape: Shape) {
  const { cot, embedded, embeddedFields } = shape;
  const preflightColumns = preflightColumnsOf(shape);
  for (const f of embeddedFields) {
    preflightColumns[`ref_${f.name}`] =
      sql<number>`${embedded.get(f.relatedObjectTypeId!)!.nestedSql!.selectOne!(sql`${sql.placeholder(f.name)}`)} IS NOT NULL`;
  }
  return new Prebuilt<Record<string, unknown>[]>((orm) =>
    orm.select(preflightColumns).from(customObjectTypes).where(eq(customObjectTypes.id, cot.id)),
  );
}

/** `ObjectWriter.staged`: statements of staged writes that depend on the shape only. */
function stagedStatements(w: ObjectWriter): ObjectWriter["staged"] {
  const t = customObjectTypes;
  const { cot, slug, table } = w;
  return {
    preflight: new Prebuilt((orm) =>
      orm.select(w.preflightColumns).from(t).where(sql`${t.id} = ${cot.id}`),
    ),
    shapeGuard: new Prebuilt((orm) =>
      orm.run(
        sql`INSERT INTO write_guard (ok) SELECT EXISTS (SELECT 1 FROM ${t} WHERE ${t.id} = ${cot.id} AND ${t.shapeVersion} = ${cot.shapeVersion} AND ${t.slug} = ${slug})`,
      ),
    ),
    insertOne: new Prebuilt((orm) =>
      orm
        .insert(table)
        .values(
          Object.fromEntries(w.insertColumns.map((key) => [key, sql.placeholder(key)])) as never,
        )
        .returning({ id: table.id }),
    ),
  };
}

/** The preflight's columns but the references: the type's shape version and slug, its choices. */
function preflightColumnsOf(shape: Shape): Record<string, SQLiteColumn | SQL> {
  const { fields } = shape;
  const choiceSetIds = [
    ...new Set(fields.map((f) => f.choiceSetId).filter((x): x is number => x != null)),
  ];
  const preflightColumns: Record<string, SQLiteColumn | SQL> = {
    v: customObjectTypes.shapeVersion,
    slug: customObjectTypes.slug,
  };
  if (choiceSetIds.length) {
    preflightColumns.choices = sql<string>`(SELECT json_group_object(cs.id, json(cs.extra_choices)) FROM ${ident(getTableName(choiceSets))} cs WHERE cs.id IN (${sql.join(
      choiceSetIds.map((id) => sql`${id}`),
      sql`, `,
    )}))`;
  }
  return preflightColumns;
}

/** Names a write may give besides the fields (`tags` aside); the owner and local context data where the type has them. */
function reservedNames(shape: Shape, owned: boolean): Set<string> {
  const reserved = new Set([
    "id",
    "url",
    "display",
    "display_url",
    "created",
    "last_updated",
    "custom_object_type",
    "_context",
  ]);
  if (owned) reserved.add("owner");
  if (shape.cot.configContextEnabled) reserved.add(LOCAL_CONTEXT_COLUMN);
  return reserved;
}

/** The id an object-field value names (`{id}` or the id itself), or null when it names none. */
function embeddedId(raw: unknown): number | null {
  const id =
    raw && typeof raw === "object" && !Array.isArray(raw)
      ? (raw as Record<string, unknown>).id
      : raw;
  return typeof id === "number" && Number.isInteger(id) ? id : null;
}

export function writer(shape: Shape, read: Reader): Writer {
  const w = new ObjectWriter(shape, read);
  return {
    createLoaded: (ctx, input) => w.createLoaded(ctx, input),
    createMany: (ctx, inputs) => w.createMany(ctx, inputs),
    create: (ctx, input) => w.create(ctx, input),
    update: (ctx, id, input, partial) => w.update(ctx, id, input, partial),
    delete: (ctx, id) => w.delete(ctx, id),
    fieldForColumn: (column) => w.fieldForColumn(column),
    staged: stagedObjectWrites(w),
  };
}

/** A transaction's clash explanation (`uniqueChecked`): its reads run in the transaction. */
const inTransaction = (ctx: WriteContext, rows: WrittenRow[]) => ({
  orm: ctx.db as Orm,
  rows,
  bulk: false,
  async read(reads: unknown[]) {
    const out: unknown[] = [];
    for (const r of reads) out.push(await (r as PromiseLike<unknown>));
    return out;
  },
});

/** The writes of one custom object type; its fields are what every write of the type shares. */
export class ObjectWriter {
  readonly cot: Shape["cot"];
  readonly fields: FieldRow[];
  readonly table: Shape["table"];
  readonly slug: string;
  readonly embeddedFields: FieldRow[];
  readonly preflightQuery: ReturnType<typeof preflightStatement>;
  /** The preflight's columns without references, for a staged write's read phase. */
  readonly preflightColumns: Record<string, SQLiteColumn | SQL>;
  readonly preflighted: Set<FieldRow>;
  /** Fields whose values come in parts (coordinates), with their parts. */
  readonly partFields: Array<{ f: FieldRow; parts: readonly string[] }>;
  readonly owned: boolean;
  readonly reserved: Set<string>;
  /** The names an input may give once its parts are folded and companions taken. */
  readonly known: Set<string>;
  readonly insertColumns: string[];
  readonly insertQuery: Prebuilt<Record<string, any>[]>;
  readonly insertMany = new Map<number, InsertMany>();
  /**
   * A staged write's statements that repeat with the shape, built once per shape and ORM
   * (decision 0104): the read phase's preflight, the shape guard, the INSERT of one row.
   */
  readonly staged: {
    preflight: Prebuilt<Record<string, unknown>[]>;
    shapeGuard: Prebuilt<unknown>;
    insertOne: Prebuilt<Array<{ id: unknown }>>;
  };
  readonly bulkReturning: Record<string, SQLiteColumn | SQL>;
  /** Inputs per chunk of a bulk create: one multi-row INSERT stays under `MAX_BOUND` values. */
  readonly chunkRows: number;
  /** Each field's storage and, for a column, its encoder: looked up once, not per row and field. */
  readonly plans: FieldPlan[];

  constructor(
    readonly shape: Shape,
    readonly read: Reader,
  ) {
    const { cot, fields, table, slug, moduleOf, embeddedFields } = shape;
    const { rowColumns } = read;
    this.cot = cot;
    this.fields = fields;
    this.table = table;
    this.slug = slug;
    this.embeddedFields = embeddedFields;
    this.preflightQuery = preflightStatement(shape);
    this.preflightColumns = preflightColumnsOf(shape);
    this.preflighted = new Set(embeddedFields);
    this.partFields = fields.flatMap((f) => {
      const parts = moduleOf.get(f)!.parts;
      return parts ? [{ f, parts }] : [];
    });
    this.owned = hasOwner(shape);
    this.reserved = reservedNames(shape, this.owned);
    this.known = new Set([...shape.byName.keys(), ...this.reserved, "tags"]);
    // A create writes every column through one prepared statement whose RETURNING clause is the
    // row query's select list, so the new record needs no second read.
    const insertColumns = Object.keys(getTableColumns(table)).filter((key) => key !== "id");
    this.insertColumns = insertColumns;
    this.insertQuery = new Prebuilt((orm) =>
      orm
        .insert(table)
        .values(Object.fromEntries(insertColumns.map((key) => [key, sql.placeholder(key)])) as any)
        .returning(rowColumns as any),
    );
    this.staged = stagedStatements(this);
    // read by position: Drizzle names no SQL expression in the RETURNING list
    this.bulkReturning = {
      id: table.id,
      ...(shape.primaryLabel ? { __label: shape.primaryLabel } : {}),
    };
    this.chunkRows = Math.max(
      1,
      Math.min(INSERT_ROWS, Math.floor(MAX_BOUND / (insertColumns.length + 1))),
    );
    this.plans = fields.map((f) => {
      const kind = shape.storage(f);
      return {
        f,
        kind,
        columns: fieldColumns(f),
        encode: kind === "column" ? scalarEncoder(f) : null,
      };
    });
  }

  /** Look-ups that read the database as the conversion goes (inside a transaction). */
  readonly live: Lookups = {
    preflight: (ctx, refIds) => this.preflight(ctx, refIds),
    existingRefs: (ctx, pending) => this.existingRefs(ctx, pending),
    unviewable: (ctx, refs) => unviewable(ctx, refs),
    heldRefs: (ctx, existing, refs) => this.heldRefs(ctx, existing, refs),
    tags: async (ctx, raw, existing) => {
      const held = existing ? Number(existing.id) : null;
      const nameable = await nameableTags(ctx, sql`${tags.id}`, this.cot.objectTypeId!, held);
      return resolveTags(ctx, raw, APP_LABEL, this.slug, nameable);
    },
    owner: async (ctx, id) => {
      const [found] = await ctx.db
        .select({ id: owners.id })
        .from(owners)
        .where(eq(owners.id, id))
        .limit(1);
      return !!found && (await viewableRefs(ctx, ctx.auth, "users", "owner", [id])).has(id);
    },
  };

  async preflight(ctx: WriteContext, refIds: Record<string, number | null>): Promise<Preflight> {
    const [row] = (await this.preflightQuery.with(ctx.db, refIds, ctx.services.db.orm)) as Record<
      string,
      any
    >[];
    if (!row || row.v !== this.cot.shapeVersion || row.slug !== this.slug) throw new StaleModel();
    const choices = new Map<number, Set<string>>();
    for (const [id, pairs] of Object.entries(
      JSON.parse(row.choices ?? "{}") as Record<string, [string, string][]>,
    )) {
      choices.set(Number(id), new Set(pairs.map(([v]) => v)));
    }
    return { choices, found: (field: string) => row[`ref_${field}`] === 1 };
  }

  /**
   * Which of the pending references exist (`typeId:id`), and the nested forms of those found by
   * type id (what serialising the new rows needs): one statement for every target type.
   */
  async existingRefs(ctx: WriteContext, pending: Pending[]) {
    const infos = await relatedInfos(ctx, [...new Set(pending.map((p) => p.ref.typeId))]);
    // each object once (a bulk of 1,000 names its 100 sites 10 times each)
    const byType = new Map<number, Set<number>>();
    for (const { ref } of pending)
      if (infos.has(ref.typeId))
        (byType.get(ref.typeId) ?? byType.set(ref.typeId, new Set()).get(ref.typeId)!).add(ref.id);
    const groups = [...byType].map(
      ([typeId, ids]) => [infos.get(typeId)!, [...ids]] as [ModelInfo, number[]],
    );
    const byInfo = await ctx.services.models.nestedMany(ctx, groups);
    const found = new Set<string>();
    const nested: Nested = new Map();
    for (const [typeId, ids] of byType) {
      const forms = byInfo.get(infos.get(typeId)!);
      if (forms) nested.set(typeId, forms);
      for (const id of ids) if (forms?.has(id)) found.add(`${typeId}:${id}`);
    }
    return { found, nested };
  }

  /**
   * The references among `refs` that the row `existing` already holds: they may stay though the
   * writer cannot view their targets (a PUT echoes them back); new ones may not (decision 0064).
   */
  async heldRefs(
    ctx: WriteContext,
    existing: Record<string, any>,
    refs: Pending[],
  ): Promise<Set<Pending>> {
    const out = new Set<Pending>();
    for (const p of refs) {
      const f = p.field;
      if (this.shape.storage(f) === "reference") {
        const [idCol, typeCol] = fieldColumns(f);
        if (existing[idCol!] === p.ref.id && (!typeCol || existing[typeCol] === p.ref.typeId))
          out.add(p);
        continue;
      }
      const rows = (await ctx.db.all(
        sql`SELECT 1 AS x FROM ${ident(linkTableName(this.cot.id, f.id))} WHERE source_id = ${existing.id} AND target_id = ${p.ref.id} AND (target_type IS NULL OR target_type = ${p.ref.typeId}) LIMIT 1`,
      )) as unknown[];
      if (rows.length) out.add(p);
    }
    return out;
  }

  /**
   * `<name>_<part>` keys of part-valued fields (coordinates) folded into `<name>`; a module with
   * `partErrors` has its problems keyed by part (`<name>_latitude`), and the field then left out.
   */
  foldParts(
    input: ApiRecord,
    existing: Record<string, any> | null,
    errors: ErrorCollector,
  ): ApiRecord {
    let out = input;
    for (const { f, parts } of this.partFields) {
      const m = this.shape.moduleOf.get(f)!;
      const direct = Object.hasOwn(input, f.name);
      if (!direct && !parts.some((p) => Object.hasOwn(input, `${f.name}_${p}`))) continue;
      if (out === input) out = { ...input };
      const stored = existing ? m.decode(existing[f.name]) : null;
      const given = direct ? input[f.name] : stored;
      const value: Record<string, unknown> = {};
      for (const p of parts) {
        const key = `${f.name}_${p}`;
        value[p] = Object.hasOwn(input, key)
          ? input[key]
          : given && typeof given === "object"
            ? ((given as Record<string, unknown>)[p] ?? null)
            : null;
        delete out[key];
      }
      const problems =
        m.partErrors && (!direct || isObjectValue(given)) ? m.partErrors(value) : null;
      if (problems) {
        for (const [p, message] of Object.entries(problems)) errors.add(`${f.name}_${p}`, message);
        delete out[f.name];
        continue;
      }
      out[f.name] = parts.every((p) => value[p] === null || value[p] === undefined) ? null : value;
    }
    return out;
  }

  /**
   * Validates and encodes one input. With `batch` (a bulk create), the batch's preflight is used,
   * every reference goes to `batch.pending` for one check of the whole chunk, and an invalid
   * input answers null at once: its chunk is then redone item by item through the single path,
   * which names every problem (uniqueness clashes with earlier items included).
   */
  async convert(
    ctx: WriteContext,
    input: ApiRecord,
    existing: Record<string, any> | null,
    partial: boolean,
    batch?: undefined,
    look?: Lookups,
  ): Promise<Converted>;
  async convert(
    ctx: WriteContext,
    input: ApiRecord,
    existing: null,
    partial: false,
    batch: Batch,
  ): Promise<Converted | null>;
  async convert(
    ctx: WriteContext,
    input: ApiRecord,
    existing: Record<string, any> | null,
    partial: boolean,
    batch?: Batch,
    look: Lookups = this.live,
  ): Promise<Converted | null> {
    const errors = new ErrorCollector();
    // Keyed by column names only, and without a prototype, so a missing key is never inherited.
    const values: Record<string, unknown> = Object.create(null);
    input = await this.convertReserved(ctx, input, existing, values, errors, look);
    if (batch && !errors.empty) return null;
    const refIds: Record<string, number | null> = batch
      ? Object.create(null)
      : this.embeddedRefIds(input, existing);
    const st: Conversion = {
      errors,
      values,
      multi: new Map(),
      pre: batch ? batch.pre : await look.preflight(ctx, refIds),
      refIds,
      pending: batch ? batch.pending : [],
      named: [],
      batched: !!batch,
      look,
    };
    for (const plan of this.plans) {
      // a scalar converts synchronously: no promise per field and row (a bulk of 1,000 has 20,000)
      const pending = this.convertField(ctx, st, plan, input, existing, partial);
      if (pending) await pending;
    }
    if (batch && !errors.empty) return null;
    if (!batch) await this.checkRefs(ctx, st, existing);
    let tagIds: number[] | null = null;
    if (Object.hasOwn(input, "tags")) {
      const r = await look.tags(ctx, input.tags, existing);
      if ("error" in r) errors.add("tags", r.error);
      else tagIds = r.ids;
    }
    if (batch && !errors.empty) return null;
    // A valid write leaves unique values to the UNIQUE indexes (see `uniqueChecked`); a write
    // that fails anyway looks them up so its 400 names every problem at once.
    if (!errors.empty) await this.addUniqueClashes(ctx, existing, values, errors);
    errors.throwIfAny();
    return { values, multi: st.multi, tagIds };
  }

  /**
   * The names besides the fields: parts folded, companions taken, the owner and local context
   * data converted, unknown names refused. Answers the input with its parts folded.
   */
  async convertReserved(
    ctx: WriteContext,
    input: ApiRecord,
    existing: Record<string, any> | null,
    values: Record<string, unknown>,
    errors: ErrorCollector,
    look: Lookups,
  ): Promise<ApiRecord> {
    input = this.foldParts(input, existing, errors);
    input = takeCompanions(this.shape.companions, input, values, errors);
    if (this.owned)
      await writeOwner(this.shape, input, values, errors, (id) => look.owner(ctx, id));
    // Config context data (upstream): a JSON object or null, on types that opted in.
    if (this.cot.configContextEnabled && Object.hasOwn(input, LOCAL_CONTEXT_COLUMN)) {
      const data = input[LOCAL_CONTEXT_COLUMN];
      if (data !== null && (typeof data !== "object" || Array.isArray(data)))
        errors.add(LOCAL_CONTEXT_COLUMN, "Must be a JSON object or null.");
      else values[LOCAL_CONTEXT_COLUMN] = data === null ? null : JSON.stringify(data);
    }
    for (const key of Object.keys(input))
      if (!this.known.has(key)) errors.add(key, "Unknown field.");
    return input;
  }

  /** The ids the request names in host-model object fields, for the preflight statement. */
  embeddedRefIds(
    input: ApiRecord,
    existing: Record<string, any> | null,
  ): Record<string, number | null> {
    const refIds: Record<string, number | null> = Object.create(null);
    for (const f of this.embeddedFields) {
      const raw = Object.hasOwn(input, f.name) ? input[f.name] : existing ? undefined : f.default;
      refIds[f.name] = embeddedId(raw);
    }
    return refIds;
  }

  /**
   * Converts one field's value (given, or its default on a create) into `st`; a promise only
   * for an object or multiobject field, which may look its references up.
   */
  convertField(
    ctx: WriteContext,
    st: Conversion,
    plan: FieldPlan,
    input: ApiRecord,
    existing: Record<string, any> | null,
    partial: boolean,
  ): Promise<void> | undefined {
    const { errors, values } = st;
    const { f, kind, encode } = plan;
    const present = Object.hasOwn(input, f.name);
    let raw = present ? input[f.name] : undefined;
    if (!present) {
      if (existing && partial) return;
      if (existing) {
        // PUT: keep stored values of omitted fields, but a required field must hold one.
        const own = valueColumn(f);
        const stored = own ? existing[own] : true;
        if (f.required && (stored === null || stored === undefined))
          errors.add(f.name, "This field is required.");
        return;
      }
      if (f.default !== null && f.default !== undefined) raw = f.default;
      else {
        if (f.required) errors.add(f.name, "This field is required.");
        return;
      }
    }
    const isEmpty = raw === null || raw === "" || (Array.isArray(raw) && raw.length === 0);
    if (isEmpty && f.required) {
      errors.add(
        f.name,
        raw === null ? "This field may not be null." : "This field may not be blank.",
      );
      return;
    }
    if (kind === "reference") return this.convertReference(ctx, st, plan, raw);
    if (kind === "links") return this.convertLinks(ctx, st, f, raw);
    const checked = encode!(
      raw,
      f.choiceSetId ? (st.pre.choices.get(f.choiceSetId) ?? NO_CHOICES) : null,
    );
    if ("error" in checked) errors.add(f.name, checked.error);
    else values[f.name] = checked.value;
  }

  /** An object field's value: its id (and type) columns; the reference checked or made pending. */
  convertReference(
    ctx: WriteContext,
    st: Conversion,
    plan: FieldPlan,
    raw: unknown,
  ): Promise<void> | undefined {
    const { f, columns } = plan;
    if (raw === null) {
      for (const column of columns) st.values[column] = null;
      return;
    }
    // only a polymorphic reference looks its type up; a plain one converts synchronously
    if (f.isPolymorphic)
      return resolveRef(ctx, f, raw).then((r) => this.takeReference(st, plan, r));
    this.takeReference(st, plan, plainRef(f, raw));
  }

  /** A resolved reference into `st`: its columns, the reference checked or made pending. */
  takeReference(st: Conversion, { f, columns }: FieldPlan, r: Ref | { error: string }) {
    const { values } = st;
    if ("error" in r) {
      st.errors.add(f.name, r.error);
      return;
    }
    if (st.batched || !this.preflighted.has(f) || st.refIds[f.name] !== r.id)
      st.pending.push({ field: f, ref: r });
    else if (!st.pre.found(f.name)) st.errors.add(f.name, notFoundMessage(r.id));
    st.named.push({ field: f, ref: r });
    values[columns[0]!] = r.id;
    if (f.isPolymorphic) values[columns[1]!] = r.typeId;
  }

  /** A multiobject field's value: its references (each once), all made pending. */
  async convertLinks(ctx: WriteContext, st: Conversion, f: FieldRow, raw: unknown) {
    if (raw === null) {
      st.multi.set(f, []);
      return;
    }
    if (!Array.isArray(raw)) {
      st.errors.add(f.name, "Expected a list of items.");
      return;
    }
    if (raw.length > MAX_LINKS_PER_VALUE) {
      st.errors.add(f.name, `Ensure this field has no more than ${MAX_LINKS_PER_VALUE} elements.`);
      return;
    }
    const refs: { typeId: number; id: number }[] = [];
    // each reference once, by a set: a list of thousands compared pairwise held the loop (0190)
    const seen = new Set<string>();
    for (const item of raw) {
      const r = await resolveRef(ctx, f, item);
      if ("error" in r) st.errors.add(f.name, r.error);
      else if (!seen.has(`${r.typeId}:${r.id}`)) {
        seen.add(`${r.typeId}:${r.id}`);
        st.pending.push({ field: f, ref: r });
        st.named.push({ field: f, ref: r });
        refs.push(r);
      }
    }
    st.multi.set(f, refs);
  }

  /**
   * A single write's references: the pending ones must exist, and an object the writer may not
   * view answers as one that does not exist (decision 0064), unless the row already references
   * it; a field already refused is not named twice.
   */
  async checkRefs(ctx: WriteContext, st: Conversion, existing: Record<string, any> | null) {
    const { errors, pending } = st;
    if (pending.length) {
      const { found } = await st.look.existingRefs(ctx, pending);
      for (const { field, ref } of pending) {
        if (!found.has(`${ref.typeId}:${ref.id}`)) errors.add(field.name, notFoundMessage(ref.id));
      }
    }
    const hidden = await st.look.unviewable(ctx, st.named);
    const kept = existing && hidden.length ? await st.look.heldRefs(ctx, existing, hidden) : null;
    for (const p of hidden)
      if (!kept?.has(p) && !Object.hasOwn(errors.errors, p.field.name))
        errors.add(p.field.name, notFoundMessage(p.ref.id));
  }

  /** Adds an error per unique field whose value another row already holds. */
  async addUniqueClashes(
    ctx: WriteContext,
    existing: Record<string, any> | null,
    values: Record<string, unknown>,
    errors: ErrorCollector,
  ) {
    const { table, column } = this.shape;
    for (const f of this.fields) {
      const col = valueColumn(f);
      if (!f.unique || !col) continue;
      const v = values[col];
      if (v === undefined || v === null || errors.errors[f.name]) continue;
      const clash = await ctx.db
        .select({ id: table.id })
        .from(table)
        .where(
          existing
            ? and(eq(column(col), v), sql`${table.id} <> ${existing.id}`)
            : eq(column(col), v),
        )
        .limit(1);
      if (clash.length)
        errors.add(f.name, `${verboseName(this.cot)} with this ${f.name} already exists.`);
    }
  }

  async writeLinks(ctx: WriteContext, id: number, multi: Map<FieldRow, Ref[]>) {
    for (const [f, refs] of multi) {
      const lt = ident(linkTableName(this.cot.id, f.id));
      await ctx.db.run(sql`DELETE FROM ${lt} WHERE source_id = ${id}`);
      for (const [position, r] of refs.entries()) {
        await ctx.db.run(
          sql`INSERT INTO ${lt} (source_id, target_type, target_id, position) VALUES (${id}, ${f.isPolymorphic ? r.typeId : null}, ${r.id}, ${position})`,
        );
      }
    }
  }

  /**
   * The type's plain unique keys (its unique fields, its `unique_together` sets), each with its
   * answer: a field's names it, a set's is given under each of its fields (decision 0087).
   */
  uniqueKeys(): UniqueKey[] {
    const what = verboseName(this.cot);
    const keys: UniqueKey[] = [];
    const keyOf = (fields: FieldRow[]) =>
      fields.map((f) => ({ key: valueColumn(f)!, column: this.shape.column(valueColumn(f)!) }));
    for (const f of this.fields)
      if (f.unique && valueColumn(f))
        keys.push({
          columns: keyOf([f]),
          answer: { [f.name]: [`${what} with this ${f.name} already exists.`] },
        });
    for (const set of this.cot.uniqueTogether ?? []) {
      const fields = set.map((n) => this.fields.find((f) => f.name === n));
      if (fields.some((f) => !f || !valueColumn(f))) continue;
      const message = `The fields ${set.join(", ")} must make a unique set.`;
      keys.push({
        columns: keyOf(fields as FieldRow[]),
        answer: Object.fromEntries(set.map((n) => [n, [message]])),
      });
    }
    return keys;
  }

  /**
   * A unique index refusing a value becomes a 400 on that field, thrown from inside the
   * resource so bulk requests report it per item. SQLite only undoes the failed statement,
   * so the transaction goes on and the other items are still checked. Given the rows written
   * (`written`) and how to read (`read`, on `orm`), every key they clash on is named, in one
   * read on failure only (decision 0146); a partial key's refusal names that key alone.
   */
  async uniqueChecked<T>(
    write: () => Promise<T>,
    explain?: {
      orm: Orm;
      rows: WrittenRow[];
      bulk: boolean;
      read(reads: unknown[]): Promise<unknown[]>;
    },
  ): Promise<T> {
    const { cot, fields } = this;
    try {
      return await write();
    } catch (e) {
      const mapped = mapConstraintError(e, {
        verboseName: verboseName(cot),
        fieldForColumn: (c) => fields.find((x) => fieldColumns(x).includes(c))?.name ?? c,
      });
      if (!(mapped instanceof ValidationError) || Array.isArray(mapped.fields)) throw e;
      const answer = mapped.fields as Record<string, string[]>;
      // A compound key (unique_together) answers under each of its fields, not non_field_errors.
      const compound = answer.non_field_errors;
      const names = compound
        ? /^The fields (.+) must make a unique set\.$/.exec(compound[0] ?? "")?.[1]?.split(", ")
        : undefined;
      // a partial key (decision 0087) names its condition
      const single = Object.entries(answer).find(([, m]) =>
        /already exists\.$/.test(m[0] ?? ""),
      )?.[0];
      const clashed = names ?? (single ? [single] : []);
      if (!clashed.length) throw mapped;
      const partial = partialClash(cot, fields, clashed, verboseName(cot));
      if (partial) throw partial;
      const keys = this.uniqueKeys();
      const named =
        explain && refusedByKeyOf(keys, e)
          ? await explainClashes(
              clashExplainer(explain.orm, this.table as never, keys, explain.rows, explain.bulk),
              (reads) => explain.read(reads),
            )
          : null;
      if (named) throw named;
      if (names) throw new ValidationError(Object.fromEntries(names.map((n) => [n, compound!])));
      throw mapped;
    }
  }

  /** The insert's bound values for one converted input (`values` has no prototype). */
  insertParams(values: Record<string, unknown>, now: string): Record<string, unknown> {
    const into: Record<string, unknown> = Object.create(null);
    for (const key of this.insertColumns) into[key] = values[key] ?? null;
    into.created = into.lastUpdated = now;
    return into;
  }

  /**
   * A multi-row INSERT of `n` rows as text with positional arguments, built once per size: the
   * rows' values go straight into one array (`executePositional`), where named placeholders made
   * a 2,600-key object per chunk that Drizzle then mapped back to an array. Only the ids (and
   * the primary label, when it is an SQL expression) come back: each new row's columns are the
   * values just bound, which the column types keep as they are (each field's column has its
   * type's SQL type, and every encoder yields that type). Drizzle compiles the one-row statement;
   * `n` rows repeat its VALUES tuple (`repeatRows`): compiling 100 rows through Drizzle's builder
   * cost a process's first bulk tens of milliseconds.
   */
  insertManyStatement(orm: Orm, n: number): InsertMany {
    let q = this.insertMany.get(n);
    if (!q) {
      let one = this.insertMany.get(1);
      if (!one) this.insertMany.set(1, (one = this.compileInsert(orm, 1)));
      q = n === 1 ? one : repeatRows(one, n, this.insertColumns.length);
      this.insertMany.set(n, q);
    }
    return q;
  }

  /** The INSERT of `n` rows as Drizzle compiles it, with each bound position's slot. */
  compileInsert(orm: Orm, n: number): InsertMany {
    const { insertColumns } = this;
    const rows = Array.from({ length: n }, (_, i) =>
      Object.fromEntries(insertColumns.map((key, j) => [key, sql.placeholder(`${i}:${j}`)])),
    );
    const compiled = orm
      .insert(this.table)
      .values(rows as any)
      .returning(this.bulkReturning as any)
      .toSQL();
    // each bound position: a row's column (row * width + column), or -1 for a constant of the SQL
    const slots = new Int32Array(compiled.params.length);
    const encoders: Array<DriverValueEncoder<unknown, unknown> | undefined> = [];
    const constants = compiled.params.map((p, k) => {
      const held = p instanceof Param ? p.value : p;
      const at = held instanceof Placeholder ? /^(\d+):(\d+)$/.exec(held.name) : null;
      slots[k] = at ? Number(at[1]) * insertColumns.length + Number(at[2]) : -1;
      encoders[k] = at && p instanceof Param ? p.encoder : undefined;
      return at ? undefined : p;
    });
    return { sql: compiled.sql, slots, constants, encoders };
  }

  /** After a row is in: its multiobject links and tags. */
  async afterInsert(
    ctx: WriteContext,
    row: Record<string, any>,
    multi: Map<FieldRow, Ref[]>,
    tagIds: number[] | null,
  ) {
    const id = row.id as number;
    if (multi.size) await this.writeLinks(ctx, id, multi);
    if (tagIds) {
      await setTags(ctx, this.cot.objectTypeId!, id, tagIds);
      delete row.__tags; // read after they were set
    }
  }

  /**
   * One chunk of a bulk create in one multi-row INSERT, or null when any of its items is invalid,
   * names a missing object or trips a unique index (nothing of the chunk is written then).
   */
  async fastChunk(
    ctx: WriteContext,
    inputs: ApiRecord[],
    pre: Preflight,
    seen: Seen,
  ): Promise<Array<{ id: number; record: ApiRecord }> | null> {
    const batch: Batch = { pre, pending: [] };
    const converted: Converted[] = [];
    for (const input of inputs) {
      await yieldWhenDue(); // a bulk's thousands: other requests are answered meanwhile (0184)
      const c = await this.convert(ctx, input, null, false, batch);
      if (!c) return null;
      converted.push(c);
    }
    if (!(await this.seeChunkRefs(ctx, batch.pending, seen))) return null;
    const now = nowIso();
    const rowsIn = converted.map((c) => this.insertParams(c.values, now));
    const returned = await this.insertChunk(ctx, rowsIn);
    if (!returned) return null;
    // One statement's AUTOINCREMENT ids follow its VALUES order; RETURNING's order is not defined.
    returned.sort((a, b) => (a.id as number) - (b.id as number));
    const rows = rowsIn.map((r, i) => Object.assign(r, returned[i]) as Record<string, any>);
    for (const row of rows) row.__tags = "[]"; // none yet: `afterInsert` drops this where it sets some
    for (const [i, row] of rows.entries()) {
      const { multi, tagIds } = converted[i]!;
      if (multi.size || tagIds) await this.afterInsert(ctx, row, multi, tagIds);
    }
    // the related objects were just read to check them: their nested forms are not read again
    const records = await this.read.serialize(ctx, rows, seen.nested);
    return rows.map((row, i) => ({ id: row.id as number, record: records[i]! }));
  }

  /**
   * Checks a chunk's references and adds them to `seen`; false when one is missing or hidden.
   * Objects an earlier chunk of this bulk found are not looked up again (a bulk of 1,000 names
   * its 100 sites in every chunk); the transaction that saw them is still open.
   */
  async seeChunkRefs(ctx: WriteContext, pending: Pending[], seen: Seen): Promise<boolean> {
    const unseen = pending.filter(({ ref }) => !seen.found.has(`${ref.typeId}:${ref.id}`));
    if (!unseen.length) return true;
    const { found, nested } = await this.existingRefs(ctx, unseen);
    if (unseen.some(({ ref }) => !found.has(`${ref.typeId}:${ref.id}`))) return false;
    // a hidden object: the chunk goes item by item, which names it as a missing one
    if ((await unviewable(ctx, unseen)).length) return false;
    for (const key of found) seen.found.add(key);
    for (const [typeId, forms] of nested) {
      const into = seen.nested.get(typeId) ?? seen.nested.set(typeId, new Map()).get(typeId)!;
      for (const [id, form] of forms) into.set(id, form);
    }
    return true;
  }

  /** Inserts a chunk's rows in one statement: their ids (and labels), or null on a clash. */
  async insertChunk(
    ctx: WriteContext,
    rowsIn: Array<Record<string, unknown>>,
  ): Promise<Array<Record<string, unknown>> | null> {
    const q = this.insertManyStatement(ctx.services.db.orm, rowsIn.length);
    const args = positionalArgs(q, rowsIn, this.insertColumns);
    try {
      return (await executePositional(ctx.db, q.sql, args)).rows.map((r) => ({
        id: Number(r[0]),
        ...(this.shape.primaryLabel ? { __label: r[1] } : {}),
      }));
    } catch (e) {
      // SQLite undid the whole statement: the chunk goes item by item to say which one clashed.
      if (
        mapConstraintError(e, {
          verboseName: verboseName(this.cot),
          fieldForColumn: (c) => c,
        }) instanceof ValidationError
      )
        return null;
      throw e;
    }
  }

  /** The rows written are pending in the full-text index: indexed shortly after the commit (decision 0056). */
  indexLater(ctx: WriteContext) {
    ctx.onCommit?.(async () => scheduleSearchFlush(ctx.services, this.cot.id));
  }

  async createLoaded(ctx: WriteContext, input: ApiRecord) {
    this.indexLater(ctx);
    const { values, multi, tagIds } = await this.convert(ctx, input, null, false);
    const params = this.insertParams(values, nowIso());
    // a reverted delete puts the object back under its old id (decision 0088)
    const restoreId = takeRestoreId(ctx, APP_LABEL, this.slug);
    const [row] = (await this.uniqueChecked(
      async () =>
        restoreId === undefined
          ? this.insertQuery.with(ctx.db, params, ctx.services.db.orm)
          : await ctx.db
              .insert(this.table)
              .values({ ...params, id: restoreId } as any)
              .returning(this.read.rowColumns as any),
      inTransaction(ctx, [{ id: null, values: params }]),
    )) as Record<string, any>[];
    await this.afterInsert(ctx, row!, multi, tagIds);
    const [record] = await this.read.serialize(ctx, [row!]);
    return { id: row!.id as number, record: record! };
  }

  /**
   * Many creates in one transaction: one preflight, then chunks of `chunkRows` inputs checked
   * together and written by one INSERT each. A chunk with any problem is redone item by item
   * through `createLoaded`, so the per-item answers are exactly those of single creates.
   */
  async createMany(ctx: WriteContext, inputs: ApiRecord[]) {
    const pre = await this.preflight(
      ctx,
      Object.fromEntries(this.embeddedFields.map((f) => [f.name, null])),
    );
    const seen: Seen = { found: new Set(), nested: new Map() };
    this.indexLater(ctx);
    const out: Array<{ id: number; record: ApiRecord } | { errors: FieldErrors }> = [];
    for (let s = 0; s < inputs.length; s += this.chunkRows) {
      const chunk = inputs.slice(s, s + this.chunkRows);
      const fast = await this.fastChunk(ctx, chunk, pre, seen);
      if (fast) {
        out.push(...fast);
        continue;
      }
      for (const input of chunk) {
        await yieldWhenDue();
        try {
          out.push(await this.createLoaded(ctx, input));
        } catch (e) {
          if (!(e instanceof ValidationError) || Array.isArray(e.fields)) throw e;
          out.push({ errors: e.fields });
        }
      }
    }
    return out;
  }

  async create(ctx: WriteContext, input: ApiRecord) {
    return (await this.createLoaded(ctx, input)).id;
  }

  async update(ctx: WriteContext, id: number, input: ApiRecord, partial: boolean) {
    this.indexLater(ctx);
    const [existing] = (await ctx.db
      .select()
      .from(this.table)
      .where(eq(this.table.id, id))) as Record<string, any>[];
    const { values, multi, tagIds } = await this.convert(ctx, input, existing!, partial);
    // Written by hand: Drizzle's update looks every column up in the set object, so a column
    // named like a prototype key (`constructor`, stored before such names were reserved)
    // would be "set" to the inherited function.
    const assignments = Object.keys(values).map((col) => sql`${ident(col)} = ${values[col]}`);
    assignments.push(sql`"last_updated" = ${editStamp()}`);
    await this.uniqueChecked(
      () =>
        ctx.db.run(
          sql`UPDATE ${ident(tableName(this.cot.id))} SET ${sql.join(assignments, sql`, `)} WHERE id = ${id}`,
        ),
      inTransaction(ctx, [
        { id, values: { ...existing, ...values }, touched: new Set(Object.keys(values)) },
      ]),
    );
    await this.writeLinks(ctx, id, multi);
    if (tagIds) await setTags(ctx, this.cot.objectTypeId!, id, tagIds);
  }

  async delete(ctx: WriteContext, id: number) {
    this.indexLater(ctx);
    for (const f of this.fields)
      if (this.shape.storage(f) === "links")
        await ctx.db.run(
          sql`DELETE FROM ${ident(linkTableName(this.cot.id, f.id))} WHERE source_id = ${id}`,
        );
    await ctx.db.delete(this.table).where(eq(this.table.id, id));
  }

  fieldForColumn(column: string) {
    const f = this.fields.find((x) => fieldColumns(x).includes(column));
    return f ? f.name : column;
  }
}

/** The references among `refs` to objects the writer may not view (decision 0064). */
async function unviewable(ctx: WriteContext, refs: Pending[]): Promise<Pending[]> {
  const user = ctx.auth.user;
  if (!refs.length || !user || user.isSuperuser) return [];
  const byType = new Map<number, number[]>();
  for (const { ref } of refs)
    (byType.get(ref.typeId) ?? byType.set(ref.typeId, []).get(ref.typeId)!).push(ref.id);
  const types = await ctx.services.objectTypes.byIds([...byType.keys()], ctx.db);
  const seen = new Map<number, Set<number>>();
  for (const [typeId, ids] of byType) {
    const ot = types.get(typeId);
    seen.set(
      typeId,
      ot ? await viewableRefs(ctx, ctx.auth, ot.appLabel, ot.model, ids) : new Set<number>(),
    );
  }
  return refs.filter(({ ref }) => !seen.get(ref.typeId)!.has(ref.id));
}
