/**
 * A write as one read and one atomic batch (decision 0071): what the read phase asks for, the
 * statements of the write phase with what to do with their results, and how an id SQLite has not
 * allocated yet is named in the statements and records that follow its INSERT.
 */
import { type Placeholder, sql, type SQL } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import type { Queries } from "../../db/client";
import type { WriteContext } from "../context";

/** The reads of a read phase: one `db.read` (one round trip) whatever their number. */
export class ReadPhase {
  readonly #queries: BatchItem<"sqlite">[] = [];
  readonly #results: unknown[] = [];
  readonly #building: Promise<void>[] = [];
  #failed: { error: unknown } | undefined;

  /** Reads added so far. */
  get size(): number {
    return this.#queries.length;
  }

  /** Adds a query; the returned getter answers its rows once `run` has resolved. */
  add<T>(query: BatchItem<"sqlite"> & PromiseLike<T>): () => T {
    const at = this.#queries.push(query) - 1;
    return () => this.#results[at] as T;
  }

  /**
   * Adds a query still being built (one whose condition is the caller's view, built from their
   * constraints): its place is kept, and `run` waits for it. A failed build fails `run`. The
   * query comes wrapped: a promise resolved with a query itself would run it (it is thenable).
   */
  addBuilt<T>(built: Promise<{ query: BatchItem<"sqlite"> & PromiseLike<T> }>): () => T {
    const at = this.#queries.push(undefined as unknown as BatchItem<"sqlite">) - 1;
    this.#building.push(
      built.then(
        ({ query }) => {
          this.#queries[at] = query;
        },
        (e: unknown) => {
          this.#failed ??= { error: e };
        },
      ),
    );
    return () => this.#results[at] as T;
  }

  /** One read; with the request's guards when `ctx` folds them (`WriteContext.readPhase`). */
  async run(ctx: Pick<WriteContext, "services" | "readPhase">): Promise<void> {
    await Promise.all(this.#building);
    if (this.#failed) throw this.#failed.error;
    if (ctx.readPhase) {
      this.#results.push(...(await ctx.readPhase(this.#queries)));
      return;
    }
    if (!this.#queries.length) return;
    const db = ctx.services.db;
    const results = (await db.read(this.#queries as unknown as Queries)) as unknown as unknown[];
    this.#results.push(...results);
  }
}

/** The statements of one atomic write, and what reads their results after the commit. */
export class WriteBatch {
  readonly #items: BatchItem<"sqlite">[] = [];
  readonly #after: Array<(results: unknown[]) => void> = [];
  #explain: BatchItem<"sqlite">[] = [];

  get size(): number {
    return this.#items.length;
  }

  /**
   * Reads that tell why the batch failed on a guard, sent with the read that settles the
   * request's guards after such a failure (one round trip, not two): `explainedFailure(e)` has
   * their answers then.
   */
  explainWith(reads: BatchItem<"sqlite">[]): void {
    this.#explain = reads;
  }

  /** Adds a statement; `then` receives its result (RETURNING rows) after the commit. */
  add<T>(item: BatchItem<"sqlite"> & PromiseLike<T>, then?: (result: T) => void): void {
    const at = this.#items.push(item) - 1;
    if (then) this.#after.push((results) => then(results[at] as T));
  }

  /** One `db.write`: one round trip, all or nothing; with the request's guards when `ctx` carries them (`WriteContext.writeBatch`). */
  async run(ctx: Pick<WriteContext, "services" | "writeBatch">): Promise<void> {
    if (!this.#items.length) return;
    const results = ctx.writeBatch
      ? await ctx.writeBatch(this.#items, this.#explain)
      : ((await ctx.services.db.write(this.#items as unknown as Queries)) as unknown as unknown[]);
    for (const after of this.#after) after(results);
  }
}

/**
 * The id of the `k`-th of `n` rows a batch inserts into `table` (in VALUES order, over all its
 * INSERTs into that table), as SQL valid in any later statement of the same batch: the batch holds
 * the write lock, and AUTOINCREMENT gives each new row the largest id so far plus one, so the
 * batch's rows are the table's last `n` ids, in order.
 */
export function newRowId(table: string, k: number, n: number): SQL {
  const back = n - 1 - k;
  if (!Number.isSafeInteger(back) || back < 0) throw new Error(`newRowId: ${k} of ${n}`);
  // the offset is written out: D1 binds numbers as REAL, and the id would become "7.0" as text
  return sql`((SELECT max("id") FROM ${sql.raw(`"${table}"`)}) - ${sql.raw(String(back))})`;
}

/** `newRowId`, or the `k`-th id a create names itself (`StagedOptions.ids`, decision 0113). */
export function createdRowId(table: string, k: number, n: number, fixed?: number[]): SQL {
  if (!fixed) return newRowId(table, k, n);
  const id = fixed[k];
  if (id === undefined || !Number.isSafeInteger(id)) throw new Error(`createdRowId: ${k} of ${n}`);
  // written out, as in newRowId: D1 would bind the number as REAL
  return sql.raw(String(id));
}

/**
 * A record written before its id is known carries this marker (made once per process) where the id goes (`id`, `url`,
 * `display`); `withNewId` turns its JSON text into SQL that puts the id in. The marker has a
 * random part: no user's value can hold it by chance, so nothing else is replaced.
 */
export function newIdMarker(): string {
  // made on first use: Workers refuse random values in the global scope
  marker ??= `@new-id-${crypto.randomUUID()}@`;
  return marker;
}
let marker: string | undefined;

/** `text` (JSON or plain) with the marker replaced by `id`, as an SQL expression. */
export function withNewId(text: string | Placeholder, id: SQL): SQL {
  const asText = sql`CAST(${id} AS TEXT)`;
  // the quoted marker first: `"id":"<marker>"` becomes the number `"id":42`
  const mark = newIdMarker();
  return sql`replace(replace(${text}, ${JSON.stringify(mark)}, ${asText}), ${mark}, ${asText})`;
}

/** `text` (JSON) with the marker replaced by `id`, as `withNewId`'s SQL does it. */
export function putNewId(text: string, id: number): string {
  const mark = newIdMarker();
  return text.replaceAll(JSON.stringify(mark), String(id)).replaceAll(mark, String(id));
}

/**
 * A write's new `last_updated`: now, but always after the stamp it replaces (two writes in one
 * millisecond would otherwise leave the same stamp, and a condition on it could not tell them
 * apart).
 */
export function nextStamp(previous: string | null | undefined): string {
  const now = new Date();
  const before = previous ? Date.parse(previous) : Number.NaN;
  if (!Number.isNaN(before) && now.getTime() <= before) return new Date(before + 1).toISOString();
  return now.toISOString();
}
