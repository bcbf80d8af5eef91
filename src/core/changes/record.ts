/**
 * Change records (§7): one `object_changes` row per create/update/delete made through the
 * generic REST machinery, in the write's own transaction, where the event rules' deliveries
 * are written to the outbox beside it. See docs/decisions/0016-tasks-change-log.md, 0037-tasks-outbox.md.
 */
import { sql, type SQL } from "drizzle-orm";
import type { InValue } from "@libsql/client";
import { executePositional, Prebuilt, renderSql } from "../../db/driver-internals";
import { type Orm, weighStatement } from "../../db/client";
import { rowsPerStatement } from "../../db/d1-limits";
import { objectChanges } from "../../db/schema";
import { nowIso } from "../../db/schema/common";
import {
  recordEventDeliveries,
  matchDeliveries,
  stageDeliveries,
  type ChangeAction,
  type StagedRules,
} from "../events/dispatch";
import { newIdMarker, putNewId, withNewId, type WriteBatch } from "../rest/write-batch";
import { noteStaged } from "./preview";
import { type ChangeRow, mayRemember, NOT_REVERTABLE, rememberChanges } from "./seen";
import type { ApiRecord, Resource, WriteContext } from "../rest/resource";
import { readsCostRoundTrip } from "../../db/policy";
import { yieldWhenDue } from "../../turns";

export type { ChangeAction };

export const CHANGE_ACTIONS: ReadonlyArray<readonly [ChangeAction, string]> = [
  ["create", "Created"],
  ["update", "Updated"],
  ["delete", "Deleted"],
];

/** Keys that move on every save; an update that changes nothing else is not a change. */
const VOLATILE = new Set(["last_updated"]);

function sameData(a: ApiRecord, b: ApiRecord): boolean {
  const strip = (r: ApiRecord) =>
    JSON.stringify(Object.entries(r).filter(([k]) => !VOLATILE.has(k)));
  return strip(a) === strip(b);
}

/** The change record's insert, prepared once per ORM (it runs in every write). */
const insertChange = new Prebuilt<Array<{ id: number }>>((orm) =>
  orm
    .insert(objectChanges)
    .values({
      time: sql.placeholder("time"),
      userId: sql.placeholder("userId"),
      userName: sql.placeholder("userName"),
      requestId: sql.placeholder("requestId"),
      action: sql.placeholder("action"),
      changedObjectTypeId: sql.placeholder("changedObjectTypeId"),
      changedObjectId: sql.placeholder("changedObjectId"),
      objectRepr: sql.placeholder("objectRepr"),
      // bound as given (JSON text or NULL): the column's encoder would store null as 'null'
      prechangeData: sql`${sql.placeholder("prechangeData")}`,
      postchangeData: sql`${sql.placeholder("postchangeData")}`,
    })
    .returning({ id: objectChanges.id }),
);

/**
 * Writes the change record of `action` on `resource` object `id`, inside the write's
 * transaction. `prechange` is the record loaded before the change (null on create); the
 * postchange record is `loaded` when the write already read it, else it is loaded here. An
 * update that changed nothing writes nothing (as NetBox does). Returns the postchange record
 * (the response reuses it).
 */
export async function logChange(
  ctx: WriteContext,
  resource: Resource,
  action: ChangeAction,
  id: number,
  prechange: ApiRecord | null,
  loaded?: ApiRecord | null,
): Promise<ApiRecord | null> {
  const postchange =
    action === "delete"
      ? null
      : loaded !== undefined
        ? loaded
        : ((await resource.load(ctx, [id]))[0] ?? null);
  if (action === "update" && prechange && postchange && sameData(prechange, postchange))
    return postchange;
  const objectType = resource.objectTypeId
    ? { id: resource.objectTypeId }
    : await ctx.services.objectTypes.ensure(resource.appLabel, resource.model, ctx.db);
  const user = ctx.auth.user;
  const time = nowIso();
  const repr = objectRepr(resource, id, prechange, postchange);
  const who = {
    userId: user?.id ?? null,
    userName: user?.username ?? "",
    requestId: ctx.requestId,
  };
  const [row] = await insertChange.with(
    ctx.db,
    {
      time,
      ...who,
      action,
      changedObjectTypeId: objectType.id,
      changedObjectId: id,
      objectRepr: repr,
      prechangeData: prechange === null ? null : JSON.stringify(prechange),
      postchangeData: postchange === null ? null : JSON.stringify(postchange),
    },
    ctx.services.db.orm,
  );

  await recordEventDeliveries(ctx, [
    {
      changeId: row!.id,
      time,
      action,
      objectTypeId: objectType.id,
      appLabel: resource.appLabel,
      model: resource.model,
      objectId: id,
      prechange,
      postchange,
      ...who,
    },
  ]);
  return postchange;
}

/** A change record's `object_repr`: the object's display, else its kind and id. */
const objectRepr = (
  resource: Resource,
  id: number | string,
  prechange: ApiRecord | null,
  postchange: ApiRecord | null,
) => String((postchange ?? prechange)?.display ?? `${resource.verboseName} ${id}`).slice(0, 200);

/** One change of a batch for `logChanges`: the records are already loaded. */
export interface ChangeEntry {
  action: ChangeAction;
  id: number;
  prechange: ApiRecord | null;
  postchange: ApiRecord | null;
}

/**
 * The entries that change something (an update to the same data is none), an entry a step with
 * turns between when due: a schema apply's 5,000 records compared in one go held the event loop
 * 40–85 ms (decision 0210).
 */
async function changedOnly(entries: ChangeEntry[]): Promise<ChangeEntry[]> {
  const kept: ChangeEntry[] = [];
  for (const e of entries) {
    await yieldWhenDue();
    const same =
      e.action === "update" && e.prechange && e.postchange && sameData(e.prechange, e.postchange);
    if (!same) kept.push(e);
  }
  return kept;
}

/** Rows per statement of `logChanges` (ten bound values each). */
const CHANGE_BATCH = 250;
const changeStatements = new Map<number, string>();
/** The multi-row INSERT of `n` change records, with positional arguments. */
function insertChangesSql(n: number): string {
  let text = changeStatements.get(n);
  if (!text) {
    const row = `(${Array(10).fill("?").join(", ")})`;
    text = `INSERT INTO "object_changes" ("time", "user_id", "user_name", "request_id", "action", "changed_object_type_id", "changed_object_id", "object_repr", "prechange_data", "postchange_data") VALUES ${Array(n).fill(row).join(", ")}`;
    changeStatements.set(n, text);
  }
  return text;
}

/**
 * `logChange` for many objects of one resource at once (schema apply writes thousands): the
 * same rows and event deliveries, but one multi-row INSERT per `CHANGE_BATCH` records instead of
 * a statement each. Every postchange record must be loaded.
 */
export async function logChanges(
  ctx: WriteContext,
  resource: Resource,
  entries: ChangeEntry[],
): Promise<Map<ChangeEntry, string>> {
  /** Each written postchange record's JSON text, for a caller that answers with the same records. */
  const texts = new Map<ChangeEntry, string>();
  const kept = await changedOnly(entries);
  if (!kept.length) return texts;
  const objectType = resource.objectTypeId
    ? { id: resource.objectTypeId }
    : await ctx.services.objectTypes.ensure(resource.appLabel, resource.model, ctx.db);
  const user = ctx.auth.user;
  const time = nowIso();
  for (let i = 0; i < kept.length; i += CHANGE_BATCH) {
    const chunk = kept.slice(i, i + CHANGE_BATCH);
    // positional arguments, ten per record: no JSON text holding the records' JSON texts, and no
    // Drizzle template of 2,500 values (`executePositional`)
    const args: InValue[] = [];
    for (const e of chunk) {
      await yieldWhenDue();
      const p = e.postchange === null ? null : JSON.stringify(e.postchange);
      if (p !== null) texts.set(e, p);
      const repr = objectRepr(resource, e.id, e.prechange, e.postchange);
      args.push(
        time,
        user?.id ?? null,
        user?.username ?? "",
        ctx.requestId,
        e.action,
        objectType.id,
        e.id,
        repr,
        e.prechange === null ? null : JSON.stringify(e.prechange),
        p,
      );
    }
    const written = await executePositional(ctx.db, insertChangesSql(chunk.length), args);
    // One statement's AUTOINCREMENT ids follow its VALUES order (each row takes the largest id so
    // far plus one, under the write lock); the last is the statement's last insert rowid.
    if (written.rowsAffected !== chunk.length || written.lastInsertRowid === undefined)
      throw new Error(`change records: ${written.rowsAffected} of ${chunk.length} written`);
    const first = Number(written.lastInsertRowid) - chunk.length + 1;
    await recordEventDeliveries(
      ctx,
      chunk.map((e, k) => ({
        changeId: first + k,
        time,
        action: e.action,
        objectTypeId: objectType.id,
        appLabel: resource.appLabel,
        model: resource.model,
        objectId: e.id,
        prechange: e.prechange,
        postchange: e.postchange,
        userId: user?.id ?? null,
        userName: user?.username ?? "",
        requestId: ctx.requestId,
      })),
    );
  }
  return texts;
}

/**
 * One change of a write batch (decision 0071). `id` is SQL where SQLite allocates the object's id
 * in the same batch; the records then carry `newIdMarker()` where the id goes (`write-batch.ts`).
 */
export interface StagedChange {
  action: ChangeAction;
  id: number | SQL;
  prechange: ApiRecord | null;
  postchange: ApiRecord | null;
}

/**
 * A staged change record's most bound values: seven, and three for each of its three texts when
 * they carry a new id (`withNewId`). Rows per INSERT keep within D1's bound values (decision 0125).
 */
const CHANGE_VALUES = 16;
const STAGED_CHANGES = rowsPerStatement(CHANGE_VALUES);

const CHANGE_COLUMNS = sql.raw(
  `"time", "user_id", "user_name", "request_id", "action", "changed_object_type_id", "changed_object_id", "object_repr", "prechange_data", "postchange_data"`,
);

/** What a staged change record's INSERT returns: its id, postchange text and object's id. */
type ChangeRows = Array<{ id: number; p: string | null; o: number }>;
/** One change record's INSERT by its form, built once (decision 0104); bounded, cleared when full. */
const ONE_CHANGE = new Map<string, Prebuilt<ChangeRows>>();
const ONE_CHANGE_MAX = 1000;

/**
 * The INSERT of one change record, built once per form: the id a number, or SQL naming a new row
 * (`newRowId`, which binds nothing), and which of its texts are NULL. Null for another form.
 */
function oneChange(orm: Orm, e: StagedChange, repr: string | null): Prebuilt<ChangeRows> | null {
  const idSql = typeof e.id === "number" ? null : e.id;
  const rendered = idSql ? renderSql(orm, idSql) : null;
  if (idSql && (!rendered || rendered.params.length)) return null;
  const nulls = [repr, e.prechange, e.postchange].map((v) => (v === null ? 1 : 0)).join("");
  const key = `${rendered?.sql ?? "?"}\u0000${nulls}`;
  let found = ONE_CHANGE.get(key);
  if (found) return found;
  const p = (name: string) => sql.placeholder(name);
  const text = (name: string, value: unknown) =>
    value === null ? sql`NULL` : idSql ? withNewId(p(name), idSql) : sql`${p(name)}`;
  found = new Prebuilt<ChangeRows>((o) =>
    o.all(
      sql`INSERT INTO "object_changes" (${CHANGE_COLUMNS}) VALUES (${p("time")}, ${p("userId")}, ${p("userName")}, ${p("requestId")}, ${p("action")}, ${p("objectTypeId")}, ${idSql ?? p("id")}, ${text("repr", repr)}, ${text("pre", e.prechange)}, ${text("post", e.postchange)}) RETURNING "id" AS id, "postchange_data" AS p, "changed_object_id" AS o`,
    ),
  );
  if (ONE_CHANGE.size >= ONE_CHANGE_MAX) ONE_CHANGE.clear();
  ONE_CHANGE.set(key, found);
  return found;
}

const jsonOf = (r: ApiRecord | null) => (r === null ? null : JSON.stringify(r));

/** One INSERT of the change records `chunk`; a lone one's built once per form (`oneChange`). */
function changeStatement(
  ctx: WriteContext,
  resource: Resource,
  objectTypeId: number,
  time: string,
  chunk: StagedChange[],
) {
  const orm = ctx.services.db.orm;
  const user = ctx.auth.user;
  const reprOf = (e: StagedChange) =>
    objectRepr(
      resource,
      typeof e.id === "number" ? e.id : newIdMarker(),
      e.prechange,
      e.postchange,
    );
  const lone = chunk.length === 1 ? chunk[0]! : null;
  const loneRepr = lone ? reprOf(lone) : null;
  const prebuilt = lone ? oneChange(orm, lone, loneRepr) : null;
  if (lone && prebuilt)
    return prebuilt.with(orm, {
      time,
      userId: user?.id ?? null,
      userName: user?.username ?? "",
      requestId: ctx.requestId,
      action: lone.action,
      objectTypeId,
      id: lone.id,
      repr: loneRepr,
      pre: jsonOf(lone.prechange),
      post: jsonOf(lone.postchange),
    });
  const rows = chunk.map((e) => {
    const text = (value: string | null) =>
      value === null
        ? sql`NULL`
        : typeof e.id === "number"
          ? sql`${value}`
          : withNewId(value, e.id);
    return sql`(${time}, ${user?.id ?? null}, ${user?.username ?? ""}, ${ctx.requestId}, ${e.action}, ${objectTypeId}, ${e.id}, ${text(reprOf(e))}, ${text(jsonOf(e.prechange))}, ${text(jsonOf(e.postchange))})`;
  });
  return orm.all<ChangeRows[number]>(
    sql`INSERT INTO "object_changes" (${CHANGE_COLUMNS}) VALUES ${sql.join(rows, sql`, `)} RETURNING "id" AS id, "postchange_data" AS p, "changed_object_id" AS o`,
  );
}

/**
 * A lone change record a staged write committed, remembered as the change log's answers are
 * (decision 0133): its revert by this process knows its model before any read, its row read
 * again as the proof. Remote and D1 only (a local file's read costs no round trip); a model
 * whose changes are never reverted is left out, so it does not push revertable ones out.
 */
function rememberWritten(
  ctx: WriteContext,
  resource: Resource,
  w: { objectTypeId: number; time: string; change: StagedChange; row: ChangeRows[number] },
) {
  const label = `${resource.appLabel}.${resource.model}`;
  const post = w.row.p;
  if (!readsCostRoundTrip(ctx.services.db) || NOT_REVERTABLE.has(label)) return;
  if (!mayRemember(post?.length ?? 0)) return;
  const e = w.change;
  const user = ctx.auth.user;
  const id = Number(w.row.o);
  // texts written with the new row's id put in by SQL (`withNewId`) get it here the same way
  const mark = newIdMarker();
  const stored = (text: string) => (typeof e.id === "number" ? text : putNewId(text, id));
  const pre = jsonOf(e.prechange);
  if (!mayRemember((pre?.length ?? 0) + (post?.length ?? 0))) return;
  const row: ChangeRow = {
    id: Number(w.row.id),
    time: w.time,
    userId: user?.id ?? null,
    userName: user?.username ?? "",
    requestId: ctx.requestId,
    action: e.action,
    changedObjectTypeId: w.objectTypeId,
    changedObjectId: id,
    objectRepr: stored(
      objectRepr(resource, typeof e.id === "number" ? e.id : mark, e.prechange, e.postchange),
    ),
    prechangeData: pre === null ? null : JSON.parse(stored(pre)),
    postchangeData: post === null ? null : JSON.parse(post),
  };
  rememberChanges(ctx.services, [row]);
}

/** What `stageChanges` stages, as steps: between two, the event loop may take turns. */
type ChangeArgs = [
  ctx: WriteContext,
  batch: WriteBatch,
  resource: Resource,
  objectTypeId: number,
  rules: StagedRules,
  changes: StagedChange[],
];

/**
 * The change records of `changes` as statements of `batch`, with their event deliveries; an update
 * that changed nothing writes nothing (as `logChange`). The answer, read once the batch has run:
 * each written change's postchange JSON text (undefined where none was written), in order.
 * Thousands of changes give the event loop turns between statements (decision 0186).
 */
export async function stageChanges(...args: ChangeArgs): Promise<() => Array<string | undefined>> {
  const steps = changeSteps(...args);
  for (let step = steps.next(); ; step = steps.next()) {
    if (step.done) return step.value;
    await yieldWhenDue();
  }
}

/** `stageChanges` in one go, for a caller that cannot wait (a delete hook's `write`). */
export function stageChangesAtOnce(...args: ChangeArgs): () => Array<string | undefined> {
  const steps = changeSteps(...args);
  for (let step = steps.next(); ; step = steps.next()) if (step.done) return step.value;
}

function* changeSteps(
  ...[ctx, batch, resource, objectTypeId, rules, changes]: ChangeArgs
): Generator<void, () => Array<string | undefined>> {
  noteStaged(ctx, objectTypeId, changes); // what a dry run's write would answer (decision 0162)
  const kept: StagedChange[] = [];
  for (const e of changes) {
    yield;
    const unchanged =
      e.action === "update" && e.prechange && e.postchange && sameData(e.prechange, e.postchange);
    if (!unchanged) kept.push(e);
  }
  const texts = new Map<StagedChange, string>();
  const user = ctx.auth.user;
  const time = nowIso();
  const chunks = asDocuments(kept)
    ? yield* documentChunks(resource, kept)
    : Array.from({ length: Math.ceil(kept.length / STAGED_CHANGES) }, (_, k) =>
        kept.slice(k * STAGED_CHANGES, (k + 1) * STAGED_CHANGES),
      );
  for (const chunk of chunks) {
    yield;
    // a document's records cost what the statements of `STAGED_CHANGES` rows would (0197)
    const statement =
      "document" in chunk
        ? weighStatement(
            documentStatement(ctx, objectTypeId, time, chunk.document),
            chunk.changes.length / STAGED_CHANGES,
          )
        : changeStatement(ctx, resource, objectTypeId, time, chunk);
    const changes = "document" in chunk ? chunk.changes : chunk;
    batch.add(statement, (written) => {
      // RETURNING's order is not defined; one statement's ids follow its VALUES order
      const sorted = [...written].sort((a, b) => a.id - b.id);
      changes.forEach((e, k) => {
        const p = sorted[k]?.p;
        if (typeof p === "string") texts.set(e, p);
      });
      if (changes.length === 1 && sorted[0])
        rememberWritten(ctx, resource, { objectTypeId, time, change: changes[0]!, row: sorted[0] });
    });
  }
  // every change's deliveries, then a few statements for them all (decision 0197)
  const deliveries: string[] = [];
  for (const [k, e] of kept.entries()) {
    yield;
    const matched = yield* matchDeliveries(ctx, rules, {
      action: e.action,
      objectTypeId,
      appLabel: resource.appLabel,
      model: resource.model,
      prechange: e.prechange,
      postchange: e.postchange,
      userId: user?.id ?? null,
      requestId: ctx.requestId,
    });
    for (const [webhook, rule] of matched) deliveries.push(`[${k},${webhook},${rule}]`);
  }
  stageDeliveries(ctx, batch, rules, { model: resource.model, changes: kept.length }, deliveries);
  return () => changes.map((e) => texts.get(e));
}

/**
 * Change records written from bound JSON documents rather than bound values (decision 0198):
 * past a statement's few rows, each document carries as many records as fit in
 * `DOCUMENT_BYTES`, so a cascade or bulk of thousands is a few statements, not one per six.
 */
const DOCUMENT_BYTES = 1_000_000;

/** A lone surrogate (a paired one is one code point to a `u` pattern). */
const LONE = /\p{Cs}/gu;

/** Whether `kept` goes as documents: more than one statement's rows, every id known. */
const asDocuments = (kept: StagedChange[]) =>
  kept.length > STAGED_CHANGES && kept.every((e) => typeof e.id === "number");

/** A document of change records, `[id, action, repr, prechange, postchange]` each. */
interface DocumentChunk {
  document: string;
  changes: StagedChange[];
}

/**
 * `kept` as JSON documents of at most `DOCUMENT_BYTES` (a record past it goes alone; D1 binds a
 * value of at most 2 MB, and a record's row is held to that anyway). The records' own texts ride
 * as JSON strings, so SQLite stores exactly the text a bound value would have (the repr made
 * well-formed as binding it would: a lone surrogate becomes U+FFFD).
 */
function* documentChunks(
  resource: Resource,
  kept: StagedChange[],
): Generator<void, DocumentChunk[]> {
  const chunks: DocumentChunk[] = [];
  let items: string[] = [];
  let changes: StagedChange[] = [];
  let bytes = 0;
  const flush = () => {
    if (items.length) chunks.push({ document: `[${items.join(",")}]`, changes });
    [items, changes, bytes] = [[], [], 0];
  };
  for (const e of kept) {
    yield;
    const id = e.id as number;
    const repr = objectRepr(resource, id, e.prechange, e.postchange).replace(LONE, "\uFFFD");
    const item = JSON.stringify([id, e.action, repr, jsonOf(e.prechange), jsonOf(e.postchange)]);
    const size = Buffer.byteLength(item) + 1;
    if (items.length && bytes + size > DOCUMENT_BYTES) flush();
    items.push(item);
    changes.push(e);
    bytes += size;
  }
  flush();
  return chunks;
}

/** One INSERT of a document's change records, in its order (ids follow it, as VALUES' do). */
function documentStatement(
  ctx: WriteContext,
  objectTypeId: number,
  time: string,
  document: string,
) {
  const user = ctx.auth.user;
  const at = (k: number) => sql.raw(`json_extract(j.value, '$[${k}]')`);
  return ctx.services.db.orm.all<ChangeRows[number]>(
    sql`INSERT INTO "object_changes" (${CHANGE_COLUMNS}) SELECT ${time}, ${user?.id ?? null}, ${user?.username ?? ""}, ${ctx.requestId}, ${at(1)}, ${objectTypeId}, ${at(0)}, ${at(2)}, ${at(3)}, ${at(4)} FROM json_each(${document}) AS j ORDER BY j.key RETURNING "id" AS id, "postchange_data" AS p, "changed_object_id" AS o`,
  );
}
