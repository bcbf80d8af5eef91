/**
 * A custom object type's writes as one read phase and one atomic write batch (decisions 0071,
 * 0090): the type's shape and choices, the objects the inputs name (existence, nested form,
 * whether the writer may view them), tags, owners, the stored rows and the event rules are read in
 * one `db.read`; rows, links, tags, change records, outbox rows and guards go in one `db.write`.
 */
import { MAX_LINKS_PER_VALUE } from "../../../core/limits";
import { viewableTags } from "../../../core/models/tag-scope";
import { and, sql, type SQL } from "drizzle-orm";
import { ApiError, forbidden, notFound, ValidationError } from "../../../core/errors";
import { mapConstraintError } from "../../../core/rest/constraints";
import { restrictWhere } from "../../../core/auth/restrict";
import { codename } from "../../../core/auth/permissions";
import { stageChanges, type StagedChange } from "../../../core/changes/record";
import { stageRules, type StagedRules } from "../../../core/events/dispatch";
import {
  editedTags,
  foldTagEdits as foldTagEditsLive,
  tagEditsOf,
} from "../../../core/rest/tag-edits";
import {
  deletesAsRead,
  eachInput,
  nestedRead,
  resolveTagRows,
  stageTagLookup,
  type TagRow,
} from "../../../core/models/staged";
import { ranOrRefused, runStagedBatch } from "../../../core/models/batch-failure";
import {
  createManyChecked,
  ensureExists,
  updateChecked,
  writeTransaction,
} from "../../../core/rest/handlers";
import {
  newIdMarker,
  createdRowId,
  nextStamp,
  ReadPhase,
  WriteBatch,
} from "../../../core/rest/write-batch";
import type {
  ApiRecord,
  AssumedUpdate,
  ModelInfo,
  Resource,
  StagedHook,
  StagedOptions,
  StagedUpdate,
  StagedWrites,
  StagedWritten,
  WriteContext,
} from "../../../core/context";
import { customObjectTypes } from "../../../db/schema";
import { offersTransaction, type Queries } from "../../../db/client";
import type { WrittenRow } from "../../../core/models/unique-clash";
import { deletingTogether } from "./on-delete";
import { APP_LABEL } from "../constants";
import { fieldColumns, ident, linkTableName, tableName } from "../ddl";
import type { FieldRow } from "../field-types";
import { resolveRef, type Ref } from "../field-types/reference";
import type { Nested } from "./read";
import { instanceUrl, relatedInfos, verboseName } from "./shape";
import { idsList, inIds, rowsPerStatement } from "../../../db/d1-limits";
import { stageDeleteHooks } from "../../../core/rest/staged-delete-hooks";
import { yieldWhenDue } from "../../../turns";
import { requireBulkFound } from "../../../core/rest/bulk-found";
import { cachedForms, rememberForms } from "./target-forms";
import {
  StaleModel,
  type Converted,
  type Lookups,
  type ObjectWriter,
  type Pending,
  type Preflight,
  type Seen,
} from "./write";

type Row = Record<string, any>;
const refKey = (typeId: number, id: number) => `${typeId}:${id}`;
/** Link or tag rows an INSERT carries at most (4 values each): within D1's limit (0125). */
const LINK_ROWS = rowsPerStatement(4);

/** What the read phase found about one related type's named objects. */
interface TargetFound {
  forms: Map<number, ApiRecord>;
  /** The named ids the writer may view; null when it may view them all. */
  visible: Set<number> | null;
}

/** Adds the reads of one related type's named objects: their nested forms, what the writer may view. */
async function stageTarget(
  ctx: WriteContext,
  phase: ReadPhase,
  info: ModelInfo,
  ids: number[],
): Promise<(() => TargetFound) | null> {
  const nestedSql = info.nestedSql;
  if (!nestedSql) return null;
  const orm = ctx.services.db.orm;
  const user = ctx.auth.user;
  let visible: (() => Set<number>) | null = null;
  if (user && !user.isSuperuser) {
    const target = info.resource;
    const where = target
      ? await restrictWhere(ctx, ctx.auth, "view", target)
      : user.permissions.has(codename(info.appLabel, "view", info.model))
        ? undefined
        : sql`0`;
    const self = info.appLabel === "users" && info.model === "user" ? [user.id] : [];
    if (where && target) {
      const idExpr = sql`${target.list.idExpr}`;
      const admitted = phase.add(
        orm
          .select({ id: sql<number>`${idExpr}` })
          .from(target.table)
          .where(
            and(
              sql`${idExpr} IN (${sql.join(
                ids.map((i) => sql`${i}`),
                sql`, `,
              )})`,
              where,
            ),
          ),
      );
      visible = () => new Set([...admitted().map((r) => Number(r.id)), ...self]);
    } else if (where) visible = () => new Set(self);
  }
  // forms visible to the writer whatever they are may come from the cache (decision 0107)
  const cached = visible ? null : cachedForms(ctx, info, ids);
  const rows = cached
    ? () => cached
    : phase.add(nestedRead(nestedSql).with(orm, { ids: JSON.stringify(ids) }));
  return () => {
    const forms = new Map<number, ApiRecord>();
    const found = rows();
    if (!cached) rememberForms(ctx, info, found);
    for (const r of found)
      forms.set(Number(r.id), nestedSql.build(ctx, Number(r.id), JSON.parse(r.j)));
    return { forms, visible: visible ? visible() : null };
  };
}

/** The objects (by type) and owners the inputs name; stored references are the rows' own. */
async function namedRefs(w: ObjectWriter, ctx: WriteContext, inputs: ApiRecord[], create: boolean) {
  const byType = new Map<number, Set<number>>();
  const owners = new Set<number>();
  const add = (r: Ref) =>
    (byType.get(r.typeId) ?? byType.set(r.typeId, new Set()).get(r.typeId)!).add(r.id);
  for (const input of inputs) {
    for (const f of w.fields) {
      if (w.shape.storage(f) === "column") continue;
      const raw = Object.hasOwn(input, f.name) ? input[f.name] : create ? f.default : undefined;
      if (raw === null || raw === undefined) continue;
      // a list past the limit is refused by the conversion, its items never looked up
      const items =
        w.shape.storage(f) !== "links"
          ? [raw]
          : Array.isArray(raw) && raw.length <= MAX_LINKS_PER_VALUE
            ? raw
            : [];
      for (const item of items) {
        const r = await resolveRef(ctx, f, item);
        if (!("error" in r)) add(r);
      }
    }
    if (w.owned && Object.hasOwn(input, "owner")) {
      const raw = input.owner;
      const id = raw && typeof raw === "object" ? (raw as Row).id : raw;
      if (typeof id === "number" && Number.isInteger(id)) owners.add(id);
    }
  }
  return { byType, owners };
}

/**
 * A conversion's look-ups answered from the read phase. Types without a SQL nested form (none
 * today) fall back to reading as the conversion goes.
 */
class PhaseLookups implements Lookups {
  constructor(
    readonly w: ObjectWriter,
    readonly preflightRow: Row | undefined,
    readonly targets: Map<number, TargetFound>,
    readonly owners: TargetFound | null,
    readonly tagRows: TagRow[],
  ) {}

  /** Tags objects hold already (their stored tags), for `tagsJson`; each names only its own. */
  readonly heldRows: TagRow[] = [];

  /** Adds tags an object holds already (its stored tags) to those `tagsJson` may give. */
  learnTags(held: TagRow[]) {
    for (const t of held)
      if (!this.heldRows.some((x) => x.id === t.id)) this.heldRows.push({ ...t, scope: null });
  }

  /** The tags a write of `existing` may name: those the lookup found and those it holds (0153). */
  nameable(existing: Row | null): TagRow[] {
    const held = existing ? (JSON.parse(existing.__tags ?? "[]") as TagRow[]) : [];
    this.learnTags(held);
    return [...this.tagRows, ...held.map((t) => ({ ...t, scope: null }))];
  }

  /** Each choice set's value → label, as the preflight read them. */
  readonly choicePairs = new Map<number, Map<string, string>>();

  async preflight(_ctx: WriteContext, refIds: Record<string, number | null>): Promise<Preflight> {
    const row = this.preflightRow;
    const { cot, slug } = this.w;
    if (!row || row.v !== cot.shapeVersion || row.slug !== slug) throw new StaleModel();
    const choices = new Map<number, Set<string>>();
    for (const [id, pairs] of Object.entries(
      JSON.parse(row.choices ?? "{}") as Record<string, [string, string][]>,
    )) {
      choices.set(Number(id), new Set(pairs.map(([v]) => v)));
      this.choicePairs.set(Number(id), new Map(pairs.map(([v, label]) => [v, label])));
    }
    const typeOf = new Map(this.w.embeddedFields.map((f) => [f.name, f.relatedObjectTypeId!]));
    return {
      choices,
      found: (name) => {
        const id = refIds[name];
        return id != null && !!this.targets.get(typeOf.get(name)!)?.forms.has(id);
      },
    };
  }

  async existingRefs(ctx: WriteContext, pending: Pending[]): Promise<Seen> {
    const found = new Set<string>();
    const nested: Nested = new Map();
    const rest = pending.filter((p) => !this.targets.has(p.ref.typeId));
    for (const { ref } of pending) {
      const t = this.targets.get(ref.typeId);
      const form = t?.forms.get(ref.id);
      if (!form) continue;
      found.add(refKey(ref.typeId, ref.id));
      (nested.get(ref.typeId) ?? nested.set(ref.typeId, new Map()).get(ref.typeId)!).set(
        ref.id,
        form,
      );
    }
    if (rest.length) {
      const more = await this.w.live.existingRefs(ctx, rest);
      for (const k of more.found) found.add(k);
      for (const [typeId, forms] of more.nested) nested.set(typeId, forms);
    }
    return { found, nested };
  }

  async unviewable(ctx: WriteContext, refs: Pending[]): Promise<Pending[]> {
    const rest = refs.filter((p) => !this.targets.has(p.ref.typeId));
    const hidden = refs.filter((p) => {
      const visible = this.targets.get(p.ref.typeId)?.visible;
      return !!visible && !visible.has(p.ref.id);
    });
    return rest.length ? [...hidden, ...(await this.w.live.unviewable(ctx, rest))] : hidden;
  }

  async heldRefs(_ctx: WriteContext, existing: Row, refs: Pending[]): Promise<Set<Pending>> {
    const out = new Set<Pending>();
    for (const p of refs) {
      const f = p.field;
      if (this.w.shape.storage(f) === "reference") {
        const [idCol, typeCol] = fieldColumns(f);
        if (existing[idCol!] === p.ref.id && (!typeCol || existing[typeCol] === p.ref.typeId))
          out.add(p);
        continue;
      }
      const links = JSON.parse(existing[`__l_${f.name}`] ?? "[]") as [number | null, number][];
      if (links.some(([t, id]) => id === p.ref.id && (t === null || t === p.ref.typeId)))
        out.add(p);
    }
    return out;
  }

  async tags(_ctx: WriteContext, raw: unknown, existing: Row | null) {
    const r = resolveTagRows(
      raw,
      this.nameable(existing),
      this.w.cot.objectTypeId!,
      `${APP_LABEL}.${this.w.slug}`,
    );
    return "error" in r ? r : { ids: r.tags.map((t) => t.id) };
  }

  async owner(_ctx: WriteContext, id: number) {
    const o = this.owners;
    return !!o && o.forms.has(id) && (!o.visible || o.visible.has(id));
  }

  /** The nested forms of every named object the phase found, by type. */
  nested(): Nested {
    const out: Nested = new Map();
    for (const [typeId, t] of this.targets) out.set(typeId, new Map(t.forms));
    return out;
  }

  /** The tag rows of `ids` as a row's `__tags` (sorted by name, as reads give them). */
  tagsJson(ids: number[]): string {
    const rows = ids
      .map((id) => [...this.tagRows, ...this.heldRows].find((t) => t.id === id)!)
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    return JSON.stringify(rows.map(({ id, name, slug, color }) => ({ id, name, slug, color })));
  }
}

/** Adds the look-ups of `inputs` to the phase; the answer, once it ran, is their `Lookups`. */
async function stageLookups(
  w: ObjectWriter,
  ctx: WriteContext,
  phase: ReadPhase,
  inputs: ApiRecord[],
  create: boolean,
): Promise<() => PhaseLookups> {
  const orm = ctx.services.db.orm;
  // Without choice sets the preflight holds only the shape, which the batch guards already
  // (`stageShapeGuard`): nothing to read (decision 0107).
  const pre = Object.hasOwn(w.preflightColumns, "choices")
    ? phase.add(w.staged.preflight.with(orm))
    : () => [{ v: w.cot.shapeVersion, slug: w.slug }];
  const { byType, owners } = await namedRefs(w, ctx, inputs, create);
  const infos = await relatedInfos(ctx, [...byType.keys()]);
  const targets = new Map<number, () => TargetFound>();
  for (const [typeId, ids] of byType) {
    const info = infos.get(typeId);
    const staged = info ? await stageTarget(ctx, phase, info, [...ids]) : null;
    if (staged) targets.set(typeId, staged);
    // an unknown type: nothing of it exists
    else if (!info) targets.set(typeId, () => ({ forms: new Map(), visible: null }));
  }
  const ownerInfo = owners.size ? await ctx.services.models.get("users", "owner", ctx) : null;
  const ownerFound = ownerInfo ? await stageTarget(ctx, phase, ownerInfo, [...owners]) : null;
  // those the caller may view; an object's own tags come from its stored row (`nameable`)
  const tagRows = stageTagLookup(ctx, phase, inputs, await viewableTags(ctx, sql`t.id`));
  return () =>
    new PhaseLookups(
      w,
      (pre() as Row[])[0],
      new Map([...targets].map(([typeId, found]) => [typeId, found()])),
      ownerFound ? ownerFound() : null,
      tagRows(),
    );
}

/** The stored side of an update or delete, as the read phase found it. */
interface Stored {
  byId: Map<number, Row>;
  records: Map<number, ApiRecord>;
  /** Each row's `last_updated` as read: the batch's conditions compare against it. */
  read: Map<number, string | null>;
  actOk: Set<number> | null;
  viewOk: Set<number> | null;
}

/** Adds the reads of the stored rows `ids` (as `loadPlan` reads them) and which the caller may act on. */
function stageStored(
  w: ObjectWriter,
  ctx: WriteContext,
  phase: ReadPhase,
  ids: number[],
  actWhere: SQL | undefined,
  viewWhere: SQL | undefined,
): () => Promise<Stored> {
  // many ids ride as one JSON value: one bound value, and a statement the same for every length
  const list = idsList(ids);
  const plan = w.read.loadPlan(ctx, list);
  const rows = phase.add(plan.statements[0]! as never) as () => Row[];
  const admitted = (where: SQL | undefined) =>
    where
      ? phase.add(
          ctx.services.db.orm
            .select({ id: w.table.id })
            .from(w.table)
            .where(and(sql`${w.table.id} IN (${list})`, where)),
        )
      : null;
  const mayAct = admitted(actWhere);
  const mayView = admitted(viewWhere);
  return async () => {
    const found = rows();
    const records = await plan.finish(
      [found],
      found.map((r) => r.id as number),
    );
    const idSet = (q: typeof mayAct) => (q ? new Set(q().map((r) => Number(r.id))) : null);
    return {
      byId: new Map(found.map((r) => [r.id as number, r])),
      records: new Map(records.map((r) => [r.id as number, r])),
      read: new Map(found.map((r) => [r.id as number, (r.lastUpdated as string) ?? null])),
      actOk: idSet(mayAct),
      viewOk: idSet(mayView),
    };
  };
}

/** The stored row `id` is there and the caller may view it. */
const visibleStored = (stored: Stored, id: number) =>
  stored.byId.has(id) && (!stored.viewOk || stored.viewOk.has(id));

/**
 * The stored row `id` if the caller may act on it: 404 when missing or not viewable (decision
 * 0152), 403 when viewable but not theirs to act on.
 */
function admitStored(stored: Stored, id: number, resource: Resource, options: StagedOptions): Row {
  const existing = stored.byId.get(id);
  if (!existing || !visibleStored(stored, id))
    throw notFound(`No ${resource.verboseName} with id ${id}.`);
  if (stored.actOk && !stored.actOk.has(id)) throw forbidden();
  options.precondition?.(existing.lastUpdated ?? existing.created ?? null);
  return existing;
}

/** Nested forms of the objects a stored record names, by type (saves reading them again). */
function formsOf(w: ObjectWriter, row: Row, record: ApiRecord | undefined): Nested {
  const out: Nested = new Map();
  if (!record) return out;
  const put = (typeId: number | null | undefined, id: number | null | undefined, form: unknown) => {
    if (typeId == null || id == null || !form || typeof form !== "object") return;
    const { object_type: _t, _content_type: _c, ...rest } = form as ApiRecord;
    (out.get(typeId) ?? out.set(typeId, new Map()).get(typeId)!).set(id, rest);
  };
  for (const f of w.fields) {
    const kind = w.shape.storage(f);
    if (kind === "reference")
      put(
        f.isPolymorphic ? row[`${f.name}_type`] : f.relatedObjectTypeId,
        row[`${f.name}_id`],
        record[f.name],
      );
    else if (kind === "links") {
      const forms = (record[f.name] as unknown[] | undefined) ?? [];
      const links = JSON.parse(row[`__l_${f.name}`] ?? "[]") as [number | null, number][];
      for (const [i, [t, id]] of links.entries()) put(t ?? f.relatedObjectTypeId, id, forms[i]);
    }
  }
  return out;
}

/** Merges nested-form maps (later ones win). */
function mergeNested(...maps: Nested[]): Nested {
  const out: Nested = new Map();
  for (const m of maps)
    for (const [typeId, forms] of m)
      for (const [id, form] of forms)
        (out.get(typeId) ?? out.set(typeId, new Map()).get(typeId)!).set(id, form);
  return out;
}

/**
 * The row as reads give it after a write of `c`: links, tags and a select primary's label from the
 * conversion; references it changed lose the nested form that rode on the stored row.
 */
function rowAfter(w: ObjectWriter, look: PhaseLookups, base: Row, c: Converted): Row {
  const row: Row = { ...base, ...c.values };
  for (const f of w.fields) {
    if (w.shape.storage(f) === "reference" && Object.hasOwn(c.values, `${f.name}_id`))
      delete row[`__n_${f.name}`];
  }
  for (const [f, refs] of c.multi)
    row[`__l_${f.name}`] = JSON.stringify(
      refs.map((r) => [f.isPolymorphic ? r.typeId : null, r.id]),
    );
  if (c.tagIds) row.__tags = look.tagsJson(c.tagIds);
  const primary = w.shape.primary;
  if (w.shape.primaryLabel && primary?.choiceSetId != null && Object.hasOwn(c.values, primary.name))
    row.__label = look.choicePairs.get(primary.choiceSetId)?.get(row[primary.name]) ?? null;
  return row;
}

/** Statements that replace (or, for a new row, set) a row's links of the fields in `multi`. */
function stageLinks(
  w: ObjectWriter,
  ctx: WriteContext,
  batch: WriteBatch,
  rows: Array<{ id: number | SQL; multi: Map<FieldRow, Ref[]>; replace: boolean }>,
) {
  const orm = ctx.services.db.orm;
  for (const f of w.fields) {
    if (w.shape.storage(f) !== "links") continue;
    const lt = ident(linkTableName(w.cot.id, f.id));
    const tuples: SQL[] = [];
    for (const { id, multi, replace } of rows) {
      const refs = multi.get(f);
      if (!refs) continue;
      if (replace) batch.add(orm.run(sql`DELETE FROM ${lt} WHERE source_id = ${id}`));
      for (const [position, r] of refs.entries())
        tuples.push(sql`(${id}, ${f.isPolymorphic ? r.typeId : null}, ${r.id}, ${position})`);
    }
    for (let s = 0; s < tuples.length; s += LINK_ROWS)
      batch.add(
        orm.run(
          sql`INSERT INTO ${lt} (source_id, target_type, target_id, position) VALUES ${sql.join(tuples.slice(s, s + LINK_ROWS), sql`, `)}`,
        ),
      );
  }
}

/** Statements that set objects' tags (replacing what they had when `replace`). */
function stageTags(
  w: ObjectWriter,
  ctx: WriteContext,
  batch: WriteBatch,
  rows: Array<{ id: number | SQL; tagIds: number[] | null; replace: boolean }>,
) {
  const orm = ctx.services.db.orm;
  const ot = w.cot.objectTypeId!;
  const tuples: SQL[] = [];
  for (const { id, tagIds, replace } of rows) {
    if (!tagIds) continue;
    if (replace)
      batch.add(
        orm.run(
          sql`DELETE FROM "tagged_items" WHERE "object_type_id" = ${ot} AND "object_id" = ${id}`,
        ),
      );
    for (const tag of tagIds) tuples.push(sql`(${tag}, ${ot}, ${id})`);
  }
  for (let s = 0; s < tuples.length; s += LINK_ROWS)
    batch.add(
      orm.run(
        sql`INSERT INTO "tagged_items" ("tag_id", "object_type_id", "object_id") VALUES ${sql.join(tuples.slice(s, s + LINK_ROWS), sql`, `)}`,
      ),
    );
}

/** A guard that the type still has the shape this write was converted under (else `StaleModel`). */
function stageShapeGuard(w: ObjectWriter, ctx: WriteContext, batch: WriteBatch) {
  batch.add(w.staged.shapeGuard.with(ctx.services.db.orm));
}

/** A guard that fails the batch unless `where` admits all `n` rows `ids` selects (403 after). */
function stagePermission(
  w: ObjectWriter,
  ctx: WriteContext,
  batch: WriteBatch,
  ids: SQL,
  n: number,
  where: SQL,
) {
  const orm = ctx.services.db.orm;
  const admitted = orm.select({ n: sql<number>`count(*)` }).from(w.table).where(and(ids, where));
  batch.add(orm.run(sql`INSERT INTO write_guard (ok) SELECT (${admitted}) = ${n}`));
}

/**
 * Errors a write's batch answered with the type's shape proven current: a constraint's (the
 * batch's shape guard ran before the statement that failed), or a failed guard's explained after
 * its shape was read (`runBatch`). `shapeChecked` reads the shape for no such answer again.
 */
const shapeProven = new WeakSet<object>();

/**
 * Runs the batch; constraint failures answer as a transaction's did (400 naming the field or
 * constraint). A failed guard is the type's shape first (`StaleModel`: the write starts again on
 * the new shape), then as `runStagedBatch` explains it: a delete hook's, a lost race (409, or 412
 * with `If-Match`), else the permission guard (403). The shape and the stamps are read on failure
 * only, with the read that settles the request's guards (decision 0140).
 */
async function runBatch(
  w: ObjectWriter,
  ctx: WriteContext,
  batch: WriteBatch,
  action: "add" | "change" | "delete",
  read: Map<number, string | null>,
  preconditioned: boolean,
  hooks: StagedHook[] = [],
  written?: { rows: WrittenRow[]; bulk: boolean },
): Promise<"transaction" | undefined> {
  const orm = ctx.services.db.orm;
  let proven = false;
  // a unique refusal names every clashing key, in one read after the failure (decision 0146)
  const explain = written && {
    ...written,
    orm,
    read: (reads: unknown[]) =>
      ctx.services.db.read(reads as unknown as Queries) as unknown as Promise<unknown[]>,
  };
  const run = async () => {
    try {
      return await w.uniqueChecked(() => batch.run(ctx), explain);
    } catch (e) {
      // a constraint's answer: the shape guard leads the type's statements, so it held
      if (e instanceof ValidationError) proven = true;
      throw e;
    }
  };
  try {
    return await runStagedBatch(ctx, batch, run, {
      action,
      read,
      preconditioned,
      hooks,
      constraintError: (e) =>
        mapConstraintError(e, {
          verboseName: verboseName(w.cot),
          fieldForColumn: (c) => w.fieldForColumn(c),
        }),
      first: {
        read: shapeQuery(w, orm),
        check(rows) {
          shapeHeld(w, rows);
          proven = true;
        },
      },
      stamps: (ids) =>
        orm
          .select({ id: w.table.id, stamp: w.table.lastUpdated })
          .from(w.table)
          .where(inIds(w.table.id, ids)),
    });
  } catch (e) {
    if (proven && e instanceof ApiError) shapeProven.add(e);
    throw e;
  }
}

/**
 * NetBox 4.6's `add_tags` / `remove_tags` (`core/rest/tag-edits.ts`) folded into `tags` over the
 * read phase: the stored tags (riding on the row) with those added and removed.
 */
function foldTagEdits(
  w: ObjectWriter,
  look: PhaseLookups,
  input: ApiRecord,
  existing: Row | null,
): ApiRecord {
  const edits = tagEditsOf(input, existing !== null);
  if (!edits) return input;
  const label = `${APP_LABEL}.${w.slug}`;
  const resolve = (field: string, raw: unknown) => {
    const r = resolveTagRows(raw, look.nameable(existing), w.cot.objectTypeId!, label);
    if ("error" in r) throw ValidationError.field(field, r.error);
    return r.tags.map((t) => t.id);
  };
  const added = edits.adding ? resolve("add_tags", edits.add) : [];
  const removed = edits.removing ? resolve("remove_tags", edits.remove) : [];
  const held = existing ? (JSON.parse(existing.__tags ?? "[]") as TagRow[]) : [];
  const tags = editedTags(
    held.map((t) => t.id),
    added,
    removed,
  );
  return { ...edits.rest, tags };
}

type Orm = WriteContext["services"]["db"]["orm"];

/** The type's shape version and slug now. */
const shapeQuery = (w: ObjectWriter, orm: Orm) =>
  orm
    .select({ v: customObjectTypes.shapeVersion, slug: customObjectTypes.slug })
    .from(customObjectTypes)
    .where(sql`${customObjectTypes.id} = ${w.cot.id}`);

/** `StaleModel` unless `rows` (of `shapeQuery`) show the shape `w` was built on. */
function shapeHeld(w: ObjectWriter, rows: unknown[]) {
  const [shape] = rows as Array<{ v: number; slug: string }>;
  if (shape?.v !== w.cot.shapeVersion || shape.slug !== w.slug) throw new StaleModel();
}

/** `StaleModel` when the type no longer has the shape `w` was built on. */
async function checkShape(w: ObjectWriter, orm: Orm) {
  shapeHeld(w, await shapeQuery(w, orm));
}

/**
 * A write's read phase. A statement naming a column or table the type no longer has (its model
 * was taken from the cache before a rename committed) is the stale model it is: `liveResource`
 * runs the write again on the type as it now is, instead of a 409 `schema_changed` that every
 * retry met again (a local file, where nothing else refreshed the cached model).
 */
async function runReads(w: ObjectWriter, ctx: WriteContext, phase: ReadPhase) {
  try {
    await phase.run(ctx);
  } catch (e) {
    const text =
      String((e as Error)?.message ?? "") + String((e as { cause?: Error })?.cause?.message ?? "");
    if (/no such (column|table)/i.test(text)) await checkShape(w, ctx.services.db.orm);
    throw e;
  }
}

async function stagedCreate(
  w: ObjectWriter,
  ctx: WriteContext,
  inputs: ApiRecord[],
  options: StagedOptions,
): Promise<StagedWritten[]> {
  const addWhere = await restrictWhere(ctx, ctx.auth, "add", options.resource);
  const phase = new ReadPhase();
  const lookups = await stageLookups(w, ctx, phase, inputs, true);
  const rules = stageRules(ctx, phase, { appLabel: APP_LABEL, model: w.slug });
  await runReads(w, ctx, phase);
  const batch = new WriteBatch();
  stageShapeGuard(w, ctx, batch);
  const made = { look: lookups(), rules: await rules(), addWhere };
  const { rows, written } = await stageCreates(w, ctx, batch, inputs, options, made);
  w.indexLater(ctx);
  await runBatch(w, ctx, batch, "add", new Map(), false, [], {
    rows: rows.map((values) => ({ id: null, values })),
    bulk: !!options.bulk,
  });
  return written();
}

/**
 * Stages the rows of `inputs` converted over `look`, their links, tags, change records and the
 * caller's add constraints into `batch`; answers what was written once the batch ran.
 */
async function stageCreates(
  w: ObjectWriter,
  ctx: WriteContext,
  batch: WriteBatch,
  inputs: ApiRecord[],
  options: StagedOptions,
  made: { look: PhaseLookups; rules: StagedRules; addWhere: SQL | undefined },
): Promise<{ rows: Row[]; written: () => StagedWritten[] }> {
  const { look, addWhere } = made;
  const now = nextStamp(null);
  const converted: Converted[] = [];
  const rows: Row[] = [];
  await eachInput(inputs, options.bulk, async (input, k) => {
    const c = await w.convert(
      ctx,
      foldTagEdits(w, look, input, null),
      null,
      false,
      undefined,
      look,
    );
    converted.push(c);
    const params = w.insertParams(c.values, now);
    params.created = options.created?.[k] ?? now;
    rows.push(rowAfter(w, look, { ...params, __tags: "[]" }, c));
  });
  for (const [i, row] of rows.entries())
    for (const f of w.fields)
      if (w.shape.storage(f) === "links" && !converted[i]!.multi.has(f))
        row[`__l_${f.name}`] = "[]";
  const records = await newRecords(w, ctx, rows, look);
  const fixed = options.ids;
  const ids = await stageInserts(w, ctx, batch, rows, fixed);
  const n = rows.length;
  const table = tableName(w.cot.id);
  const newId = (k: number) => createdRowId(table, k, n, fixed);
  stageLinks(
    w,
    ctx,
    batch,
    converted.map((c, k) => ({ id: newId(k), multi: c.multi, replace: false })),
  );
  stageTags(
    w,
    ctx,
    batch,
    converted.map((c, k) => ({ id: newId(k), tagIds: c.tagIds, replace: false })),
  );
  const texts = await stageChanges(
    ctx,
    batch,
    options.resource,
    w.cot.objectTypeId!,
    made.rules,
    records.map((r, k) => ({ action: "create", id: newId(k), prechange: null, postchange: r })),
  );
  if (addWhere)
    stagePermission(
      w,
      ctx,
      batch,
      fixed
        ? inIds(w.table.id, fixed)
        : sql`${w.table.id} > (SELECT max("id") FROM ${w.table}) - ${n}`,
      n,
      addWhere,
    );
  return {
    rows,
    written: () => {
      ids.sort((a, b) => a - b);
      return texts().map((json, k) => ({ id: ids[k]!, record: JSON.parse(json!), json }));
    },
  };
}

/**
 * The records of new rows as reads will give them, SQLite's ids still to come: serialised under
 * stand-in ids (each row its own, so links and tags stay apart), then named by the marker that
 * the change record's statement replaces with the id (`withNewId`).
 */
async function newRecords(
  w: ObjectWriter,
  ctx: WriteContext,
  rows: Row[],
  look: PhaseLookups,
): Promise<ApiRecord[]> {
  const standIn = rows.map((r, k) => ({ ...r, id: -1 - k }));
  const records = await w.read.serialize(ctx, standIn, look.nested());
  const marker = newIdMarker();
  return records.map((rec, k) => ({
    ...rec,
    id: marker,
    url: instanceUrl(ctx.baseUrl, w.slug, marker as never),
    display: w.read.display({ ...rows[k], id: marker }),
  }));
}

/**
 * Multi-row INSERTs of `rows`; the returned list fills with the new ids once the batch ran.
 * Thousands of rows give the event loop turns between statements (decision 0186).
 */
async function stageInserts(
  w: ObjectWriter,
  ctx: WriteContext,
  batch: WriteBatch,
  rows: Row[],
  fixed?: number[],
): Promise<number[]> {
  const ids: number[] = [];
  const orm = ctx.services.db.orm;
  // id, created and last_updated besides the columns: within D1's bound values (decision 0125)
  const perStatement = rowsPerStatement(w.insertColumns.length + 3);
  for (let s = 0; s < rows.length; s += perStatement) {
    await yieldWhenDue();
    const chunk = rows.slice(s, s + perStatement).map((r, k) => {
      // a restore names its ids (StagedOptions.ids); otherwise SQLite gives them
      const into: Row = fixed ? { id: fixed[s + k] } : {};
      for (const key of [...w.insertColumns, "created", "lastUpdated"]) into[key] = r[key] ?? null;
      return into;
    });
    const got = (out: Array<{ id: unknown }>) => ids.push(...out.map((r) => Number(r.id)));
    // one row (a lone create): the INSERT built once per shape; a restore's names its id
    if (chunk.length === 1 && !fixed) batch.add(w.staged.insertOne.with(orm, chunk[0]!), got);
    else
      batch.add(
        orm
          .insert(w.table)
          .values(chunk as never)
          .returning({ id: w.table.id }),
        got,
      );
  }
  return ids;
}

async function stagedUpdate(
  w: ObjectWriter,
  ctx: WriteContext,
  items: StagedUpdate[],
  partial: boolean,
  options: StagedOptions,
): Promise<StagedWritten[]> {
  const resource = options.resource;
  const ids = [...new Set(items.map((i) => i.id))];
  const changeWhere = await restrictWhere(ctx, ctx.auth, "change", resource);
  const viewWhere = await restrictWhere(ctx, ctx.auth, "view", resource);
  const phase = new ReadPhase();
  const inputs = items.map((i) => i.input);
  const lookups = await stageLookups(w, ctx, phase, inputs, false);
  const storedRead = stageStored(w, ctx, phase, ids, changeWhere, viewWhere);
  const rules = stageRules(ctx, phase, { appLabel: APP_LABEL, model: w.slug });
  await runReads(w, ctx, phase);
  const look = lookups();
  const stored = await storedRead();
  const batch = new WriteBatch();
  stageShapeGuard(w, ctx, batch);
  const changes: StagedChange[] = [];
  const written: WrittenRow[] = [];
  if (options.bulk)
    requireBulkFound(
      items.map((i) => i.id),
      (id) => visibleStored(stored, id),
    );
  await eachInput(items, options.bulk, async ({ id, input }) => {
    const existing = admitStored(stored, id, resource, options);
    const folded = foldTagEdits(w, look, input, existing);
    const c = await w.convert(ctx, folded, existing, partial, undefined, look);
    const values = { ...existing, ...c.values };
    written.push({ id, values, touched: new Set(Object.keys(c.values)) });
    changes.push(await stageUpdate(w, ctx, batch, stored, look, id, c));
  });
  const texts = await stageChanges(
    ctx,
    batch,
    resource,
    w.cot.objectTypeId!,
    await rules(),
    changes,
  );
  if (changeWhere)
    stagePermission(
      w,
      ctx,
      batch,
      sql`${w.table.id} IN (${sql.join(
        ids.map((i) => sql`${i}`),
        sql`, `,
      )})`,
      ids.length,
      changeWhere,
    );
  w.indexLater(ctx);
  await runBatch(w, ctx, batch, "change", stored.read, !!options.precondition, [], {
    rows: written,
    bulk: !!options.bulk,
  });
  return texts().map((json, k) => ({
    id: changes[k]!.id as number,
    record: json === undefined ? changes[k]!.postchange! : JSON.parse(json),
    json,
  }));
}

/**
 * Stages one row's UPDATE conditioned on the stamp read (a write that came between fails the guard
 * after it), its links and tags; records the row as written in `stored` (an item later in the
 * request sees it so). Answers the change to log.
 */
async function stageUpdate(
  w: ObjectWriter,
  ctx: WriteContext,
  batch: WriteBatch,
  stored: Stored,
  look: PhaseLookups,
  id: number,
  c: Converted,
): Promise<StagedChange> {
  const orm = ctx.services.db.orm;
  const existing = stored.byId.get(id)!;
  const before = stored.records.get(id)!;
  const stamp = nextStamp(existing.lastUpdated);
  const after = rowAfter(w, look, { ...existing, lastUpdated: stamp }, c);
  const [post] = await w.read.serialize(
    ctx,
    [after],
    mergeNested(formsOf(w, existing, before), look.nested()),
  );
  // Written by hand: a column named like a prototype key (`constructor`) stays a column.
  const assignments = Object.keys(c.values).map((col) => sql`${ident(col)} = ${c.values[col]}`);
  assignments.push(sql`"last_updated" = ${stamp}`);
  batch.add(
    orm.run(
      sql`UPDATE ${ident(tableName(w.cot.id))} SET ${sql.join(assignments, sql`, `)} WHERE id = ${id} AND last_updated = ${existing.lastUpdated}`,
    ),
  );
  batch.add(orm.run(sql`INSERT INTO write_guard (ok) VALUES (changes() > 0)`));
  stageLinks(w, ctx, batch, [{ id, multi: c.multi, replace: true }]);
  stageTags(w, ctx, batch, [{ id, tagIds: c.tagIds, replace: true }]);
  stored.byId.set(id, after);
  stored.records.set(id, post!);
  return { action: "update", id, prechange: before, postchange: post! };
}

async function stagedDelete(
  w: ObjectWriter,
  ctx: WriteContext,
  ids: number[],
  options: StagedOptions,
): Promise<"transaction" | undefined> {
  const resource = options.resource;
  const hooks = ctx.services.deleteHooks;
  if (hooks.some((h) => !h.stage)) return "transaction";
  const unique = [...new Set(ids)];
  const deleteWhere = await restrictWhere(ctx, ctx.auth, "delete", resource);
  const viewWhere = await restrictWhere(ctx, ctx.auth, "view", resource);
  const phase = new ReadPhase();
  const rules = stageRules(ctx, phase, { appLabel: APP_LABEL, model: w.slug });
  const storedRead = stageStored(w, ctx, phase, unique, deleteWhere, viewWhere);
  const hookParts = stageDeleteHooks(ctx, phase, {
    appLabel: APP_LABEL,
    model: w.slug,
    ids: unique,
    objectTypeId: w.cot.objectTypeId ?? undefined,
  });
  // a target another target's cascade reaches is deleted as a target, once (decision 0109)
  if (w.cot.objectTypeId) deletingTogether(ctx, w.cot.objectTypeId, unique);
  await runReads(w, ctx, phase);
  const stored = await storedRead();
  const batch = new WriteBatch();
  stageShapeGuard(w, ctx, batch);
  const admitted: Array<[number, Row]> = [];
  // every id is found (404; a list's 400), the caller's (403) and free of dependants (409)
  // before any is staged
  if (options.bulk) requireBulkFound(ids, (id) => visibleStored(stored, id));
  for (const id of ids) {
    admitted.push([id, admitStored(stored, id, resource, options)]);
    stored.byId.delete(id); // named twice: the second is not found, as it would be one by one
    await hookParts.admit(id);
    await yieldWhenDue();
  }
  const explain = await hookParts.parts();
  for (const part of explain) part.write(batch);
  const changes: StagedChange[] = [];
  const orm = ctx.services.db.orm;
  if (admitted.length > 1) {
    // many: their links, then their rows as read, a few statements for all (decision 0184)
    const all = idsList(admitted.map(([id]) => id));
    for (const f of w.fields)
      if (w.shape.storage(f) === "links")
        batch.add(
          orm.run(
            sql`DELETE FROM ${ident(linkTableName(w.cot.id, f.id))} WHERE source_id IN (${all})`,
          ),
        );
    for (const s of deletesAsRead(ident(tableName(w.cot.id)), admitted)) batch.add(orm.run(s));
  }
  for (const [id, existing] of admitted) {
    await yieldWhenDue();
    if (admitted.length === 1) {
      for (const f of w.fields)
        if (w.shape.storage(f) === "links")
          batch.add(
            orm.run(
              sql`DELETE FROM ${ident(linkTableName(w.cot.id, f.id))} WHERE source_id = ${id}`,
            ),
          );
      batch.add(
        orm.run(
          sql`DELETE FROM ${ident(tableName(w.cot.id))} WHERE id = ${id} AND last_updated = ${existing.lastUpdated}`,
        ),
      );
      batch.add(orm.run(sql`INSERT INTO write_guard (ok) VALUES (changes() > 0)`));
    }
    changes.push({ action: "delete", id, prechange: stored.records.get(id)!, postchange: null });
  }
  await stageChanges(ctx, batch, resource, w.cot.objectTypeId!, await rules(), changes);
  w.indexLater(ctx);
  return runBatch(w, ctx, batch, "delete", stored.read, !!options.precondition, explain);
}

/**
 * `StagedWrites.updateAssumed` (decision 0139): one object's update with no read, its stored side
 * as the caller states it. The batch proves it: the type's shape, the row's stamp as assumed (the
 * UPDATE changes a row or fails the batch), the caller's change constraints on the row before and
 * after. Null when something must be read first (choices, references, tags, rules not cached),
 * "refused" when the batch refused the write: nothing is written either way, and the caller writes
 * the ordinary way, whose reads answer why.
 */
async function stagedUpdateAssumed(
  w: ObjectWriter,
  ctx: WriteContext,
  item: AssumedUpdate,
  options: StagedOptions,
): Promise<StagedWritten | "refused" | null> {
  if (options.check || options.admit) return null; // a wrapper's checks read the stored row
  const changeWhere = await restrictWhere(ctx, ctx.auth, "change", options.resource);
  // a hidden object is refused as a missing one (decision 0152): its view constraints guard too
  const viewWhere = await restrictWhere(ctx, ctx.auth, "view", options.resource);
  const phase = new ReadPhase();
  const lookups = await stageLookups(w, ctx, phase, [item.input], false);
  const rules = stageRules(ctx, phase, { appLabel: APP_LABEL, model: w.slug });
  if (phase.size) return null;
  // nothing to read: the request's guards lead the batch instead (decision 0107)
  await phase.run(ctx);
  const c = await convertAssumed(w, ctx, item.input, lookups());
  if (!c) return null;
  const batch = new WriteBatch();
  stageShapeGuard(w, ctx, batch);
  const row = sql`${w.table.id} IN (${item.id})`;
  if (viewWhere) stagePermission(w, ctx, batch, row, 1, viewWhere);
  if (changeWhere) stagePermission(w, ctx, batch, row, 1, changeWhere);
  const stamp = nextStamp(item.stamp);
  const assignments = Object.keys(c.values).map((col) => sql`${ident(col)} = ${c.values[col]}`);
  assignments.push(sql`"last_updated" = ${stamp}`);
  const orm = ctx.services.db.orm;
  batch.add(
    orm.run(
      sql`UPDATE ${ident(tableName(w.cot.id))} SET ${sql.join(assignments, sql`, `)} WHERE id = ${item.id} AND last_updated = ${item.stamp}`,
    ),
  );
  batch.add(orm.run(sql`INSERT INTO write_guard (ok) VALUES (changes() > 0)`));
  const change: StagedChange = {
    action: "update",
    id: item.id,
    prechange: item.before,
    postchange: item.after(stamp),
  };
  const texts = await stageChanges(
    ctx,
    batch,
    options.resource,
    w.cot.objectTypeId!,
    await rules(),
    [change],
  );
  if (changeWhere) stagePermission(w, ctx, batch, row, 1, changeWhere);
  if (!(await ranOrRefused(ctx, batch, { verboseName: verboseName(w.cot) }))) return "refused";
  w.indexLater(ctx);
  const json = texts()[0];
  return { id: item.id, record: json === undefined ? change.postchange! : JSON.parse(json), json };
}

/**
 * `StagedWrites.createAssumed` (decisions 0139, 0144): a deleted object put back under its id with
 * no read, the objects it names nested as the input (the change record) shows them. The batch
 * proves it: the type's shape, each named object still there (a guard statement; tags by their
 * foreign key), the id free (the primary key), unique values, the caller's add constraints. Null
 * where something must be read first (choices, links, a polymorphic reference, an owner, a named
 * type the caller's view is limited on, rules not cached); "refused" when the batch refused it.
 */
async function stagedCreateAssumed(
  w: ObjectWriter,
  ctx: WriteContext,
  item: { id: number; input: ApiRecord },
  options: StagedOptions,
): Promise<StagedWritten | "refused" | null> {
  if (options.check || options.admit || Object.hasOwn(w.preflightColumns, "choices")) return null;
  const named = await assumedTargets(w, ctx, item.input);
  if (!named) return null;
  const phase = new ReadPhase();
  const rules = stageRules(ctx, phase, { appLabel: APP_LABEL, model: w.slug });
  if (phase.size) return null;
  await phase.run(ctx); // nothing to read: the request's guards lead the batch (0107)
  const tagRows = [item.input.tags ?? []].flat().map((t) => ({ ...(t as TagRow), scope: null }));
  const shape = { v: w.cot.shapeVersion, slug: w.slug };
  const look = new PhaseLookups(w, shape, named.targets, null, tagRows);
  const addWhere = await restrictWhere(ctx, ctx.auth, "add", options.resource);
  const batch = new WriteBatch();
  stageShapeGuard(w, ctx, batch);
  for (const guard of named.guards) batch.add(guard);
  const fixed = { ...options, bulk: false, ids: [item.id] };
  const made = { look, rules: await rules(), addWhere };
  const staged = await stageCreates(w, ctx, batch, [item.input], fixed, made).catch((e) =>
    e instanceof ValidationError || e instanceof StaleModel ? null : Promise.reject(e),
  );
  if (!staged) return null;
  if (!(await ranOrRefused(ctx, batch, { verboseName: verboseName(w.cot) }))) return "refused";
  w.indexLater(ctx);
  return staged.written()[0] ?? null;
}

/**
 * The objects `input` names, as the phase would have found them: their nested forms as the input
 * shows them, each with a guard that it still exists. Null where that is not known without a read.
 */
async function assumedTargets(w: ObjectWriter, ctx: WriteContext, input: ApiRecord) {
  if (w.owned && input.owner != null) return null;
  // the caller's view of tags limited: the tags it names are looked up (decision 0153)
  if ([input.tags ?? []].flat().length && (await viewableTags(ctx, sql`t.id`))) return null;
  const targets = new Map<number, TargetFound>();
  const guards: ReturnType<Orm["run"]>[] = [];
  const orm = ctx.services.db.orm;
  for (const f of w.fields) {
    const kind = w.shape.storage(f);
    const v = input[f.name];
    if (kind === "column" || v === null || v === undefined) continue;
    if (kind === "links" || f.isPolymorphic || typeof (v as ApiRecord).id !== "number") return null;
    const typeId = f.relatedObjectTypeId!;
    const info = (await relatedInfos(ctx, [typeId])).get(typeId);
    const target = info?.resource;
    if (!target || !info.nestedSql) return null;
    // the caller's view of the type limited: which of them they may view is read (`stageTarget`)
    const user = ctx.auth.user;
    if (user && !user.isSuperuser && (await restrictWhere(ctx, ctx.auth, "view", target)))
      return null;
    const { object_type: _t, _content_type: _c, ...form } = v as ApiRecord;
    const id = form.id as number;
    const found = targets.get(typeId) ?? { forms: new Map(), visible: null };
    targets.set(typeId, found);
    found.forms.set(id, form);
    const idExpr = sql`${target.list.idExpr}`;
    guards.push(
      orm.run(
        sql`INSERT INTO write_guard (ok) SELECT EXISTS (SELECT 1 FROM ${target.table} WHERE ${idExpr} = ${id})`,
      ),
    );
  }
  return { targets, guards };
}

/**
 * `StagedWrites.deleteAssumed` (decision 0139): one object deleted with no read, as the caller
 * states it. The batch proves it: the type's shape, the caller's delete constraints on the row,
 * the delete hooks' guards, the row's stamp as assumed (the DELETE removes a row or fails the
 * batch). Null where something must be read first (a hook's, rules not cached).
 */
async function stagedDeleteAssumed(
  w: ObjectWriter,
  ctx: WriteContext,
  item: { id: number; stamp: string; before: ApiRecord },
  options: StagedOptions,
): Promise<"deleted" | "refused" | null> {
  if (options.check || options.admit) return null;
  const target = {
    appLabel: APP_LABEL,
    model: w.slug,
    id: item.id,
    objectTypeId: w.cot.objectTypeId ?? undefined,
  };
  const hooks = ctx.services.deleteHooks.map((h) => h.stageAssumed?.(ctx, target) ?? null);
  if (hooks.some((h) => !h)) return null;
  const deleteWhere = await restrictWhere(ctx, ctx.auth, "delete", options.resource);
  // a hidden object is refused as a missing one (decision 0152): its view constraints guard too
  const viewWhere = await restrictWhere(ctx, ctx.auth, "view", options.resource);
  const phase = new ReadPhase();
  const rules = stageRules(ctx, phase, { appLabel: APP_LABEL, model: w.slug });
  if (phase.size) return null;
  await phase.run(ctx); // nothing to read: the request's guards lead the batch (0107)
  const batch = new WriteBatch();
  stageShapeGuard(w, ctx, batch);
  const row = sql`${w.table.id} IN (${item.id})`;
  if (viewWhere) stagePermission(w, ctx, batch, row, 1, viewWhere);
  if (deleteWhere) stagePermission(w, ctx, batch, row, 1, deleteWhere);
  for (const hook of hooks) hook!.write(batch);
  const orm = ctx.services.db.orm;
  for (const f of w.fields)
    if (w.shape.storage(f) === "links")
      batch.add(
        orm.run(
          sql`DELETE FROM ${ident(linkTableName(w.cot.id, f.id))} WHERE source_id = ${item.id}`,
        ),
      );
  batch.add(
    orm.run(
      sql`DELETE FROM ${ident(tableName(w.cot.id))} WHERE id = ${item.id} AND last_updated = ${item.stamp}`,
    ),
  );
  batch.add(orm.run(sql`INSERT INTO write_guard (ok) VALUES (changes() > 0)`));
  const change: StagedChange = {
    action: "delete",
    id: item.id,
    prechange: item.before,
    postchange: null,
  };
  await stageChanges(ctx, batch, options.resource, w.cot.objectTypeId!, await rules(), [change]);
  if (!(await ranOrRefused(ctx, batch, { verboseName: verboseName(w.cot) }))) return "refused";
  w.indexLater(ctx);
  return "deleted";
}

/** The input's columns, converted with nothing read; null where that is not so (or refused). */
async function convertAssumed(
  w: ObjectWriter,
  ctx: WriteContext,
  input: ApiRecord,
  look: PhaseLookups,
): Promise<Converted | null> {
  if (Object.keys(input).some((k) => !w.shape.byName.has(k))) return null;
  for (const k of Object.keys(input)) {
    const kind = w.shape.storage(w.shape.byName.get(k)!);
    if (kind === "reference" || kind === "links") return null;
  }
  try {
    // a stand-in stored row: a partial update converts only the fields it is given
    const c = await w.convert(ctx, input, {}, true, undefined, look);
    return c.multi.size || c.tagIds ? null : c;
  } catch (e) {
    if (e instanceof ValidationError) return null;
    throw e;
  }
}

/** Who writes and why, for the transaction that explains a failed bulk write. */
const metaOf = ({ auth, requestId, baseUrl, params }: WriteContext) => ({
  auth,
  requestId,
  baseUrl,
  params,
});

/** Whether a failed staged bulk write is answered again through a transaction (see below). */
const explains = (ctx: WriteContext, options: StagedOptions, e: unknown) =>
  options.bulk && e instanceof ValidationError && offersTransaction(ctx.services.db);

const hasTagEdits = (input: ApiRecord) =>
  Object.hasOwn(input, "add_tags") || Object.hasOwn(input, "remove_tags");

/**
 * A bulk create that failed (an item invalid, or a key clash inside the batch) is answered as the
 * transaction path answers it where the database has transactions: every item's problems at its
 * index, clashes with earlier items of the same list included. D1 answers the staged errors.
 */
async function createOrExplain(
  w: ObjectWriter,
  ctx: WriteContext,
  inputs: ApiRecord[],
  options: StagedOptions,
) {
  try {
    return await stagedCreate(w, ctx, inputs, options);
  } catch (e) {
    if (!explains(ctx, options, e) || inputs.some(hasTagEdits)) throw e;
    const resource = options.resource;
    const written = await writeTransaction(ctx.services, metaOf(ctx), resource, (tx) =>
      createManyChecked(tx, resource, inputs),
    );
    return written.map((x) => ({ ...x, record: x.record! }));
  }
}

/** `createOrExplain` for a bulk update: each item's problems at its index, as item by item. */
async function updateOrExplain(
  w: ObjectWriter,
  ctx: WriteContext,
  items: StagedUpdate[],
  partial: boolean,
  options: StagedOptions,
): Promise<StagedWritten[]> {
  try {
    return await stagedUpdate(w, ctx, items, partial, options);
  } catch (e) {
    if (!explains(ctx, options, e)) throw e;
    const resource = options.resource;
    return writeTransaction(ctx.services, metaOf(ctx), resource, async (tx) => {
      const out: StagedWritten[] = [];
      await eachInput(items, true, async ({ id, input }) => {
        await ensureExists(tx, resource, id, "change");
        const current = hasTagEdits(input) ? ((await resource.load(tx, [id]))[0] ?? null) : null;
        const folded = await foldTagEditsLive(tx, resource, input, current);
        const written = await updateChecked(tx, resource, id, folded, partial);
        out.push({ ...written, record: written.record! });
      });
      return out;
    });
  }
}

/**
 * A write on a type without choice sets reads nothing of its shape before the batch, which
 * guards it (`stageLookups`). A refusal before the batch (a field unknown to a stale shape) is
 * checked before it leaves: a shape changed meanwhile starts the write again (`StaleModel`). A
 * refusal the batch proved the shape for (`shapeProven`) leaves as it is.
 */
async function shapeChecked<T>(w: ObjectWriter, ctx: WriteContext, write: () => Promise<T>) {
  try {
    return await write();
  } catch (e) {
    if (!(e instanceof ApiError) || e instanceof StaleModel || shapeProven.has(e)) throw e;
    if (Object.hasOwn(w.preflightColumns, "choices")) throw e;
    await checkShape(w, ctx.services.db.orm);
    throw e;
  }
}

/** The staged writes of one custom object type (`Resource.staged`). */
export function stagedObjectWrites(w: ObjectWriter): StagedWrites {
  return {
    create: (ctx, inputs, options) =>
      shapeChecked(w, ctx, () => createOrExplain(w, ctx, inputs, options)),
    update: (ctx, items, partial, options) =>
      shapeChecked(w, ctx, () => updateOrExplain(w, ctx, items, partial, options)),
    delete: (ctx, ids, options) => stagedDelete(w, ctx, ids, options),
    updateAssumed: (ctx, item, options) => stagedUpdateAssumed(w, ctx, item, options),
    createAssumed: (ctx, item, options) => stagedCreateAssumed(w, ctx, item, options),
    deleteAssumed: (ctx, item, options) => stagedDeleteAssumed(w, ctx, item, options),
    tagEdits: true,
  };
}
