/**
 * The §4 REST verbs written once: list/retrieve, single and bulk create/update/delete
 * (all-or-nothing), with permission checks, for any `Resource`.
 */
import { errorBody } from "../../api-error";
import { and, asc, sql, type SQL } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import type { Hono } from "hono";
import { requirePermission } from "../auth/permissions";
import {
  admitted,
  hideUnviewable,
  tagsProved,
  tagViewStatement,
  requireAfterWrite,
  requireObject,
  restrictWhere,
} from "../auth/restrict";
import { relationViewStatements } from "../auth/relations-judged";
import type { AuthState, Ctx, Guard, HonoEnv, JudgedInRead, Services } from "../context";
import { logChange, logChanges } from "../changes/record";
import {
  ApiError,
  keyedByListedIds,
  listedIdsOf,
  notFound,
  ValidationError,
  type FieldErrors,
} from "../errors";
import { readJson, readJsonBody, baseUrlOf, publicUrlOf } from "../http";
import { nulFieldErrors } from "../nul";
import { usedBy, viewerFilters } from "./filter-scope";
import {
  type FilterCheck,
  pageLinks,
  parseListQuery,
  projectionOfUrl,
  project,
  type ListQuery,
} from "./query";
import {
  enqueueBulkWrite,
  jobRecordStatements,
  type JobAnswer,
  wantsBackgroundBulk,
} from "./background";
import { etagOf, requireMatch, stampsFromIfMatch } from "./etag";
import { foldTagEdits } from "./tag-edits";
import type { ApiRecord, LoadPlan, ReadContext, Resource, WriteContext } from "./resource";
import { mapConstraintError } from "./constraints";
import {
  anchoredPageIds,
  countRows,
  keptPage,
  keptRecords,
  keptAnswer,
  type KeptPage,
  type PageRow,
} from "./page-anchors";
import { Slots } from "../slots";
import { budgetInRead, budgetOf, chargePage, chargeRows, pageBytesColumn } from "./budget";
import { listJsonWithTurns, loadInSlices } from "./list-slices";
import { aboutObject, listRefusal, notFoundInList, requireBulkFound } from "./bulk-found";
import {
  addGuard,
  foldsCredentials,
  freshRead,
  readFolded,
  settleBeforeWrite,
  writeFolded,
} from "../fresh-read";
import { offersTransaction, type Queries } from "../../db/client";
import { bulkCreateInTransaction } from "../../db/policy";
import { databaseStamp } from "../database-stamp";
import type { StagedOptions } from "../context";

/**
 * A request's read context. `inFreshRead`: built for a `freshRead`, which takes every guard its
 * statements' building registers (`ReadContext.guard`); elsewhere no guard could be settled.
 */
export function readContext(c: Ctx, inFreshRead = false): ReadContext {
  const services = c.get("services");
  return {
    db: services.db.reader,
    services,
    baseUrl: baseUrlOf(c),
    budget: budgetOf(c, services.config.maxResponseBytes),
    ...(inFreshRead ? { guard: (g: Guard) => addGuard(c, g), carriesForms: true as const } : {}),
  };
}

function parseId(raw: string | undefined): number {
  if (!raw || !/^\d{1,15}$/.test(raw)) throw notFound();
  return Number(raw);
}

/** Who writes and why, for a write outside an HTTP request (a background job). */
export type WriteMeta = Pick<WriteContext, "auth" | "requestId" | "baseUrl" | "params">;

/**
 * Runs `fn` in one write transaction and maps constraint failures to 400/409. Tasks passed
 * to `ctx.onCommit` (event rules) run once it has committed, never after a rollback.
 */
export async function writeTransaction<T>(
  services: Services,
  meta: WriteMeta,
  resource: Pick<Resource, "fieldForColumn" | "verboseName"> | null,
  fn: (ctx: WriteContext) => Promise<T>,
): Promise<T> {
  const afterCommit: Array<() => Promise<void>> = [];
  let result: T;
  try {
    const work = (tx: WriteContext["db"]) => {
      // A group commit may run the work again after a storage fault: one attempt's follow-ups only.
      afterCommit.length = 0;
      return fn({
        db: tx,
        services,
        ...meta,
        onCommit: (task) => afterCommit.push(task),
        scratch: new Slots(),
      });
    };
    // Local files: concurrent writes share one transaction, a savepoint each (decision 0053).
    result = await services.db.transaction(work);
  } catch (e) {
    throw mapConstraintError(e, resource) ?? e;
  }
  await runAfterCommit(services, meta.requestId, afterCommit);
  return result;
}

/**
 * Runs a staged write (decision 0071): `fn` reads in one round trip and writes in one atomic
 * batch itself, with no transaction held open around it. Tasks passed to `ctx.onCommit` run once
 * the batch has committed.
 */
export async function inStagedWrite<T>(
  c: Ctx,
  fn: (ctx: WriteContext) => Promise<T>,
  answer?: AnswerOf,
): Promise<T> {
  const services = c.get("services");
  const afterCommit: Array<() => Promise<void>> = [];
  const result = await fn({
    db: services.db.orm,
    services,
    baseUrl: baseUrlOf(c),
    auth: c.get("auth"),
    requestId: c.get("requestId"),
    params: new URL(c.req.url).searchParams,
    onCommit: (task) => afterCommit.push(task),
    scratch: new Slots(),
    readPhase: (queries) => readFolded(c, queries as Parameters<typeof readFolded>[1]),
    writeBatch: (items, explain) => writeJudging(c, items, explain, answer),
    guard: (g) => addGuard(c, g),
  });
  await runAfterCommit(services, c.get("requestId"), afterCommit);
  return result;
}

/** The objects a write answers: their resource, and their ids as SQL its batch can read. */
export interface AnswerOf {
  resource: Resource;
  ids: SQL;
  /** The ids in answer order where known before the batch (an update's); a create's are not. */
  known?: number[];
}

/** The ids of the `n` newest objects of `resource`: a create's, read inside its own batch. */
const newestIds = (resource: Resource, n: number): SQL =>
  sql`SELECT ${resource.list.idExpr} FROM ${resource.table} ORDER BY ${resource.list.idExpr} DESC LIMIT ${sql.raw(String(Math.max(1, Math.trunc(n))))}`;

/** Ids a write names (already numbers checked by `bulkId` / `parseId`), written out. */
const idList = (ids: number[]): SQL =>
  sql.raw(ids.filter((id) => Number.isSafeInteger(id)).join(", ") || "NULL");

/** The objects `ids` of `resource` as a write's answer names them (`inStagedWrite`). */
export const answering = (resource: Resource, ids: number[]): AnswerOf => ({
  resource,
  ids: idList(ids),
  known: ids,
});

/** What the hiding of a write's answer learnt in its batch (`writeJudging`), per request. */
const JUDGED_IN_WRITE = new WeakMap<Ctx, Slots>();

/**
 * A staged write's batch, and where a read costs a round trip, the constrained caller's view of
 * what its answer points at judged after the writes in the same batch (as a GET's read judges
 * it, decision 0166): the answer's hiding asks nothing after the commit (decision 0167).
 */
async function writeJudging(
  c: Ctx,
  items: readonly unknown[],
  explain: readonly unknown[] | undefined,
  answer: AnswerOf | undefined,
): Promise<unknown[]> {
  type Items = Parameters<typeof writeFolded>[1];
  const user = c.get("auth").user;
  const judging =
    answer && user && !user.isSuperuser && databaseStamp(c.get("services")) === null
      ? await judgedInRead(readContext(c), c.get("auth"), answer.resource, answer.ids)
      : [];
  const orm = c.get("services").db.orm;
  const job = jobRecordStatements(c, orm, jobAnswer(c, answer));
  const statements = [
    ...items,
    ...judging.map((j) => orm.all(j.statement)),
    ...(job?.statements ?? []),
  ] as Items;
  const results = await writeFolded(c, statements, explain as Parameters<typeof writeFolded>[2]);
  job?.done();
  if (!judging.length) return results;
  const scratch = JUDGED_IN_WRITE.get(c) ?? new Slots();
  JUDGED_IN_WRITE.set(c, scratch);
  proveJudged({ ...readContext(c), scratch }, judging, results.slice(items.length));
  return results.slice(0, items.length);
}

/** What a background job keeps of this write's answer (`jobRecordStatements`), by its method. */
function jobAnswer(c: Ctx, answer: AnswerOf | undefined): JobAnswer | null {
  const method = c.req.method;
  if (method === "DELETE") return answer ? null : { status: 204 };
  if (!answer) return null;
  if (method === "POST") return answer.known ? null : { status: 201, allocated: answer.ids };
  if (method === "PATCH" || method === "PUT")
    return answer.known ? { status: 200, known: answer.known } : null;
  return null;
}

/**
 * `ctx` with what the request's write batch judged for its answer, where it judged any (what
 * `ctx` proved before is then asked again: never hidden wrongly, at worst a query more).
 */
export function withWriteJudgement(c: Ctx, ctx: ReadContext): ReadContext {
  const scratch = JUDGED_IN_WRITE.get(c);
  return scratch ? { ...ctx, scratch } : ctx;
}

/** `readContext`, with what the request's write batch judged for its answer. */
const answerContext = (c: Ctx): ReadContext => withWriteJudgement(c, readContext(c));

/** `inStagedWrite` outside an HTTP request (a background job): no request's guards to fold. */
export async function stagedWrite<T>(
  services: Services,
  meta: WriteMeta,
  fn: (ctx: WriteContext) => Promise<T>,
): Promise<T> {
  const afterCommit: Array<() => Promise<void>> = [];
  const result = await fn({
    db: services.db.orm,
    services,
    ...meta,
    onCommit: (task) => afterCommit.push(task),
    scratch: new Slots(),
  });
  await runAfterCommit(services, meta.requestId, afterCommit);
  return result;
}

async function runAfterCommit(
  services: Services,
  requestId: string,
  tasks: Array<() => Promise<void>>,
) {
  for (const task of tasks) {
    // The change is committed; a failing follow-up is logged, never turned into an error answer.
    await task().catch((e) =>
      services.logger.error("after-commit task failed", {
        requestId,
        error: String((e as Error)?.message ?? e),
      }),
    );
  }
}

export async function inTransaction<T>(
  c: Ctx,
  resource: Pick<Resource, "fieldForColumn" | "verboseName"> | null,
  fn: (ctx: WriteContext) => Promise<T>,
): Promise<T> {
  await settleBeforeWrite(c);
  const meta = {
    baseUrl: baseUrlOf(c),
    auth: c.get("auth"),
    requestId: c.get("requestId"),
    params: new URL(c.req.url).searchParams,
  };
  return writeTransaction(c.get("services"), meta, resource, fn);
}

/** A written object: its id and its record as the change log saw it (reused for the answer). */
export interface Written {
  id: number;
  record: ApiRecord | null;
  /** `JSON.stringify(record)`, when the change record already made it. */
  json?: string;
}

/** Creates through the resource and writes the change record (same transaction). */
async function createRecord(
  ctx: WriteContext,
  resource: Resource,
  input: ApiRecord,
): Promise<Written> {
  if (resource.createLoaded) {
    const { id, record } = await resource.createLoaded(ctx, input);
    return { id, record: await logChange(ctx, resource, "create", id, null, record) };
  }
  const id = await resource.create(ctx, input);
  return { id, record: await logChange(ctx, resource, "create", id, null) };
}

/** Updates through the resource and writes the change record with both snapshots. */
async function updateRecord(
  ctx: WriteContext,
  resource: Resource,
  id: number,
  input: ApiRecord,
  partial: boolean,
): Promise<Written> {
  const [before] = await resource.load(ctx, [id]);
  await resource.update(ctx, id, input, partial);
  return { id, record: await logChange(ctx, resource, "update", id, before ?? null) };
}

/** `createRecord` for a caller: the new object must match their `add` constraints. */
export async function createChecked(
  ctx: WriteContext,
  resource: Resource,
  input: ApiRecord,
): Promise<Written> {
  const written = await createRecord(ctx, resource, input);
  await requireAfterWrite(ctx, ctx.auth, "add", resource, written.id);
  return written;
}

/**
 * A bulk create through `resource.createMany`: the same answers as `createChecked` per item under
 * `eachItem` (field errors per item, all or nothing, the caller's add constraints), with the
 * objects written in chunks and their change records in a few statements.
 */
export async function createManyChecked(
  ctx: WriteContext,
  resource: Resource,
  items: unknown[],
): Promise<Written[]> {
  if (!items.length)
    throw new ValidationError({ non_field_errors: ["Expected a non-empty list of objects."] });
  const errors: FieldErrors[] = items.map(() => ({}));
  let failed = false;
  const objects: ApiRecord[] = [];
  const at: number[] = [];
  for (const [i, item] of items.entries()) {
    try {
      objects.push(asObject(item, `item ${i}`));
      at.push(i);
    } catch (e) {
      errors[i] = (e as ValidationError).fields as FieldErrors;
      failed = true;
    }
  }
  const outcomes = objects.length ? await resource.createMany!(ctx, objects) : [];
  const written: Written[] = [];
  for (const [k, o] of outcomes.entries()) {
    if ("errors" in o) {
      errors[at[k]!] = o.errors;
      failed = true;
    } else written.push(o);
  }
  // The first written object outside the caller's add constraints is a 403, as item by item.
  const where = await restrictWhere(ctx, ctx.auth, "add", resource);
  if (where) {
    const ok = new Set<number>();
    for (let i = 0; i < written.length; i += 500)
      for (const id of await admitted(
        ctx,
        resource,
        written.slice(i, i + 500).map((w) => w.id),
        where,
      ))
        ok.add(id);
    const refused = written.find((w) => !ok.has(w.id));
    if (refused) await requireAfterWrite(ctx, ctx.auth, "add", resource, refused.id);
  }
  if (failed) throw new ValidationError(errors);
  const entries = written.map((w) => ({
    action: "create" as const,
    id: w.id,
    prechange: null,
    postchange: w.record,
  }));
  const texts = await logChanges(ctx, resource, entries);
  entries.forEach((e, i) => {
    written[i]!.json = texts.get(e);
  });
  return written;
}

/** `updateRecord` for a caller: the changed object must still match their `change` constraints. */
export async function updateChecked(
  ctx: WriteContext,
  resource: Resource,
  id: number,
  input: ApiRecord,
  partial: boolean,
): Promise<Written> {
  const written = await updateRecord(ctx, resource, id, input, partial);
  await requireAfterWrite(ctx, ctx.auth, "change", resource, id);
  return written;
}

/**
 * Creates one object of `resource` and answers its record as the caller may view it (related
 * objects they may not view reduced to their id, as every write answer): a staged write where the
 * resource stages creates (one read, one atomic batch judging the answer's hiding: no interactive
 * transaction, so D1 takes it), else in a transaction. `after` reads what the write left in its
 * scratch (a token's issued key).
 */
export async function createOne(
  c: Ctx,
  r: Resource,
  input: ApiRecord,
  after: (ctx: WriteContext) => void = () => {},
): Promise<ApiRecord | undefined> {
  const staged = r.staged?.create ? r.staged : undefined;
  const written: Written = staged
    ? await inStagedWrite(
        c,
        async (ctx) => {
          const [w] = await staged.create!(ctx, [input], { resource: r, bulk: false });
          after(ctx);
          return w!;
        },
        { resource: r, ids: newestIds(r, 1) },
      )
    : await inTransaction(c, r, async (ctx) => {
        const w = await createChecked(ctx, r, input);
        after(ctx);
        return w;
      });
  return (await hiddenAnswer(c, r, await writtenRecords(c, r, [written])))[0];
}

/** Written records as answered: related objects the caller may not view reduced to their id. */
const hiddenAnswer = (c: Ctx, resource: Resource, records: ApiRecord[]) =>
  hideUnviewable(answerContext(c), c.get("auth"), resource, records);

/** The records written, loading any the change log did not already hold. */
async function writtenRecords(
  c: Ctx,
  resource: Resource,
  written: Written[],
): Promise<ApiRecord[]> {
  const missing = written.filter((w) => !w.record).map((w) => w.id);
  const loaded = missing.length
    ? new Map((await resource.load(readContext(c), missing)).map((r) => [r.id as number, r]))
    : new Map();
  return written.map((w) => w.record ?? loaded.get(w.id)).filter((r): r is ApiRecord => !!r);
}

/** The list request's query, its filters over other objects held to the caller's view (0178). */
async function viewerListQuery(c: Ctx, ctx: ReadContext, url: URL, resource: Resource) {
  const list = await viewerFilters(ctx, c.get("auth"), resource.list, usedBy(url.searchParams));
  return parseListQuery(url, list);
}

async function listRecords(c: Ctx, resource: Resource) {
  const ctx = readContext(c);
  const url = publicUrlOf(c);
  const parsed = await viewerListQuery(c, ctx, url, resource);
  const restricted = await restrictWhere(ctx, c.get("auth"), "view", resource);
  const q = restricted
    ? { ...parsed, where: parsed.where ? and(parsed.where, restricted) : restricted }
    : parsed;
  if (q.start !== undefined) return cursorPage(c, resource, q, url);
  const checks = q.checks ?? [];
  // a local file reads in the process: its checks first; a remote read carries them (below)
  if (databaseStamp(ctx.services) !== null)
    for (const check of checks) check.judge(await ctx.db.all(check.statement));
  // A permission constraint is a condition the index does not know: then the rows are read.
  const indexed = restricted ? undefined : parsed.fromIndex;
  const countQuery =
    indexed?.count ?? sql`SELECT count(*) AS n FROM ${resource.table} WHERE ${q.where ?? sql`1`}`;
  // the response budget's figure for each row rides with its id: no read of its own
  const bytes = pageBytesColumn(ctx, resource);
  const idsQuery = () => pageIdsQuery(ctx, resource, q, indexed, bytes);
  let n: number;
  let page: PageRow[] | null = null;
  if (databaseStamp(ctx.services) === null) {
    // No stamp to keep counts and anchors by (a remote database): the count and the page's ids
    // in one read, one round trip.
    const [counted, rows, ...checked] = await ctx.services.db.read([
      ctx.db.all<{ n: number }>(countQuery),
      idsQuery(),
      ...checkQueries(ctx, checks),
    ]);
    judgeChecks(checks, checked);
    n = Number(counted[0]?.n ?? 0);
    page = rows;
  } else
    n = await countRows(
      ctx.services,
      ctx.db,
      resource.table,
      q.where,
      indexed?.count,
      indexed?.key,
    );
  let results: ApiRecord[] = [];
  if (n > q.offset) {
    // a search's page from the index is kept under the stamp too, by the search's own key, and
    // so are the records read for it (decisions 0112, 0116)
    let kept: KeptPage | null = null;
    if (!page && indexed && q.idOrder) {
      const key = `${indexed.key}\u0000${q.idOrder}\u0000${q.limit}\u0000${q.offset}\u0000${bytes ? 1 : 0}`;
      kept = await keptPage(ctx.services, key, idsQuery);
      page = kept.rows;
    }
    const anchored =
      !page && !indexed && q.idOrder
        ? await anchoredPageIds(ctx.services, ctx.db, {
            table: resource.table,
            idExpr: resource.list.idExpr,
            where: q.where,
            direction: q.idOrder,
            limit: q.limit,
            offset: q.offset,
            bytes,
          })
        : null;
    page ??= anchored ?? (await idsQuery());
    const ids = page.map((r) => Number(r.id));
    if (bytes) chargePage(ctx, page);
    else await chargeRows(ctx, resource, ids);
    const loaded = kept
      ? await keptRecords(ctx.services, kept, ctx.baseUrl, () => resource.load(ctx, ids))
      : await loadInSlices(ctx, resource, page);
    // what the caller may not view is hidden on every request, kept records or not
    results = await hideUnviewable(ctx, c.get("auth"), resource, loaded as ApiRecord[]);
    // nothing hidden, no projection: the kept answer's bytes, made once per head (0116, 0132)
    const body =
      kept && project(results, q.projection, resource.briefFields) === results
        ? keptAnswer(ctx.services, kept, results, listHead(url, n, q))
        : null;
    if (body !== null) return c.body(body, 200, JSON_TYPE);
  }
  const projected = project(results, q.projection, resource.briefFields);
  return c.body(await listJsonWithTurns(listHead(url, n, q), projected), 200, JSON_TYPE);
}

const JSON_TYPE = { "Content-Type": "application/json" };

/** A list's body up to its results' JSON: with them and `}`, the bytes `c.json` gives. */
function listHead(url: URL, n: number, q: ListQuery): string {
  const head = JSON.stringify({ count: n, ...pageLinks(url, n, q.limit, q.offset) });
  return `${head.slice(0, -1)},"results":`;
}

/**
 * The statement picking a list page's ids (from the search index when the query has one), with
 * each row's `bytes` for the response budget when `bytes` is given.
 */
function pageIdsQuery(
  ctx: ReadContext,
  resource: Resource,
  q: ListQuery,
  indexed: ListQuery["fromIndex"],
  bytes: SQL | null,
) {
  const idExpr = resource.list.idExpr;
  if (indexed && q.idOrder) {
    const ids = indexed.pageIds(q.idOrder, q.limit, q.offset);
    if (!bytes) return ctx.db.all<PageRow>(ids);
    // the index's ids in their order, each with what its row's values take
    return ctx.db.all<PageRow>(
      sql`SELECT p.id AS id, (SELECT ${bytes} FROM ${resource.table} WHERE ${idExpr} = p.id) AS bytes FROM (${ids}) p ORDER BY p.id ${sql.raw(q.idOrder)}`,
    );
  }
  return ctx.db
    .select({ id: sql<number>`${idExpr}`, ...(bytes ? { bytes: sql<number>`${bytes}` } : {}) })
    .from(resource.table)
    .where(q.where)
    .orderBy(...q.orderBy)
    .limit(q.limit)
    .offset(q.offset);
}

/** A resource as a route resolves it (custom objects by slug, per request). */
type Resolve = (c: Ctx) => Promise<Resource> | Resource;

/**
 * Whether a GET is one read: where there is no change stamp (a remote database, D1, memory),
 * every round trip counts, and the resource can state its load as statements.
 */
async function inOneRead(c: Ctx, resolve: Resolve): Promise<boolean> {
  if (databaseStamp(c.get("services")) !== null) return false;
  return !!(await resolve(c)).loadPlan;
}

/**
 * A list in one read (decision 0085): the request's guards (token, type shape), the count, the
 * page's ids, their size against the response budget, and the rows with what rides on them.
 */
async function listInOneRead(c: Ctx, resolve: Resolve) {
  const ctx = readContext(c, true);
  const url = publicUrlOf(c);
  let step!: {
    resource: Resource;
    q: ReturnType<typeof parseListQuery>;
    plan: LoadPlan;
    charge: ((answer: unknown) => void) | null;
    judged: JudgedInRead[];
  };
  const answers = await freshRead(c, async () => {
    const resource = await resolve(c);
    await requirePermission(c, "view", resource);
    const parsed = await viewerListQuery(c, ctx, url, resource);
    const restricted = await restrictWhere(ctx, c.get("auth"), "view", resource);
    const q = restricted
      ? { ...parsed, where: parsed.where ? and(parsed.where, restricted) : restricted }
      : parsed;
    const page = pageOf(ctx, resource, q);
    const budget = budgetInRead(ctx, [{ resource, ids: page.getSQL() }]);
    const ids = budget
      ? sql`SELECT * FROM (${page.getSQL()}) WHERE ${budget.holds}`
      : page.getSQL();
    const plan = resource.loadPlan!(ctx, ids);
    const judged = await judgedInRead(ctx, c.get("auth"), resource, page.getSQL());
    step = { resource, q, plan, charge: budget?.charge ?? null, judged };
    // a cursor page (`?start=`) counts nothing
    const count =
      q.start === undefined
        ? ctx.db.all<{ n: number }>(
            sql`SELECT count(*) AS n FROM ${resource.table} WHERE ${q.where ?? sql`1`}`,
          )
        : ctx.db.all<{ n: null }>(sql`SELECT NULL AS n`);
    return [
      count,
      page,
      ...(budget ? [budget.statement] : []),
      ...plan.statements,
      ...judged.map((j) => ctx.db.all(j.statement)),
      ...checkQueries(ctx, q.checks ?? []),
    ] as const;
  });
  ctx.guard = undefined; // the read has been sent: no later guard could ride in it
  const { resource, q, plan, charge } = step;
  const checks = q.checks ?? [];
  judgeChecks(checks, answers.slice(answers.length - checks.length));
  const judged = step.judged;
  const judgedEnd = answers.length - checks.length;
  const ids = (answers[1] as { id: number }[]).map((r) => Number(r.id));
  charge?.(answers[2]);
  const planned = answers.slice(charge ? 3 : 2, judgedEnd - judged.length);
  proveJudged(ctx, judged, answers.slice(judgedEnd - judged.length, judgedEnd));
  const loaded = await plan.finish(planned as unknown[], ids);
  const results = project(
    await hideUnviewable(ctx, c.get("auth"), resource, loaded),
    q.projection,
    resource.briefFields,
  );
  if (q.start !== undefined) return c.json({ ...cursorLinks(url, ids, q.limit), results });
  const n = Number((answers[0] as { n: number }[])[0]?.n ?? 0);
  return c.json({ count: n, ...pageLinks(url, n, q.limit, q.offset), results });
}

/**
 * What the hiding after a one-read GET or list would ask, judged in the read instead: a
 * constrained caller's view of the objects' tags (decision 0153), the resource's own
 * (`hideNestedPlan`: a job's object) and its related objects (`relationViewStatements`, decisions
 * 0165 and 0166). Each rides last; `proveJudged` hands the answers on.
 */
export async function judgedInRead(
  ctx: ReadContext,
  auth: AuthState,
  resource: Resource,
  ids: SQL | number,
): Promise<JudgedInRead[]> {
  const out: JudgedInRead[] = [];
  const tagView = resource.tagged ? await tagViewStatement(ctx, auth, ids) : null;
  if (tagView) out.push({ statement: tagView, proved: tagsProved });
  const nested = await resource.hideNestedPlan?.(ctx, auth, ids);
  if (nested) out.push(...[nested].flat());
  out.push(...(await relationViewStatements(ctx, auth, resource, ids)));
  return out;
}

export function proveJudged(ctx: ReadContext, judged: JudgedInRead[], answers: unknown[]) {
  for (const [i, j] of judged.entries()) j.proved(ctx, answers[i]);
}

/** The statements of a list's filter checks (`FilterSpec.known`), to ride in its read. */
function checkQueries(ctx: ReadContext, checks: FilterCheck[]) {
  return checks.map((check) => ctx.db.all(check.statement));
}

/** Each check judges its answer: a filter value naming nothing is a 400 (before any page). */
function judgeChecks(checks: FilterCheck[], answers: readonly unknown[]): void {
  for (const [i, check] of checks.entries()) check.judge(answers[i]);
}

/** A list's page of ids: by its order and offset, or a cursor page's ids ≥ `start` in id order. */
function pageOf(ctx: ReadContext, resource: Resource, q: ListQuery) {
  const idExpr = resource.list.idExpr;
  const select = ctx.db.select({ id: sql<number>`${idExpr}` }).from(resource.table);
  if (q.start === undefined)
    return select
      .where(q.where)
      .orderBy(...q.orderBy)
      .limit(q.limit)
      .offset(q.offset);
  const from = sql`${idExpr} >= ${q.start}`;
  return select
    .where(q.where ? and(q.where, from) : from)
    .orderBy(asc(idExpr as SQLiteColumn))
    .limit(q.limit);
}

/** A cursor page's links: `count` null, `next` from after its last id when it is full. */
function cursorLinks(url: URL, ids: number[], limit: number) {
  let next: string | null = null;
  if (ids.length === limit) {
    const u = new URL(url);
    u.searchParams.set("start", String(ids[ids.length - 1]! + 1));
    u.searchParams.set("limit", String(limit));
    next = u.toString();
  }
  return { count: null, next, previous: null };
}

/**
 * NetBox 4.6's cursor pagination (`?start=<id>`): ids ≥ start in id order, `count` null, `next`
 * starting after the page's last id, no `previous`. One indexed range read, no count.
 */
async function cursorPage(c: Ctx, resource: Resource, q: ListQuery, url: URL) {
  const ctx = readContext(c);
  const idExpr = resource.list.idExpr;
  const from = sql`${idExpr} >= ${q.start}`;
  const checks = q.checks ?? [];
  const [rows, ...checked] = await ctx.services.db.read([
    ctx.db
      .select({ id: sql<number>`${idExpr}` })
      .from(resource.table)
      .where(q.where ? and(q.where, from) : from)
      .orderBy(asc(idExpr as SQLiteColumn))
      .limit(q.limit),
    ...checkQueries(ctx, checks),
  ]);
  judgeChecks(checks, checked);
  const ids = rows.map((r) => Number(r.id));
  await chargeRows(ctx, resource, ids);
  const results = await hideUnviewable(ctx, c.get("auth"), resource, await resource.load(ctx, ids));
  return c.json({
    ...cursorLinks(url, ids, q.limit),
    results: project(results, q.projection, resource.briefFields),
  });
}

/**
 * The object `id` as `resource.load` answers it (nothing hidden: the caller's own record), in one
 * read with the request's guards where a read costs a round trip and the resource states its load
 * as statements (decision 0166).
 */
export async function loadOneWithGuards(c: Ctx, resource: Resource, id: number) {
  const ctx = readContext(c, true);
  if (!resource.loadPlan || databaseStamp(c.get("services")) !== null)
    return (await resource.load(ctx, [id]))[0];
  let plan!: LoadPlan;
  const answers = await freshRead(c, () => {
    plan = resource.loadPlan!(ctx, id);
    return plan.statements as unknown as Queries;
  });
  ctx.guard = undefined;
  return (await plan.finish([...answers], [id]))[0];
}

/** One object in one read (decision 0085): the guards, and the row (if the caller may view it). */
async function getInOneRead(c: Ctx, resolve: Resolve, id: number) {
  const ctx = readContext(c, true);
  let step!: { resource: Resource; plan: LoadPlan; judged: JudgedInRead[] };
  const answers = await freshRead(c, async () => {
    const resource = await resolve(c);
    await requirePermission(c, "view", resource);
    const restricted = await restrictWhere(ctx, c.get("auth"), "view", resource);
    // an object outside the caller's view constraints is not found, as `requireObject` says
    const ids = restricted
      ? sql`SELECT ${resource.list.idExpr} FROM ${resource.table} WHERE ${resource.list.idExpr} = ${id} AND (${restricted})`
      : id;
    const plan = resource.loadPlan!(ctx, ids);
    const judged = await judgedInRead(ctx, c.get("auth"), resource, id);
    step = { resource, plan, judged };
    const statements = [...plan.statements, ...judged.map((j) => ctx.db.all(j.statement))];
    return statements as unknown as Queries;
  });
  ctx.guard = undefined; // the read has been sent: no later guard could ride in it
  const kept = answers.length - step.judged.length;
  proveJudged(ctx, step.judged, answers.slice(kept));
  const planned = answers.slice(0, kept);
  const [record] = await step.plan.finish(planned, [id]);
  if (!record) throw notFound();
  // hidden with the load's context: what its read proved is known to the hiding (decision 0143)
  return withEtag(c, record, (await projected(c, step.resource, [record], ctx))[0]);
}

async function loadOne(c: Ctx, resource: Resource, id: number): Promise<ApiRecord> {
  const ctx = readContext(c);
  await requireObject(ctx, c.get("auth"), "view", resource, id);
  const [record] = await resource.load(ctx, [id]);
  if (!record) throw notFound();
  return record;
}

/** Records as answered: related objects the caller may not view hidden, then projected. */
async function projected(
  c: Ctx,
  resource: Resource,
  records: ApiRecord[],
  ctx: ReadContext = answerContext(c),
) {
  const visible = await hideUnviewable(ctx, c.get("auth"), resource, records);
  return project(visible, projectionOfUrl(c.req.url), resource.briefFields);
}

/** `add_tags` or `remove_tags` in a write (NetBox 4.6): folded into `tags` by `foldTagEdits`. */
const hasTagEdits = (item: unknown) =>
  !!item &&
  typeof item === "object" &&
  (Object.hasOwn(item, "add_tags") || Object.hasOwn(item, "remove_tags"));

/** Answers `body` with the ETag of `record` (the stored object, before any projection). */
function withEtag(c: Ctx, record: ApiRecord | undefined, body: unknown, status: 200 | 201 = 200) {
  const tag = record ? etagOf(record) : null;
  if (tag) c.header("ETag", tag);
  return c.json(body as object, status);
}

const isObject = (value: unknown): value is ApiRecord =>
  !!value && typeof value === "object" && !Array.isArray(value);

const asObject = (value: unknown, where: string): ApiRecord => {
  if (!isObject(value)) {
    throw new ValidationError({ non_field_errors: [`${where}: expected a JSON object.`] });
  }
  return value as ApiRecord;
};

/** Runs `step` for each bulk item, collecting validation errors per item (DRF list shape). */
export async function eachItem<T>(
  items: unknown[],
  step: (item: ApiRecord) => Promise<T>,
): Promise<T[]> {
  if (!items.length)
    throw new ValidationError({ non_field_errors: ["Expected a non-empty list of objects."] });
  return gatherItemErrors(items, (item, i) => step(asObject(item, `item ${i}`)));
}

/**
 * Runs `step` for each item in order; an item's field errors are kept in its place (`{}` for the
 * others) and thrown together at the end, anything else at once.
 */
export async function gatherItemErrors<I, T>(
  items: I[],
  step: (item: I, index: number) => Promise<T>,
): Promise<T[]> {
  const out: T[] = [];
  const errors: FieldErrors[] = [];
  let failed = false;
  for (const [i, item] of items.entries()) {
    try {
      out.push(await step(item, i));
      errors.push({});
    } catch (e) {
      if (!(e instanceof ValidationError) || Array.isArray(e.fields)) throw e;
      failed = true;
      errors.push(e.fields);
    }
  }
  if (failed) throw new ValidationError(errors);
  return out;
}

/**
 * `If-Match` (NetBox 4.6) as a staged write's precondition on the stamp it reads: 412 when the
 * object's ETag differs; a write that loses a race after the check answers 412 as well.
 */
function ifMatch(c: Ctx): StagedOptions["precondition"] {
  const expected = stampsFromIfMatch(c.req.header("if-match"));
  if (expected === null) return undefined;
  return (stamp) => requireMatch(expected, { last_updated: stamp });
}

/** A bulk create's items, each a JSON object (else the list's errors per item). */
function bulkObjects(body: unknown[]): ApiRecord[] {
  const errors: FieldErrors[] = body.map(() => ({}));
  const objects = body.flatMap((raw, i) => {
    try {
      return [asObject(raw, `item ${i}`)];
    } catch (e) {
      errors[i] = (e as ValidationError).fields as FieldErrors;
      return [];
    }
  });
  if (objects.length < body.length) throw new ValidationError(errors);
  return objects;
}

/**
 * A bulk update's items: each a JSON object with an id (the list's field errors per item, as
 * `eachItem` gives them); the id is not an input field.
 */
function bulkItems(body: unknown[]): Array<{ id: number; input: ApiRecord }> {
  const errors: FieldErrors[] = [];
  const items: Array<{ id: number; input: ApiRecord }> = [];
  for (const [i, raw] of body.entries()) {
    try {
      const item = asObject(raw, `item ${i}`);
      const { id: _drop, ...input } = item;
      items.push({ id: bulkId(item), input });
      errors.push({});
    } catch (e) {
      errors.push((e as ValidationError).fields as FieldErrors);
    }
  }
  if (items.length < body.length) throw new ValidationError(errors);
  return items;
}

/**
 * The ids a bulk update or delete lists (those that are ids); one listed twice is NetBox 4.7's
 * 400 before anything is read (decision 0200).
 */
function listedIds(body: unknown[]): number[] {
  const ids = body.flatMap((item) => {
    const id = isObject(item) ? item.id : undefined;
    return typeof id === "number" && Number.isInteger(id) && id >= 1 ? [id] : [];
  });
  requireBulkFound(ids, () => true);
  return ids;
}

function bulkId(item: ApiRecord): number {
  const id = item.id;
  if (typeof id !== "number" || !Number.isInteger(id) || id < 1)
    throw new ValidationError({ id: ["A valid object id is required."] });
  return id;
}

export async function ensureExists(
  ctx: WriteContext,
  resource: Resource,
  id: number,
  action?: "change" | "delete",
) {
  const [row] = await ctx.db
    .select({ id: sql<number>`${resource.list.idExpr}` })
    .from(resource.table)
    .where(sql`${resource.list.idExpr} = ${id}`)
    .limit(1);
  const missing = `No ${resource.verboseName} with id ${id}.`;
  if (!row) throw aboutObject(notFound(missing), resource, id);
  // Permission constraints: an object the caller may not view is "not found"; one they may
  // view but not change or delete is a 403.
  if (action)
    await requireObject(ctx, ctx.auth, action, resource, id, missing).catch((e: unknown) => {
      throw e instanceof ApiError && e.statusCode === 404 ? aboutObject(e, resource, id) : e;
    });
}

/**
 * Deletes one object after its delete hooks (which may cascade); every deletion is logged.
 * `checkAs: "delete"` (the routes) also holds the caller to their delete constraints; cascades
 * pass nothing, as NetBox's do.
 */
export async function deleteWithHooks(
  ctx: WriteContext,
  resource: Resource,
  id: number,
  checkAs?: "delete",
) {
  await ensureExists(ctx, resource, id, checkAs);
  const [before] = await resource.load(ctx, [id]);
  for (const hook of ctx.services.deleteHooks)
    await hook(ctx, { appLabel: resource.appLabel, model: resource.model, id });
  await resource.delete(ctx, id);
  await logChange(ctx, resource, "delete", id, before ?? null);
}

/**
 * Mounts list and detail routes for a resource at `path` (relative to `app`).
 * `resolve` lets a route pick its resource per request (custom objects by slug).
 */
export function mountResource(
  app: Hono<HonoEnv>,
  path: string,
  resolve: Resolve,
  options: { readOnly?: boolean } = {},
) {
  const base = path.replace(/\/$/, "");
  const list = base;
  const detail = `${base}/:id{[^/]+}`;
  app.get(list, listRoute(resolve));
  app.get(detail, detailRoute(resolve));
  if (options.readOnly) {
    app.all(list, methodNotAllowed(resolve, "GET, HEAD"));
    app.all(detail, methodNotAllowed(resolve, "GET, HEAD"));
    return;
  }
  app.post(list, foldsCredentials(createRoute(resolve)));
  for (const method of ["put", "patch"] as const) {
    const partial = method === "patch";
    app[method](list, foldsCredentials(bulkUpdateRoute(resolve, partial)));
    app[method](detail, foldsCredentials(updateRoute(resolve, partial)));
  }
  app.delete(list, foldsCredentials(bulkDeleteRoute(resolve)));
  app.delete(detail, foldsCredentials(deleteRoute(resolve)));
  app.all(list, methodNotAllowed(resolve, "GET, POST, PUT, PATCH, DELETE, HEAD"));
  app.all(detail, methodNotAllowed(resolve, "GET, PUT, PATCH, DELETE, HEAD"));
}

/** A 405 naming the `allowed` methods, once the resource is known. */
function methodNotAllowed(resolve: Resolve, allowed: string) {
  return async (c: Ctx) => {
    await resolve(c); // an unknown custom object slug is a 404 before it is a 405
    throw new ApiError(
      405,
      errorBody("method_not_allowed", `Method "${c.req.method}" not allowed.`),
      { Allow: allowed },
    );
  };
}

/** GET of the list. */
function listRoute(resolve: Resolve) {
  return async (c: Ctx) => {
    if (await inOneRead(c, resolve)) return listInOneRead(c, resolve);
    const r = await resolve(c);
    await requirePermission(c, "view", r);
    return listRecords(c, r);
  };
}

/** GET of one object. */
function detailRoute(resolve: Resolve) {
  return async (c: Ctx) => {
    const id = parseId(c.req.param("id"));
    if (await inOneRead(c, resolve)) return getInOneRead(c, resolve, id);
    const r = await resolve(c);
    await requirePermission(c, "view", r);
    const record = await loadOne(c, r, id);
    return withEtag(c, record, (await projected(c, r, [record]))[0]);
  };
}

/**
 * The JSON body of a create or update: 400 when a value would be stored with a NUL (the driver
 * keeps a text only up to it; decision 0124), keyed by field and, in a list, by item. A field
 * stored as JSON text keeps an escaped NUL and is left alone.
 */
async function readWrittenJson(c: Ctx, r: Resource): Promise<unknown> {
  const { body, mayHoldNul } = await readJsonBody(c);
  if (!mayHoldNul) return body;
  const json = new Set(r.describe?.filter((f) => f.kind === "json").map((f) => f.name));
  if (Array.isArray(body)) {
    const errors = body.map((item) => nulFieldErrors(item, json));
    // an update's items are named by their ids, a create's by their places (NetBox 4.7)
    const updates = c.req.method === "PUT" || c.req.method === "PATCH";
    if (errors.some((e) => Object.keys(e).length))
      throw new ValidationError(errors, updates ? listedIdsOf(body) : undefined);
  } else {
    const errors = nulFieldErrors(body, json);
    if (Object.keys(errors).length) throw new ValidationError(errors);
  }
  return body;
}

/** POST of one object or a list of them. */
function createRoute(resolve: Resolve) {
  return async (c: Ctx) => {
    const r = await resolve(c);
    await requirePermission(c, "add", r);
    const body = await readWrittenJson(c, r);
    if (Array.isArray(body) && wantsBackgroundBulk(c)) return enqueueBulkWrite(c, body);
    // add_tags / remove_tags: a staged writer folds them itself, else a transaction (tag-edits.ts)
    const tagEdits = Array.isArray(body) ? body.some(hasTagEdits) : hasTagEdits(body);
    const staged = r.staged?.create && (!tagEdits || r.staged.tagEdits) ? r.staged : undefined;
    if (Array.isArray(body)) return createList(c, r, body, staged, tagEdits);
    const input = asObject(body, "body");
    const written: Written = staged
      ? (
          await inStagedWrite(
            c,
            (ctx) => staged.create!(ctx, [input], { resource: r, bulk: false }),
            { resource: r, ids: newestIds(r, 1) },
          )
        )[0]!
      : await inTransaction(c, r, async (ctx) =>
          createChecked(ctx, r, await foldTagEdits(ctx, r, input, null)),
        );
    const [record] = await writtenRecords(c, r, [written]);
    return withEtag(c, record, (await projected(c, r, record ? [record] : []))[0], 201);
  };
}

/** A bulk POST: staged when the resource can, else in one transaction. */
async function createList(
  c: Ctx,
  r: Resource,
  body: unknown[],
  staged: Resource["staged"],
  tagEdits: boolean,
) {
  // NetBox writes nothing and answers the empty list (decision 0200)
  if (!body.length) return c.json([], 201);
  const db = c.get("services").db;
  // A list with items that are not objects answers every item's problems where a transaction
  // can check the others (a resource with `createMany`); a staged create checks none past them.
  if (staged && r.createMany && !body.every(isObject) && offersTransaction(db)) staged = undefined;
  // Where a batch saves no round trip, the transaction's chunked path is the faster and leaner
  // one (decision 0114: a local file); elsewhere, one batch.
  if (staged && r.createMany && !tagEdits && bulkCreateInTransaction(db)) staged = undefined;
  const written: Written[] = staged
    ? await inStagedWrite(
        c,
        (ctx) => staged.create!(ctx, bulkObjects(body), { resource: r, bulk: true }),
        { resource: r, ids: newestIds(r, body.length) },
      )
    : await inTransaction(c, r, async (ctx) =>
        r.createMany && !tagEdits
          ? createManyChecked(ctx, r, body)
          : eachItem(body, async (item) =>
              createChecked(ctx, r, await foldTagEdits(ctx, r, item, null)),
            ),
      );
  const records = await writtenRecords(c, r, written);
  const answer = await projected(c, r, records);
  // The answer is the records the change log just wrote as JSON (nothing hidden, no
  // projection): their texts are joined rather than a 1,000-object list encoded again.
  if (
    answer === records &&
    written.length === records.length &&
    written.every((w, i) => w.json !== undefined && w.record === records[i])
  ) {
    return c.body(`[${written.map((w) => w.json).join(",")}]`, 201, {
      "Content-Type": "application/json",
    });
  }
  return c.json(answer, 201);
}

/** PUT / PATCH of a list of objects with their ids. */
function bulkUpdateRoute(resolve: Resolve, partial: boolean) {
  return async (c: Ctx) => {
    const r = await resolve(c);
    await requirePermission(c, "change", r);
    const body = await readWrittenJson(c, r);
    if (!Array.isArray(body))
      throw new ValidationError({
        non_field_errors: ["Bulk update expects a list of objects with an id."],
      });
    if (wantsBackgroundBulk(c)) return enqueueBulkWrite(c, body);
    // an empty list: nothing to change, as NetBox answers it (decision 0200)
    if (!body.length) return c.json([]);
    const staged =
      r.staged?.update && (r.staged.tagEdits || !body.some(hasTagEdits)) ? r.staged : undefined;
    if (staged) {
      const items = bulkItems(body);
      const ids = items.map((i) => i.id);
      requireBulkFound(ids, () => true); // an id listed twice: NetBox 4.7's 400, nothing read
      const written = await inStagedWrite(
        c,
        (ctx) => staged.update!(ctx, items, partial, { resource: r, bulk: true }),
        answering(r, ids),
      )
        .catch(listRefusal(ids))
        .catch(keyedByListedIds(body));
      return c.json(await projected(c, r, await writtenRecords(c, r, written)));
    }
    const ids = listedIds(body);
    const written = await inTransaction(c, r, (ctx) =>
      eachItem(body, async (item) => {
        const id = bulkId(item);
        // a list's write that finds no object `id` (missing, or outside the caller's view)
        // answers NetBox 4.7's 400 naming it; this path reads no id ahead (0184): the first met
        await ensureExists(ctx, r, id, "change").catch(notFoundInList(r, ids, id, "changed"));
        const { id: _drop, ...rest } = item;
        const input = hasTagEdits(rest)
          ? await foldTagEdits(ctx, r, rest, (await r.load(ctx, [id]))[0] ?? null)
          : rest;
        return updateChecked(ctx, r, id, input, partial);
      }),
    ).catch(keyedByListedIds(body));
    return c.json(await projected(c, r, await writtenRecords(c, r, written)));
  };
}

/** PUT / PATCH of one object (`If-Match` honoured). */
function updateRoute(resolve: Resolve, partial: boolean) {
  return async (c: Ctx) => {
    const r = await resolve(c);
    await requirePermission(c, "change", r);
    const id = parseId(c.req.param("id"));
    const body = asObject(await readWrittenJson(c, r), "body");
    const staged =
      r.staged?.update && (r.staged.tagEdits || !hasTagEdits(body)) ? r.staged : undefined;
    if (staged) {
      const precondition = ifMatch(c);
      const [written] = await inStagedWrite(
        c,
        (ctx) =>
          staged.update!(ctx, [{ id, input: body }], partial, {
            resource: r,
            bulk: false,
            precondition,
          }),
        answering(r, [id]),
      );
      // the new ETag (NetBox 4.6): the next If-Match of this client names this version
      const tag = etagOf(written!.record);
      if (tag) c.header("ETag", tag);
      return c.json((await projected(c, r, await writtenRecords(c, r, [written!])))[0]);
    }
    const expected = stampsFromIfMatch(c.req.header("if-match"));
    const written = await inTransaction(c, r, async (ctx) => {
      await ensureExists(ctx, r, id, "change");
      // The ETag is compared with the row as this transaction reads it, before the write.
      const current = expected !== null || hasTagEdits(body) ? await r.load(ctx, [id]) : [];
      if (expected !== null) requireMatch(expected, current[0] ?? {});
      const input = await foldTagEdits(ctx, r, body, current[0] ?? null);
      return updateChecked(ctx, r, id, input, partial);
    });
    const [record] = await writtenRecords(c, r, [written]);
    return withEtag(c, record, (await projected(c, r, record ? [record] : []))[0]);
  };
}

/** DELETE of a list of objects with their ids. */
function bulkDeleteRoute(resolve: Resolve) {
  return async (c: Ctx) => {
    const r = await resolve(c);
    await requirePermission(c, "delete", r);
    const body = await readJson(c);
    if (!Array.isArray(body))
      throw new ValidationError({
        non_field_errors: ["Bulk delete expects a list of objects with an id."],
      });
    if (wantsBackgroundBulk(c)) return enqueueBulkWrite(c, body);
    if (!body.length) return c.body(null, 204); // nothing to delete (NetBox; decision 0200)
    const staged = r.staged;
    if (staged) {
      const ids = bulkItems(body).map((i) => i.id);
      requireBulkFound(ids, () => true); // an id listed twice: NetBox 4.7's 400, nothing read
      const outcome = await inStagedWrite(c, (ctx) =>
        staged.delete(ctx, ids, { resource: r, bulk: true }),
      ).catch(listRefusal(ids));
      if (outcome === undefined) return c.body(null, 204);
    }
    const ids = listedIds(body);
    await inTransaction(c, r, (ctx) =>
      eachItem(body, async (item) => {
        const id = bulkId(item);
        // as a bulk update's; a hook's 404 about another object names this id in its own words
        await deleteWithHooks(ctx, r, id, "delete").catch(notFoundInList(r, ids, id, "deleted"));
      }),
    );
    return c.body(null, 204);
  };
}

/** DELETE of one object (`If-Match` honoured). */
function deleteRoute(resolve: Resolve) {
  return async (c: Ctx) => {
    const r = await resolve(c);
    await requirePermission(c, "delete", r);
    const id = parseId(c.req.param("id"));
    const staged = r.staged;
    if (staged) {
      const precondition = ifMatch(c);
      const outcome = await inStagedWrite(c, (ctx) =>
        staged.delete(ctx, [id], { resource: r, bulk: false, precondition }),
      );
      // a cascade deletes other objects (each with its hooks): that runs in a transaction
      if (outcome === undefined) return c.body(null, 204);
    }
    const expected = stampsFromIfMatch(c.req.header("if-match"));
    await inTransaction(c, r, async (ctx) => {
      if (expected !== null) {
        await ensureExists(ctx, r, id, "delete");
        requireMatch(expected, (await r.load(ctx, [id]))[0] ?? {});
      }
      await deleteWithHooks(ctx, r, id, "delete");
    });
    return c.body(null, 204);
  };
}
