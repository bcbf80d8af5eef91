/**
 * Deep pages without the deep skip. `ORDER BY id LIMIT 50 OFFSET n` makes SQLite step over n
 * rows, so a page at offset 900,000 costs as much as reading 900,000 ids — and clients page
 * through whole tables that way (pynetbox's `all()` and `filter()` walk `offset`). For lists
 * ordered by id alone, this keeps the id at every `STEP`th position of the list's result (an
 * "anchor"), per list query: table, WHERE with its parameters, direction. A page then seeks to
 * the nearest anchor by primary key and skips fewer than `STEP` rows.
 *
 * Anchors are facts about one state of the database, so an entry holds the WAL change stamp it
 * was built under (`core/database-stamp.ts`) and is used only while the stamp is the same: any commit
 * from any connection or process drops it. A stamp that changes while anchors are being built
 * keeps them from being stored. Anchors are built lazily, only as far as a requested page needs,
 * by one recursive statement that hops `STEP` rows at a time (decision 0059).
 *
 * Where there is no stamp (`:memory:`, remote libSQL, a header being written) lists run as they
 * always did.
 */
import { getTableName, sql, type SQL, type SQLWrapper } from "drizzle-orm";
import type { SQLiteTable } from "drizzle-orm/sqlite-core";
import type { Executor } from "../../db/client";
import { renderSql } from "../../db/driver-internals";
import type { Services } from "../context";
import { approxBytes } from "../approx-bytes";
import { databaseStamp } from "../database-stamp";
import { slotKey } from "../slots";

/** Rows between two anchors: a page skips fewer than this many rows. */
export const STEP = 1024;
/** List queries with anchors kept per app (least recently used dropped first). */
const MAX_ENTRIES = 64;
/** Anchors one request may add (a million rows' worth), so building stays bounded. */
const MAX_NEW_ANCHORS = 1024;

interface Entry {
  stamp: string;
  /** ids at positions 0, STEP, 2·STEP, … of the list's result. */
  ids: number[];
  /** No row lies STEP positions beyond the last anchor. */
  complete: boolean;
  /** The extension under way, which other requests for this entry wait for. */
  building?: Promise<void>;
  /** The database changed while it was being extended: it describes no state; dropped. */
  stale?: boolean;
}

interface State {
  entries: Map<string, Entry>;
  /** A list query's row count (the same query asked again, page after page, counts once). */
  counts: Map<string, { stamp: string; n: number }>;
  /** Pages of ids by a caller's key (an index's search, decision 0112), with their records (0116). */
  pages: Map<string, KeptPage>;
  /** Records the kept pages hold in all (bounded by MAX_KEPT_RECORDS). */
  records: number;
  /** What they take, about (bounded by MAX_KEPT_BYTES). */
  bytes: number;
}

/** A page of ids kept under the stamp it was read under, and the records read for it since. */
export interface KeptPage {
  stamp: string;
  rows: PageRow[];
  /** The page's records as `load` gave them, frozen, for one base URL (their `url`s name it). */
  records?: {
    baseUrl: string;
    list: readonly Record<string, unknown>[];
    bytes: number;
    /** The last answer that gave the list as it is, as the bytes it sent (`keptAnswer`). */
    answer?: KeptAnswer;
  };
}

/** An answer's body as bytes: `head` (its count and links), then the records' JSON, then `}`. */
interface KeptAnswer {
  head: string;
  /** Where the records' JSON starts in `body`. */
  at: number;
  body: Uint8Array<ArrayBuffer>;
}

/**
 * Records kept pages hold at most (a 20-field record is about 1 KB): past it, the least recently
 * used pages drop theirs (their ids stay).
 */
const MAX_KEPT_RECORDS = 2000;
/**
 * And the bytes they take at most (`approxBytes`): records of long texts are megabytes a page, and
 * 64 such pages would hold a response budget's worth each. A page above a quarter of it is not kept.
 */
const MAX_KEPT_BYTES = 16 * 1024 * 1024;

const ANCHORS = slotKey<State>("page-anchors");

export interface PageRequest {
  table: SQLiteTable;
  idExpr: SQLWrapper;
  where: SQL | undefined;
  direction: "asc" | "desc";
  limit: number;
  offset: number;
  /** A column to answer with each id, `AS bytes` (the response budget's `pageBytesColumn`). */
  bytes?: SQL | null;
}

/** A page's id, with its `bytes` when the request asked for them. */
export interface PageRow {
  id: number;
  bytes?: number;
}

/**
 * The ids of one page of an id-ordered list, seeking from an anchor; null when anchors cannot be
 * used (a shallow page, no change stamp, or the database changed while they were built) and the
 * caller should run its plain LIMIT/OFFSET query.
 */
export async function anchoredPageIds(
  services: Services,
  db: Executor,
  page: PageRequest,
): Promise<PageRow[] | null> {
  if (page.offset < STEP) return null;
  const stamp = databaseStamp(services);
  if (!stamp) return null;
  const state = stateOf(services);
  const key = `${keyOf(services, page.table, page.where)}\u0000${page.direction}`;
  let entry = state.entries.get(key);
  state.entries.delete(key); // re-inserted as the most recently used
  if (!entry || entry.stamp !== stamp) entry = { stamp, ids: [], complete: false };
  state.entries.set(key, entry);
  bound(state.entries);
  const slot = Math.floor(page.offset / STEP);
  // One extension of an entry at a time: concurrent requests wait for it instead of hopping from
  // the same last anchor (which would append the same anchors twice) or repeating its work.
  for (let round = 0; slot >= entry.ids.length && !entry.complete; round++) {
    if (round === 4) return null;
    if (!entry.building) {
      const e = entry;
      e.building = extend(services, db, page, e, slot).finally(() => (e.building = undefined));
    }
    await entry.building;
    if (entry.stale) return null;
  }
  if (slot >= entry.ids.length) return entry.complete ? [] : null;
  const anchor = entry.ids[slot]!;
  const skip = page.offset - slot * STEP;
  const id = sql`${page.idExpr}`;
  const bytes = page.bytes ? sql`, ${page.bytes} AS bytes` : sql``;
  return (await db.all(
    sql`SELECT ${id} AS id${bytes} FROM ${page.table} WHERE ${page.where ? sql`(${page.where})` : sql`1`} AND ${id} ${page.direction === "asc" ? sql`>=` : sql`<=`} ${anchor}
        ORDER BY ${id} ${dir(page)} LIMIT ${page.limit} OFFSET ${skip}`,
  )) as PageRow[];
}

/** Adds anchors to `entry` up to `slot` (at most MAX_NEW_ANCHORS at once); marks it stale if the database moved meanwhile. */
async function extend(
  services: Services,
  db: Executor,
  page: PageRequest,
  entry: Entry,
  slot: number,
): Promise<void> {
  const want = Math.min(slot + 1 - entry.ids.length, MAX_NEW_ANCHORS);
  const more = await hop(db, page, entry.ids.at(-1) ?? null, want);
  if (databaseStamp(services) !== entry.stamp) {
    entry.stale = true; // changed under the hops: they may describe neither state
    entry.ids = [];
    return;
  }
  entry.complete = more.length < want;
  entry.ids.push(...more);
}

/**
 * The number of rows a list query matches. Under a change stamp the count is kept with it, like
 * anchors: a client paging through a filtered list (or `?q=`) pays for the count once, not once
 * per page, until anything commits.
 */
export async function countRows(
  services: Services,
  db: Executor,
  table: SQLiteTable,
  where: SQL | undefined,
  /** A statement that counts the same rows another way (one row, column `n`): an index's. */
  counted?: SQL,
  /** What the query is as text, when the caller has it (an index's search): nothing is rendered. */
  known?: string,
): Promise<number> {
  const run = async () =>
    Number(
      (
        (await db.all(
          counted ?? sql`SELECT count(*) AS n FROM ${table} WHERE ${where ?? sql`1`}`,
        )) as {
          n: number;
        }[]
      )[0]!.n,
    );
  const stamp = databaseStamp(services);
  if (!stamp) return run();
  const state = stateOf(services);
  const key = known === undefined ? keyOf(services, table, where) : `\u0001${known}`;
  const hit = state.counts.get(key);
  state.counts.delete(key);
  if (hit?.stamp === stamp) {
    state.counts.set(key, hit);
    return hit.n;
  }
  const n = await run();
  if (databaseStamp(services) === stamp) {
    state.counts.set(key, { stamp, n });
    bound(state.counts);
  }
  return n;
}

/**
 * One page of ids, kept under the change stamp like a count: a search asked again (a search box,
 * several users, a client re-reading its first page) reads its page once per commit (decision
 * 0112). `key` must name the query, its page and whether rows carry their `bytes`; `read` runs
 * when nothing is kept, and what it gives is kept only if no commit landed while it ran.
 */
export async function keptPage(
  services: Services,
  key: string,
  read: () => Promise<PageRow[]>,
): Promise<KeptPage> {
  const stamp = databaseStamp(services);
  if (!stamp) return { stamp: "", rows: await read() };
  const state = stateOf(services);
  const hit = state.pages.get(key);
  state.pages.delete(key);
  if (hit?.stamp === stamp) {
    state.pages.set(key, hit);
    return hit;
  }
  if (hit) giveUpRecords(state, hit);
  const rows = await read();
  const page: KeptPage = { stamp, rows };
  if (databaseStamp(services) === stamp) {
    state.pages.set(key, page);
    while (state.pages.size > MAX_ENTRIES) dropOldestPage(state);
  }
  return page;
}

/**
 * The records of a kept page (decision 0116): those kept with it while the stamp it was read
 * under still holds, else `load`'s, kept with it only if no commit landed before they were read
 * to the end. They are what `load` gives, before the caller's permissions hide what it may not
 * view (that runs on every request), so they are shared frozen. A page kept nowhere (no stamp,
 * or dropped meanwhile) just loads.
 */
export async function keptRecords<R extends Record<string, unknown>>(
  services: Services,
  page: KeptPage,
  baseUrl: string,
  load: () => Promise<R[]>,
): Promise<readonly R[]> {
  const state = stateOf(services);
  const kept = page.records;
  if (kept?.baseUrl === baseUrl && databaseStamp(services) === page.stamp)
    return kept.list as readonly R[];
  const list = await load();
  if (
    !page.stamp ||
    databaseStamp(services) !== page.stamp ||
    ![...state.pages.values()].includes(page) ||
    list.length > MAX_KEPT_RECORDS
  )
    return list;
  const bytes = approxBytes(list, MAX_KEPT_BYTES / 4);
  if (bytes > MAX_KEPT_BYTES / 4) return list;
  // (another request may have kept this page's records meanwhile: theirs are replaced)
  giveUpRecords(state, page);
  page.records = { baseUrl, list: deepFreeze(list), bytes };
  state.records += list.length;
  state.bytes += bytes;
  // the least recently used pages give up their records first (this one keeps its own)
  for (const other of state.pages.values()) {
    if (state.records <= MAX_KEPT_RECORDS && state.bytes <= MAX_KEPT_BYTES) break;
    if (other !== page) giveUpRecords(state, other);
  }
  return list;
}

/**
 * The whole answer's body, as bytes, when `list` is the very array `keptRecords` gave for `page`
 * (records kept under the current stamp); null otherwise (records read afresh, or another array:
 * hidden references, a projection). `head` is the body up to the records (`{"count":…,"results":`).
 * The bytes are made once per head and kept beside the records, counted in their bytes: answering
 * the same search again sends them as they are, where a text built per answer would be a copy of
 * the page (50 records, ~50 KB) for the collector to find on every request (decision 0132).
 */
export function keptAnswer(
  services: Services,
  page: KeptPage,
  list: readonly Record<string, unknown>[],
  head: string,
): Uint8Array<ArrayBuffer> | null {
  const kept = page.records;
  if (!kept || kept.list !== list || databaseStamp(services) !== page.stamp) return null;
  const last = kept.answer;
  if (last?.head === head) return last.body;
  // the records' JSON from the last answer's bytes when there is one: encoded once per page
  const json = last
    ? last.body.subarray(last.at, last.body.length - 1)
    : UTF8.encode(JSON.stringify(list));
  const start = UTF8.encode(head);
  const body = new Uint8Array(start.length + json.length + 1);
  body.set(start);
  body.set(json, start.length);
  body[body.length - 1] = CLOSE_BRACE;
  const grown = body.length - (last?.body.length ?? 0);
  kept.answer = { head, at: start.length, body };
  kept.bytes += grown;
  const state = stateOf(services);
  state.bytes += grown;
  for (const other of state.pages.values()) {
    if (state.bytes <= MAX_KEPT_BYTES) break;
    if (other !== page) giveUpRecords(state, other);
  }
  return body;
}

const UTF8 = new TextEncoder();
const CLOSE_BRACE = 0x7d;

function giveUpRecords(state: State, page: KeptPage) {
  if (!page.records) return;
  state.records -= page.records.list.length;
  state.bytes -= page.records.bytes;
  page.records = undefined;
}

/** Drops the least recently used kept page, with its records. */
function dropOldestPage(state: State) {
  const [key, oldest] = state.pages.entries().next().value!;
  giveUpRecords(state, oldest);
  state.pages.delete(key);
}

/** Freezes a value and everything it holds (records shared by requests: none may change one for all). */
export function deepFreeze<T>(value: T): T {
  if (value && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

const stateOf = (services: Services) =>
  services.state.ensure(ANCHORS, () => ({
    entries: new Map(),
    counts: new Map(),
    pages: new Map(),
    records: 0,
    bytes: 0,
  }));

/** Drops the least recently used entries beyond the bound (a Map iterates in insertion order). */
function bound(map: Map<string, unknown>) {
  while (map.size > MAX_ENTRIES) map.delete(map.keys().next().value!);
}

const dir = (page: PageRequest) => (page.direction === "asc" ? sql`ASC` : sql`DESC`);

/**
 * Up to `count` anchors after `from` (or from the first row when null), in one statement: each
 * step of the recursion takes the id STEP rows past the previous one.
 */
async function hop(
  db: Executor,
  page: PageRequest,
  from: number | null,
  count: number,
): Promise<number[]> {
  const id = sql`${page.idExpr}`;
  const where = page.where ? sql`(${page.where})` : sql`1`; // parenthesised: more conditions follow
  const past = page.direction === "asc" ? sql`>` : sql`<`;
  const first =
    from === null
      ? sql`SELECT (SELECT ${id} FROM ${page.table} WHERE ${where} ORDER BY ${id} ${dir(page)} LIMIT 1), 0`
      : sql`SELECT (SELECT ${id} FROM ${page.table} WHERE ${where} AND ${id} ${past} ${from} ORDER BY ${id} ${dir(page)} LIMIT 1 OFFSET ${STEP - 1}), 0`;
  const rows = (await db.all(sql`WITH RECURSIVE anchor(id, n) AS (
      ${first}
      UNION ALL
      SELECT (SELECT ${id} FROM ${page.table} WHERE ${where} AND ${id} ${past} anchor.id ORDER BY ${id} ${dir(page)} LIMIT 1 OFFSET ${STEP - 1}), n + 1
      FROM anchor WHERE anchor.id IS NOT NULL AND n + 1 < ${count}
    ) SELECT id FROM anchor WHERE id IS NOT NULL`)) as { id: number }[];
  return rows.map((r) => Number(r.id));
}

/** A list query's identity: its table, and its WHERE's SQL text and parameters (rendered only if there is one). */
function keyOf(services: Services, table: SQLiteTable, where: SQL | undefined): string {
  if (!where) return getTableName(table);
  const q = renderSql(services.db.orm, sql`${table} ${where}`);
  if (!q) return `${getTableName(table)}\u0000${Math.random()}`; // unknown: never shared
  return `${q.sql}\u0000${JSON.stringify(q.params, (_k, v) => (typeof v === "bigint" ? `${v}n` : v))}`;
}
