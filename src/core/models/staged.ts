/**
 * A declarative host model's creates and updates as one read phase and one atomic write batch
 * (decision 0071): everything the write looks up is read first in one `db.read`; the rows, tags,
 * change records and outbox rows then go in one `db.write`, races caught inside it.
 */
import { and, eq, getTableColumns, getTableName, inArray, sql, type SQL } from "drizzle-orm";
import type { SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";
import { guardChanged, isWriteConflict, WriteConflictError } from "../../db/client";
import { taggedItems, tags as tagsTable } from "../../db/schema";
import {
  ApiError,
  ErrorCollector,
  forbidden,
  notFound,
  ValidationError,
  type FieldErrors,
} from "../errors";
import { mapConstraintError } from "../rest/constraints";
import { restrictWhere } from "../auth/restrict";
import { stageChanges, type StagedChange } from "../changes/record";
import { stageRules } from "../events/dispatch";
import type {
  ApiRecord,
  ModelInfo,
  ReadContext,
  Resource,
  StagedHook,
  StagedOptions,
  StagedUpdate,
  StagedWrites,
  StagedWritten,
  WriteContext,
} from "../context";
import { newIdMarker, newRowId, nextStamp, ReadPhase, WriteBatch } from "../rest/write-batch";
import { naturalize } from "../../db/natural";

/** What the staged writer needs of `defineModel`'s internals. */
export interface HostModelParts {
  spec: {
    appLabel: string;
    model: string;
    tags?: boolean;
    fields: StagedField[];
    naturalOrdering?: { field: string; column: SQLiteColumn };
    /** A check that reads nothing (`validateReadsNothing`): it may fill `values`. */
    validate?: (
      ctx: WriteContext,
      values: Record<string, unknown>,
      existing: Record<string, any> | null,
      errors: ErrorCollector,
    ) => Promise<void>;
  };
  table: SQLiteTable & { id: SQLiteColumn };
  resource: Resource;
  keyOf(col: SQLiteColumn): string;
  /** `convertValue` of `define.ts` (no reads for the field types staged here). */
  convertValue(
    ctx: WriteContext,
    f: StagedField,
    raw: unknown,
  ): Promise<{ value: unknown } | { error: string }>;
  serialize(
    ctx: ReadContext,
    rows: Record<string, any>[],
    tags: Map<unknown, ApiRecord[]>,
    related: Map<string, Map<number, ApiRecord>>,
  ): Promise<ApiRecord[]>;
  objectTypeId(ctx: ReadContext): Promise<number>;
  nestedTag(
    baseUrl: string,
    t: { id: number; name: string; slug: string; color: string },
  ): ApiRecord;
}

interface StagedField {
  name: string;
  type: string;
  column?: SQLiteColumn;
  required?: boolean;
  readOnly?: boolean;
  related?: string;
}

/** Field types a staged write converts without reading (fk targets come from the read phase). */
const STAGED_TYPES = new Set([
  "string",
  "text",
  "slug",
  "integer",
  "boolean",
  "choice",
  "fk",
  "datetime",
  "json",
  "color",
]);

/** Whether a model's writes can be staged: no hooks that read or write on their own. */
export function stageable(spec: {
  fields: Array<{ type: string }>;
  validate?: unknown;
  validateReadsNothing?: boolean;
  afterWrite?: unknown;
  decorate?: unknown;
}): boolean {
  return (
    (!spec.validate || !!spec.validateReadsNothing) &&
    !spec.afterWrite &&
    !spec.decorate &&
    spec.fields.every((f) => STAGED_TYPES.has(f.type))
  );
}

/** Keys every record carries and writes may echo back; ignored on input. */
const READ_ONLY_KEYS = new Set(["id", "url", "display", "display_url", "created", "last_updated"]);

/** Rows per multi-row INSERT (SQLite binds at most 32,766 values per statement). */
const INSERT_ROWS = 100;

type Row = Record<string, any>;
type TagRow = { id: number; name: string; slug: string; color: string; scope: string | null };

const fkId = (raw: unknown) =>
  typeof raw === "object" && raw && !Array.isArray(raw) ? (raw as Record<string, unknown>).id : raw;

/** A tag reference's lookup: `[column, value]`, or null when it is not a valid reference. */
function tagRef(item: unknown): ["id" | "slug" | "name", unknown] | null {
  if (typeof item === "number" && Number.isInteger(item)) return ["id", item];
  if (item && typeof item === "object") {
    const o = item as Record<string, unknown>;
    if (typeof o.id === "number") return ["id", o.id];
    if (typeof o.slug === "string") return ["slug", o.slug];
    if (typeof o.name === "string") return ["name", o.name];
  }
  if (typeof item === "string") return ["slug", item];
  return null;
}

export function stagedWrites(parts: HostModelParts): StagedWrites {
  const { spec, table, resource, keyOf } = parts;
  const tableName = getTableName(table);
  const columns = Object.entries(getTableColumns(table)) as Array<[string, SQLiteColumn]>;
  const fkFields = spec.fields.filter((f) => f.type === "fk");
  const fieldsByName = new Map(spec.fields.map((f) => [f.name, f]));
  const orm = (ctx: ReadContext) => ctx.services.db.orm;

  /** A column's value when an insert does not give it (the column's default, else null). */
  function defaultOf(col: SQLiteColumn): unknown {
    const c = col as SQLiteColumn & { defaultFn?: () => unknown; default?: unknown };
    if (c.defaultFn) return c.defaultFn();
    if (c.hasDefault && c.default !== undefined && typeof c.default !== "object") return c.default;
    return null;
  }

  /** The read phase's lookups: related objects named by the inputs (or stored), tags, rules. */
  async function lookups(ctx: WriteContext, phase: ReadPhase, inputs: ApiRecord[]) {
    const related = new Map<string, () => Array<{ id: number; j: string }>>();
    const viewable = new Map<string, () => Set<number>>();
    const infos = new Map<
      string,
      NonNullable<Awaited<ReturnType<typeof ctx.services.models.get>>>
    >();
    for (const f of fkFields) {
      const [app, model] = f.related!.split(".") as [string, string];
      const info = await ctx.services.models.get(app, model, ctx);
      if (!info?.nestedSql) continue;
      infos.set(f.name, info);
      const ids = inputs
        .map((i) => (Object.hasOwn(i, f.name) ? fkId(i[f.name]) : null))
        .filter((id): id is number => typeof id === "number" && Number.isInteger(id));
      if (!ids.length) continue;
      const unique = [...new Set(ids)];
      related.set(f.name, phase.add(orm(ctx).all(info.nestedSql.select(unique))));
      // an object the writer may not view answers as an unknown id (decision 0064; `viewableRefs`)
      const user = ctx.auth.user;
      if (user && !user.isSuperuser) {
        const target = info.resource;
        const self = app === "users" && model === "user" ? [user.id] : [];
        const where = target
          ? await restrictWhere(ctx, ctx.auth, "view", target)
          : user.permissions.has(`${app}.view_${model}`)
            ? undefined
            : sql`0`;
        if (where) {
          const rows = target
            ? phase.add(
                orm(ctx)
                  .select({ id: sql<number>`${target.list.idExpr}` })
                  .from(target.table)
                  .where(
                    and(
                      sql`${target.list.idExpr} IN (${sql.join(
                        unique.map((i) => sql`${i}`),
                        sql`, `,
                      )})`,
                      where,
                    ),
                  ),
              )
            : () => [] as Array<{ id: number }>;
          viewable.set(f.name, () => new Set([...rows().map((r) => Number(r.id)), ...self]));
        }
      }
    }
    const refs = spec.tags
      ? inputs.flatMap((i) => (Array.isArray(i.tags) ? i.tags.map(tagRef) : []))
      : [];
    const valid = refs.filter((r) => r !== null);
    const tagRows = valid.length
      ? phase.add(
          orm(ctx).all<TagRow>(
            sql`SELECT t.id, t.name, t.slug, t.color, (SELECT json_group_array(x.object_type_id) FROM tag_object_types x WHERE x.tag_id = t.id) AS scope FROM ${tagsTable} t WHERE t.id IN (SELECT value FROM json_each(${JSON.stringify(valid.filter((r) => r[0] === "id").map((r) => r[1]))})) OR t.slug IN (SELECT value FROM json_each(${JSON.stringify(valid.filter((r) => r[0] === "slug").map((r) => r[1]))})) OR t.name IN (SELECT value FROM json_each(${JSON.stringify(valid.filter((r) => r[0] === "name").map((r) => r[1]))}))`,
          ),
        )
      : () => [] as TagRow[];
    const rules = stageRules(ctx, phase, spec);
    return {
      /** Nested forms of the related objects read, by field name. */
      related(): Map<string, Map<number, ApiRecord>> {
        const out = new Map<string, Map<number, ApiRecord>>();
        for (const f of fkFields) {
          const forms = new Map<number, ApiRecord>();
          const info = infos.get(f.name);
          for (const r of related.get(f.name)?.() ?? [])
            forms.set(Number(r.id), info!.nestedSql!.build(ctx, Number(r.id), JSON.parse(r.j)));
          out.set(f.name, forms);
        }
        return out;
      },
      tags: () => tagRows(),
      /** Per fk field, the named ids the writer may view (absent: all of them). */
      viewable: () => new Map([...viewable].map(([name, ids]) => [name, ids()])),
      rules,
    };
  }

  /** `resolveTags` of `define.ts` over the tags the read phase found. */
  function resolveTags(
    raw: unknown,
    found: TagRow[],
    objectTypeId: number,
  ): { tags: TagRow[] } | { error: string } {
    if (raw === null) return { tags: [] };
    if (!Array.isArray(raw)) return { error: "Expected a list of tags." };
    const out = new Map<number, TagRow>();
    for (const item of raw) {
      const ref = tagRef(item);
      if (!ref) return { error: `Invalid tag reference: ${JSON.stringify(item)}` };
      const tag = found.find((t) => t[ref[0]] === ref[1]);
      if (!tag) return { error: `Tag not found: ${JSON.stringify(item)}` };
      const scope = JSON.parse(tag.scope ?? "[]") as number[];
      if (scope.length && !scope.includes(objectTypeId))
        return {
          error: `Tag "${tag.name}" cannot be applied to ${spec.appLabel}.${spec.model} objects.`,
        };
      out.set(tag.id, tag);
    }
    return { tags: [...out.values()] };
  }

  /** `convertInput` of `define.ts`, with related objects and tags from the read phase. */
  async function convert(
    ctx: WriteContext,
    input: ApiRecord,
    existing: Row | null,
    partial: boolean,
    related: Map<string, Map<number, ApiRecord>>,
    found: TagRow[],
    objectTypeId: number,
    viewable: Map<string, Set<number>>,
  ) {
    const errors = new ErrorCollector();
    const values: Record<string, unknown> = {};
    let tags: TagRow[] | null = null;
    for (const key of Object.keys(input)) {
      if (!fieldsByName.has(key) && !READ_ONLY_KEYS.has(key) && !(key === "tags" && spec.tags))
        errors.add(key, "Unknown field.");
    }
    for (const f of spec.fields) {
      if (f.readOnly) continue;
      if (!Object.hasOwn(input, f.name)) {
        if (f.required && (!existing || !partial) && existing?.[keyOf(f.column!)] == null)
          errors.add(f.name, "This field is required.");
        continue;
      }
      const raw = input[f.name];
      if (f.type === "fk" && raw !== null) {
        const id = fkId(raw);
        if (typeof id !== "number" || !Number.isInteger(id))
          errors.add(f.name, "Incorrect type. Expected pk value.");
        else if (
          !related.get(f.name)?.has(id) ||
          // hidden from the writer: unknown, unless the object holds it already (a PUT echoes it)
          (viewable.get(f.name)?.has(id) === false && existing?.[keyOf(f.column!)] !== id)
        )
          errors.add(f.name, `Related object not found using the provided numeric ID: ${id}`);
        else values[keyOf(f.column!)] = id;
        continue;
      }
      const result = await parts.convertValue(ctx, f, raw);
      if ("error" in result) errors.add(f.name, result.error);
      else values[keyOf(f.column!)] = result.value;
    }
    if (spec.tags && Object.hasOwn(input, "tags")) {
      const res = resolveTags(input.tags, found, objectTypeId);
      if ("error" in res) errors.add("tags", res.error);
      else tags = res.tags.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    }
    // a check that reads nothing (`validateReadsNothing`; `stageable` admits no other)
    if (errors.empty) await spec.validate?.(ctx, values, existing, errors);
    errors.throwIfAny();
    if (spec.naturalOrdering) {
      const source = fieldsByName.get(spec.naturalOrdering.field)?.column;
      if (source && Object.hasOwn(values, keyOf(source)))
        values[keyOf(spec.naturalOrdering.column)] = naturalize(
          values[keyOf(source)] as string | null,
        );
    }
    return { values, tags };
  }

  /** Runs `step` per item; field errors are collected per item (a bulk's list) or thrown. */
  async function eachInput<T>(
    items: readonly T[],
    bulk: boolean,
    step: (item: T, index: number) => Promise<void>,
  ) {
    const errors: FieldErrors[] = [];
    let failed = false;
    for (const [i, item] of items.entries()) {
      try {
        await step(item, i);
        errors.push({});
      } catch (e) {
        if (!bulk || !(e instanceof ValidationError) || Array.isArray(e.fields)) throw e;
        failed = true;
        errors.push(e.fields);
      }
    }
    if (failed) throw new ValidationError(errors);
  }

  /** The nested tags of a record from tag rows (sorted by name, as `load` reads them). */
  const nestedTags = (ctx: ReadContext, rows: TagRow[]) =>
    rows.map((t) => parts.nestedTag(ctx.baseUrl, t));

  /** Statements that set an object's tags (replacing what it had when `replace`). */
  function stageTags(
    ctx: WriteContext,
    batch: WriteBatch,
    objectTypeId: number,
    objectId: number | SQL,
    tags: TagRow[],
    replace: boolean,
  ) {
    if (replace)
      batch.add(
        orm(ctx)
          .delete(taggedItems)
          .where(
            and(
              eq(taggedItems.objectTypeId, objectTypeId),
              sql`${taggedItems.objectId} = ${objectId}`,
            ),
          ),
      );
    if (tags.length)
      batch.add(
        orm(ctx).run(
          sql`INSERT INTO "tagged_items" ("tag_id", "object_type_id", "object_id") VALUES ${sql.join(
            tags.map((t) => sql`(${t.id}, ${objectTypeId}, ${objectId})`),
            sql`, `,
          )}`,
        ),
      );
  }

  /** A guard that fails the batch unless `where` admits all `n` rows `ids` selects (403 after). */
  function stagePermission(ctx: WriteContext, batch: WriteBatch, ids: SQL, n: number, where: SQL) {
    const admitted = orm(ctx)
      .select({ n: sql<number>`count(*)` })
      .from(table)
      .where(and(ids, where));
    batch.add(orm(ctx).run(sql`INSERT INTO write_guard (ok) SELECT (${admitted}) = ${n}`));
  }

  async function create(
    ctx: WriteContext,
    inputs: ApiRecord[],
    options: StagedOptions,
  ): Promise<StagedWritten[]> {
    // the routed resource's limits (a wrapper's owner column or scope) are the ones that hold
    const resource = options.resource;
    const objectTypeId = await parts.objectTypeId(ctx);
    const addWhere = await restrictWhere(ctx, ctx.auth, "add", resource);
    const phase = new ReadPhase();
    const found = await lookups(ctx, phase, inputs);
    await phase.run(ctx);
    const related = found.related();
    const tagRows = found.tags();
    const viewable = found.viewable();
    const rules = await found.rules();
    const now = nextStamp(null);
    const rows: Row[] = [];
    const tags: Array<TagRow[] | null> = [];
    await eachInput(inputs, options.bulk, async (input) => {
      const c = await convert(ctx, input, null, false, related, tagRows, objectTypeId, viewable);
      const row: Row = {};
      for (const [key, col] of columns)
        row[key] = Object.hasOwn(c.values, key) ? c.values[key] : defaultOf(col);
      row.created = row.lastUpdated = now;
      rows.push(row);
      tags.push(c.tags);
    });
    // the records as `load` will read them, the id still SQLite's to give (`newIdMarker()`)
    const records: ApiRecord[] = [];
    for (const [i, row] of rows.entries())
      records.push(
        ...(await parts.serialize(
          ctx,
          [{ ...row, id: newIdMarker() }],
          new Map([[newIdMarker(), tags[i] ? nestedTags(ctx, tags[i]) : []]]),
          related,
        )),
      );
    const batch = new WriteBatch();
    const ids: number[] = [];
    for (let s = 0; s < rows.length; s += INSERT_ROWS)
      batch.add(
        orm(ctx)
          .insert(table)
          .values(rows.slice(s, s + INSERT_ROWS).map(({ id: _id, ...r }) => r) as never)
          .returning({ id: table.id }),
        (out) => ids.push(...(out as Array<{ id: number }>).map((r) => r.id)),
      );
    const n = rows.length;
    tags.forEach((t, k) => {
      if (t) stageTags(ctx, batch, objectTypeId, newRowId(tableName, k, n), t, false);
    });
    const texts = stageChanges(
      ctx,
      batch,
      resource,
      objectTypeId,
      rules,
      records.map((r, k) => ({
        action: "create",
        id: newRowId(tableName, k, n),
        prechange: null,
        postchange: r,
      })),
    );
    if (addWhere)
      stagePermission(
        ctx,
        batch,
        sql`${table.id} > (SELECT max("id") FROM ${table}) - ${n}`,
        n,
        addWhere,
      );
    await runBatch(ctx, batch, "add", new Map(), false);
    ids.sort((a, b) => a - b);
    return texts().map((json, k) => ({ id: ids[k]!, record: JSON.parse(json!), json }));
  }

  /** The stored rows of `ids`, each with its related objects' nested forms (`__fk_<field>`). */
  function readExisting(
    ctx: WriteContext,
    phase: ReadPhase,
    ids: number[],
    infos: Map<string, ModelInfo | null>,
  ) {
    const nestedColumns: Record<string, SQL> = {};
    for (const f of fkFields) {
      const info = infos.get(f.name);
      if (info?.nestedSql?.selectOne)
        nestedColumns[`__fk_${f.name}`] = info.nestedSql.selectOne(
          sql.raw(`"${tableName}"."${f.column!.name}"`),
        );
    }
    const rows = phase.add(
      orm(ctx)
        .select({ ...getTableColumns(table), ...nestedColumns })
        .from(table)
        .where(inArray(table.id, ids)),
    );
    return rows as () => Row[];
  }

  /** The ids among `ids` that `where` admits, as a query of the read phase. */
  const admittedQuery = (ctx: WriteContext, ids: number[], where: SQL) =>
    orm(ctx)
      .select({ id: table.id })
      .from(table)
      .where(and(inArray(table.id, ids), where));

  /** The stored tags of `ids`, as a query of the read phase (ordered by name, as `load`). */
  const storedTagsQuery = (ctx: WriteContext, objectTypeId: number, ids: number[]) =>
    orm(ctx)
      .select({
        objectId: taggedItems.objectId,
        id: tagsTable.id,
        name: tagsTable.name,
        slug: tagsTable.slug,
        color: tagsTable.color,
        scope: sql<null>`NULL`,
      })
      .from(taggedItems)
      .innerJoin(tagsTable, eq(tagsTable.id, taggedItems.tagId))
      .where(and(eq(taggedItems.objectTypeId, objectTypeId), inArray(taggedItems.objectId, ids)))
      .orderBy(tagsTable.name);

  /**
   * Runs the batch; constraint failures map to 400/409 as in a transaction. A failed guard is a
   * delete hook's (its own answer, or "transaction" to redo the delete in one), a lost race (409,
   * or 412 when the caller sent `If-Match`) where a row's stamp moved since the read phase, else
   * the permission guard (403). The reads that tell them apart run on failure only.
   */
  async function runBatch(
    ctx: WriteContext,
    batch: WriteBatch,
    action: "add" | "change" | "delete",
    read: Map<number, string | null>,
    preconditioned: boolean,
    hooks: StagedHook[] = [],
  ): Promise<"transaction" | undefined> {
    try {
      await batch.run(ctx.services.db);
      return undefined;
    } catch (e) {
      if (!isWriteConflict(e)) throw mapConstraintError(e, resource) ?? e;
      for (const hook of hooks)
        if ((await hook.explain?.()) === "transaction") return "transaction";
      if (action !== "add") {
        const now = await orm(ctx)
          .select({ id: table.id, stamp: (table as any).lastUpdated })
          .from(table)
          .where(inArray(table.id, [...read.keys()]));
        const moved =
          now.length < read.size ||
          now.some((r) => read.get(Number(r.id)) !== (r.stamp as string | null));
        if (moved) throw preconditioned ? preconditionFailed() : new WriteConflictError();
      }
      throw action === "delete" ? new WriteConflictError() : outsideConstraints(action);
    }
  }

  async function update(
    ctx: WriteContext,
    items: StagedUpdate[],
    partial: boolean,
    options: StagedOptions,
  ): Promise<StagedWritten[]> {
    // the routed resource's limits (a wrapper's owner column or scope) are the ones that hold
    const resource = options.resource;
    const objectTypeId = await parts.objectTypeId(ctx);
    const ids = [...new Set(items.map((i) => i.id))];
    const changeWhere = await restrictWhere(ctx, ctx.auth, "change", resource);
    const viewWhere = changeWhere
      ? await restrictWhere(ctx, ctx.auth, "view", resource)
      : undefined;
    const phase = new ReadPhase();
    const found = await lookups(
      ctx,
      phase,
      items.map((i) => i.input),
    );
    const infos = new Map<string, ModelInfo | null>();
    for (const f of fkFields) {
      const [app, model] = f.related!.split(".") as [string, string];
      infos.set(f.name, await ctx.services.models.get(app, model, ctx));
    }
    const existingRows = readExisting(ctx, phase, ids, infos);
    const existingTags = spec.tags
      ? phase.add(storedTagsQuery(ctx, objectTypeId, ids))
      : () => [] as Array<TagRow & { objectId: number }>;
    const mayChange = changeWhere ? phase.add(admittedQuery(ctx, ids, changeWhere)) : null;
    const mayView = viewWhere ? phase.add(admittedQuery(ctx, ids, viewWhere)) : null;
    await phase.run(ctx);
    const related = found.related();
    const tagRows = found.tags();
    const viewable = found.viewable();
    const rules = await found.rules();
    const byId = new Map<number, Row>();
    const read = new Map<number, string | null>();
    for (const row of existingRows()) {
      // the stored related objects' nested forms join those the inputs name
      takeNested(ctx, row, related, infos);
      byId.set(row.id, row);
      read.set(row.id, row.lastUpdated ?? null);
    }
    const storedTags = new Map<number, TagRow[]>();
    for (const t of existingTags() as Array<TagRow & { objectId: number }>)
      (storedTags.get(t.objectId) ?? storedTags.set(t.objectId, []).get(t.objectId)!).push(t);
    const changeOk = mayChange ? new Set(mayChange().map((r) => Number(r.id))) : null;
    const viewOk = mayView ? new Set(mayView().map((r) => Number(r.id))) : null;
    const batch = new WriteBatch();
    const changes: StagedChange[] = [];
    await eachInput(items, options.bulk, async ({ id, input }) => {
      // the row as the read phase saw it, or as an earlier item of this request left it
      const existing = byId.get(id);
      if (!existing || (changeOk && !changeOk.has(id) && !viewOk?.has(id)))
        throw notFound(`No ${resource.verboseName} with id ${id}.`);
      if (changeOk && !changeOk.has(id)) throw forbidden();
      options.precondition?.(existing.lastUpdated ?? existing.created ?? null);
      const c = await convert(
        ctx,
        input,
        existing,
        partial,
        related,
        tagRows,
        objectTypeId,
        viewable,
      );
      const stamp = nextStamp(existing.lastUpdated);
      const after: Row = { ...existing, ...c.values, lastUpdated: stamp };
      const beforeTags = storedTags.get(id) ?? [];
      const [before] = await parts.serialize(
        ctx,
        [existing],
        new Map([[id, nestedTags(ctx, beforeTags)]]),
        related,
      );
      const [post] = await parts.serialize(
        ctx,
        [after],
        new Map([[id, nestedTags(ctx, c.tags ?? beforeTags)]]),
        related,
      );
      // conditioned on the stamp read: a write that came between fails the guard after it
      batch.add(
        orm(ctx)
          .update(table)
          .set({ ...c.values, lastUpdated: stamp } as never)
          .where(and(eq(table.id, id), eq((table as any).lastUpdated, existing.lastUpdated))),
      );
      batch.add(guardChanged(orm(ctx)));
      byId.set(id, after);
      if (c.tags) {
        stageTags(ctx, batch, objectTypeId, id, c.tags, true);
        storedTags.set(id, c.tags);
      }
      changes.push({ action: "update", id, prechange: before!, postchange: post! });
    });
    const texts = stageChanges(ctx, batch, resource, objectTypeId, rules, changes);
    if (changeWhere) stagePermission(ctx, batch, inArray(table.id, ids), ids.length, changeWhere);
    await runBatch(ctx, batch, "change", read, !!options.precondition);
    return texts().map((json, k) => ({
      id: changes[k]!.id as number,
      record: json === undefined ? changes[k]!.postchange! : JSON.parse(json),
      json,
    }));
  }
  async function remove(
    ctx: WriteContext,
    ids: number[],
    options: StagedOptions,
  ): Promise<"transaction" | undefined> {
    // the routed resource's limits (a wrapper's owner column or scope) are the ones that hold
    const resource = options.resource;
    const hooks = ctx.services.deleteHooks;
    if (hooks.some((h) => !h.stage)) return "transaction";
    const objectTypeId = await parts.objectTypeId(ctx);
    const unique = [...new Set(ids)];
    const deleteWhere = await restrictWhere(ctx, ctx.auth, "delete", resource);
    const viewWhere = deleteWhere
      ? await restrictWhere(ctx, ctx.auth, "view", resource)
      : undefined;
    const phase = new ReadPhase();
    const rules = stageRules(ctx, phase, spec);
    const infos = new Map<string, ModelInfo | null>();
    for (const f of fkFields) {
      const [app, model] = f.related!.split(".") as [string, string];
      infos.set(f.name, await ctx.services.models.get(app, model, ctx));
    }
    const existingRows = readExisting(ctx, phase, unique, infos);
    const existingTags = spec.tags
      ? phase.add(storedTagsQuery(ctx, objectTypeId, unique))
      : () => [] as Array<TagRow & { objectId: number }>;
    const mayDelete = deleteWhere ? phase.add(admittedQuery(ctx, unique, deleteWhere)) : null;
    const mayView = viewWhere ? phase.add(admittedQuery(ctx, unique, viewWhere)) : null;
    const target = (id: number) => ({ appLabel: spec.appLabel, model: spec.model, id });
    const hookParts = new Map(
      unique.map((id) => [id, hooks.map((h) => h.stage!(ctx, phase, target(id)))]),
    );
    await phase.run(ctx);
    const staged = await rules();
    const related = new Map(fkFields.map((f) => [f.name, new Map<number, ApiRecord>()]));
    const byId = new Map<number, Row>();
    const read = new Map<number, string | null>();
    for (const row of existingRows()) {
      takeNested(ctx, row, related, infos);
      byId.set(row.id, row);
      read.set(row.id, row.lastUpdated ?? null);
    }
    const storedTags = new Map<number, TagRow[]>();
    for (const t of existingTags() as Array<TagRow & { objectId: number }>)
      (storedTags.get(t.objectId) ?? storedTags.set(t.objectId, []).get(t.objectId)!).push(t);
    const deleteOk = mayDelete ? new Set(mayDelete().map((r) => Number(r.id))) : null;
    const viewOk = mayView ? new Set(mayView().map((r) => Number(r.id))) : null;
    const batch = new WriteBatch();
    const changes: StagedChange[] = [];
    const explain: StagedHook[] = [];
    for (const id of ids) {
      const existing = byId.get(id);
      if (!existing || (deleteOk && !deleteOk.has(id) && !viewOk?.has(id)))
        throw notFound(`No ${resource.verboseName} with id ${id}.`);
      if (deleteOk && !deleteOk.has(id)) throw forbidden();
      options.precondition?.(existing.lastUpdated ?? existing.created ?? null);
      byId.delete(id); // named twice: the second is not found, as it would be one by one
      for (const answer of hookParts.get(id)!) {
        const part = await answer();
        part.write(batch);
        explain.push(part);
      }
      const [before] = await parts.serialize(
        ctx,
        [existing],
        new Map([[id, nestedTags(ctx, storedTags.get(id) ?? [])]]),
        related,
      );
      batch.add(
        orm(ctx)
          .delete(table)
          .where(and(eq(table.id, id), eq((table as any).lastUpdated, existing.lastUpdated))),
      );
      batch.add(guardChanged(orm(ctx)));
      changes.push({ action: "delete", id, prechange: before!, postchange: null });
    }
    stageChanges(ctx, batch, resource, objectTypeId, staged, changes);
    return runBatch(ctx, batch, "delete", read, !!options.precondition, explain);
  }

  return { create, update, delete: remove };
}

/** Moves the related objects' nested forms a row was read with (`__fk_<field>`) into `related`. */
function takeNested(
  ctx: ReadContext,
  row: Row,
  related: Map<string, Map<number, ApiRecord>>,
  infos: Map<string, ModelInfo | null>,
) {
  for (const [name, info] of infos) {
    const j = row[`__fk_${name}`];
    delete row[`__fk_${name}`];
    const build = info?.nestedSql?.build;
    const id = j == null ? null : (JSON.parse(j as string) as Record<string, unknown>).id;
    if (typeof j === "string" && typeof id === "number" && build)
      related.get(name)!.set(id, build(ctx, id, JSON.parse(j)));
  }
}

/** A lost race on a write that sent `If-Match` (NetBox 4.6): the ETag no longer matches. */
const preconditionFailed = () =>
  new ApiError(412, {
    detail: "Precondition failed: the object has changed since the ETag in If-Match was issued.",
    error: "precondition_failed",
  });

/** `requireAfterWrite`'s answer: the object as written would fall outside the caller's constraints. */
const outsideConstraints = (action: "add" | "change") =>
  ApiError.detail(
    403,
    `You do not have permission to ${action === "add" ? "create" : "change"} this object as submitted: it would fall outside the objects you may ${action === "add" ? "create" : "change"}.`,
    "permission_denied",
  );
