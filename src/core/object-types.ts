/**
 * Object types (NetBox content types): `(app_label, model)` rows with stable ids. Labels are
 * parsed here once, including the `custom-objects` and `netbox_custom_objects` aliases of
 * `custom_objects`.
 */
import { and, eq, inArray, sql } from "drizzle-orm";
import type { Database, Executor } from "../db/client";
import { inIds } from "../db/d1-limits";
import { objectTypes } from "../db/schema";
import { type Slots, slotKey } from "./slots";

export interface ObjectTypeRow {
  id: number;
  appLabel: string;
  model: string;
}

/**
 * Inserts the object types of `types` no row holds yet, in one statement per 40 (80 bound values,
 * within D1's 100). Only the missing rows reach the INSERT: `ON CONFLICT DO NOTHING` alone moved
 * the AUTOINCREMENT sequence past every row it skipped, some 20 ids per start (decision 0146); it
 * stays for a row another process inserts meanwhile.
 */
async function insertMissing(db: Executor, types: Array<{ appLabel: string; model: string }>) {
  for (let at = 0; at < types.length; at += 40) {
    const rows = types.slice(at, at + 40).map((t) => sql`(${t.appLabel}, ${t.model})`);
    await db.run(
      sql`INSERT INTO object_types (app_label, model) SELECT v.column1, v.column2 FROM (VALUES ${sql.join(rows, sql`, `)}) AS v WHERE NOT EXISTS (SELECT 1 FROM object_types o WHERE o.app_label = v.column1 AND o.model = v.column2) ON CONFLICT DO NOTHING`,
    );
  }
}

export const label = (ot: { appLabel: string; model: string }) => `${ot.appLabel}.${ot.model}`;

/**
 * Normalises `app_label` aliases: `custom-objects` (the plugin's path) and
 * `netbox_custom_objects` (upstream's app label, which pynetbox's extension and scripts written
 * for upstream name; decision 0200) are `custom_objects`.
 */
const CUSTOM_OBJECTS_ALIASES = new Set(["custom-objects", "netbox_custom_objects"]);
export const normalizeAppLabel = (appLabel: string) =>
  CUSTOM_OBJECTS_ALIASES.has(appLabel) ? "custom_objects" : appLabel;

/** Parses `"app.model"` / `"app/model"` (schema documents) into parts, or null. */
export function parseLabel(
  text: string,
  separator: "." | "/" = ".",
): { appLabel: string; model: string } | null {
  const i = text.indexOf(separator);
  if (i <= 0 || i === text.length - 1) return null;
  const appLabel = normalizeAppLabel(text.slice(0, i).trim());
  const model = text.slice(i + 1).trim();
  if (!/^[a-z][a-z0-9_-]*$/.test(appLabel) || !/^[-a-zA-Z0-9_]+$/.test(model)) return null;
  return { appLabel, model: appLabel === "custom_objects" ? model : model.toLowerCase() };
}

/**
 * Object type rows a write read in its own snapshot (a schema apply, with the fields pointing at
 * them: decision 0140), by id: its serialising asks the registry only for the ids not among them.
 */
const readByWrite = slotKey<Map<number, ObjectTypeRow>>("object types read by the write");

/** Ids a read looked up in its own snapshot and found no object type for (a deleted type's). */
const absentInRead = slotKey<Set<number>>("object types absent in the read");

/**
 * Keeps `rows` (the object types a write or a page read) for its `byIds(…, …, scratch)`; `absent`,
 * the ids the same read found no row for, are not asked again (decision 0166).
 */
export function keepReadTypes(
  scratch: Slots,
  rows: Map<number, ObjectTypeRow>,
  absent: Iterable<number> = [],
): void {
  scratch.set(readByWrite, rows);
  scratch.set(absentInRead, new Set(absent));
}

/**
 * Caches ids of static object types (they never change). Custom-object types are looked up
 * every time because a slug rename changes their `model` in another isolate too.
 */
export class ObjectTypeRegistry {
  #byLabel = new Map<string, ObjectTypeRow>();
  #byId = new Map<number, ObjectTypeRow>();
  /** Per app label, another spelling of its model names (a plugin's internal model names). */
  #aliases = new Map<string, (model: string, db: Executor) => Promise<number | null>>();

  constructor(private readonly db: Database) {}

  /**
   * Lets `app_label` name its object types another way too: `resolve(model)` answers the object
   * type id a model name stands for (or null). Asked only when no row has the name itself.
   */
  addModelAlias(
    appLabel: string,
    resolve: (model: string, db: Executor) => Promise<number | null>,
  ): void {
    this.#aliases.set(appLabel, resolve);
  }

  #remember(row: ObjectTypeRow) {
    if (row.appLabel === "custom_objects" && !row.model.startsWith("customobjecttype")) return;
    this.#byLabel.set(label(row), row);
    this.#byId.set(row.id, row);
  }

  forget(id: number) {
    const row = this.#byId.get(id);
    if (row) this.#byLabel.delete(label(row));
    this.#byId.delete(id);
  }

  /** Returns the id of an object type, creating the row when missing. */
  async ensure(
    appLabel: string,
    model: string,
    db: Executor = this.db.orm,
  ): Promise<ObjectTypeRow> {
    const found = await this.byLabel(appLabel, model, db);
    if (found) return found;
    await insertMissing(db, [{ appLabel, model }]);
    const row = await this.byLabel(appLabel, model, db);
    if (!row) throw new Error(`object type ${appLabel}.${model} could not be created`);
    return row;
  }

  /** Creates any missing rows of these object types with one insert and one select. */
  async ensureMany(
    types: Array<{ appLabel: string; model: string }>,
    db: Executor = this.db.orm,
  ): Promise<void> {
    if (!types.length) return;
    await insertMissing(db, types);
    const wanted = new Set(types.map((t) => `${t.appLabel}.${t.model}`));
    const apps = [...new Set(types.map((t) => t.appLabel))];
    for (const row of await db
      .select()
      .from(objectTypes)
      .where(inArray(objectTypes.appLabel, apps))) {
      if (wanted.has(label(row))) this.#remember(row);
    }
  }

  /** The object type when this process knows it already, without a read. */
  cached(appLabel: string, model: string): ObjectTypeRow | null {
    return this.#byLabel.get(`${normalizeAppLabel(appLabel)}.${model}`) ?? null;
  }

  /** The object type of id `id` when this process knows it already (a static one), without a read. */
  cachedById(id: number): ObjectTypeRow | null {
    return this.#byId.get(id) ?? null;
  }

  async byLabel(
    appLabel: string,
    model: string,
    db: Executor = this.db.orm,
  ): Promise<ObjectTypeRow | null> {
    appLabel = normalizeAppLabel(appLabel);
    const cached = this.#byLabel.get(`${appLabel}.${model}`);
    if (cached) return cached;
    const [row] = await db
      .select()
      .from(objectTypes)
      .where(and(eq(objectTypes.appLabel, appLabel), eq(objectTypes.model, model)))
      .limit(1);
    if (row) this.#remember(row);
    if (row) return row;
    const alias = this.#aliases.get(appLabel);
    const id = alias ? await alias(model, db) : null;
    return id === null ? null : this.byId(id, db);
  }

  async byId(id: number, db: Executor = this.db.orm): Promise<ObjectTypeRow | null> {
    const cached = this.#byId.get(id);
    if (cached) return cached;
    const [row] = await db.select().from(objectTypes).where(eq(objectTypes.id, id)).limit(1);
    if (row) this.#remember(row);
    return row ?? null;
  }

  /**
   * The rows of `ids` that exist. With `scratch`, a write's: the rows it read itself
   * (`keepReadTypes`) answer for their ids; an id not among them is read (it may name a type the
   * write creates, or one its read did not cover).
   */
  async byIds(
    ids: number[],
    db: Executor = this.db.orm,
    scratch?: Slots,
  ): Promise<Map<number, ObjectTypeRow>> {
    const out = new Map<number, ObjectTypeRow>();
    const missing: number[] = [];
    const read = scratch?.get(readByWrite);
    const absent = scratch?.get(absentInRead);
    for (const id of new Set(ids)) {
      const row = this.#byId.get(id) ?? read?.get(id);
      if (row) out.set(id, row);
      else if (!absent?.has(id)) missing.push(id);
    }
    if (missing.length) {
      for (const row of await db.select().from(objectTypes).where(inIds(objectTypes.id, missing))) {
        this.#remember(row);
        out.set(row.id, row);
      }
    }
    return out;
  }

  /**
   * Resolves any accepted spelling of an object type: an id, `"app.model"`, or
   * `{app_label, model}`. Returns null when it names nothing.
   */
  async resolve(value: unknown, db: Executor = this.db.orm): Promise<ObjectTypeRow | null> {
    const spelled = spellingOf(value);
    if (!spelled) return null;
    return "id" in spelled
      ? this.byId(spelled.id, db)
      : this.byLabel(spelled.appLabel, spelled.model, db);
  }

  /**
   * `resolve` answered from `rows`, read ahead by id and by label (`spellingOf`) in a write's own
   * read: undefined when they cannot tell (a label no row has, where an alias might name it).
   */
  resolveFrom(value: unknown, rows: ObjectTypeRow[]): ObjectTypeRow | null | undefined {
    const spelled = spellingOf(value);
    if (!spelled) return null;
    if ("id" in spelled) return rows.find((r) => r.id === spelled.id) ?? null;
    const row = rows.find((r) => r.appLabel === spelled.appLabel && r.model === spelled.model);
    return row ?? (this.#aliases.has(spelled.appLabel) ? undefined : null);
  }
}

/** What `resolve` looks up for a spelling of an object type: an id, a label, or nothing. */
export type Spelling = { id: number } | { appLabel: string; model: string } | null;

/** The lookup an accepted spelling stands for (an id, `"app.model"`, `{app_label, model}`). */
export function spellingOf(value: unknown): Spelling {
  if (typeof value === "number" && Number.isInteger(value)) return { id: value };
  if (typeof value === "string") {
    if (/^\d+$/.test(value)) return { id: Number(value) };
    return parseLabel(value);
  }
  if (value && typeof value === "object" && !Array.isArray(value)) {
    const v = value as Record<string, unknown>;
    if (typeof v.app_label === "string" && typeof v.model === "string")
      return { appLabel: normalizeAppLabel(v.app_label), model: v.model };
    if (typeof v.id === "number") return { id: v.id };
  }
  return null;
}
