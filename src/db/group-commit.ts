/**
 * Group commit for the local database (decision 0053): write transactions that arrive while one
 * is running wait in a queue, and the next transaction runs all of them — each in a savepoint of
 * its own, so each is still all-or-nothing for its caller — then commits once. SQLite runs one
 * writer at a time anyway (they used to queue on the connection's lock); what is saved is a
 * BEGIN and a COMMIT per request, and the COMMIT (the WAL append) was a quarter of a create.
 * A lone transaction runs exactly as before (no savepoint), so an idle server adds no latency.
 * Bun only (opened by `local.ts`).
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { isBusyError, type Executor, type Orm } from "./client";

/** What group commit needs of the local database (`local.ts`). */
interface GroupCommitHost {
  orm: Orm;
  /** Runs the work of an open write transaction (queries around it then fail at once). */
  scope<T>(fn: () => Promise<T>): Promise<T>;
  /** Whether the caller runs inside a long write (its transactions go to the second connection). */
  inLongWrite(): boolean;
}
import { storageFaultOf } from "./storage-faults";
import { libsqlTransactionClosed } from "./driver-internals";

/** At most this many callers share one transaction (bounds the work a COMMIT waits on). */
const MAX_GROUP = 64;

type Work<T> = (tx: Executor) => Promise<T>;
interface Member {
  work: Work<unknown>;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}
type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/** Marks work running inside a group (a nested write transaction there must not queue behind it). */
const inGroup = new AsyncLocalStorage<boolean>();

export class GroupCommit {
  #queue: Member[] = [];
  #running = false;
  /** Groups run and callers served, for benches and tests. */
  readonly stats = { groups: 0, members: 0, largest: 0 };

  constructor(private readonly db: GroupCommitHost) {}

  /** Runs `work` in a write transaction, joined with others that are waiting. */
  run<T>(work: Work<T>): Promise<T> {
    // Inside a group or a long write (its own connection), queueing would wait on ourselves.
    if (inGroup.getStore() || this.db.inLongWrite()) return this.#alone(work);
    return new Promise<T>((resolve, reject) => {
      this.#queue.push({
        work: work as Work<unknown>,
        resolve: resolve as (v: unknown) => void,
        reject,
      });
      if (!this.#running) void this.#drain();
    });
  }

  #alone<T>(work: Work<T>): Promise<T> {
    return this.db.orm.transaction((tx) => this.db.scope(() => work(tx)));
  }

  async #drain() {
    this.#running = true;
    try {
      while (this.#queue.length) {
        const batch = this.#queue.splice(0, MAX_GROUP);
        this.stats.groups++;
        this.stats.members += batch.length;
        this.stats.largest = Math.max(this.stats.largest, batch.length);
        if (batch.length === 1) {
          const m = batch[0]!;
          await inGroup.run(true, () => this.#alone(m.work)).then(m.resolve, m.reject);
        } else {
          await this.#group(batch);
        }
      }
    } finally {
      this.#running = false;
    }
  }

  async #group(batch: Member[]) {
    const scope = <R>(fn: () => Promise<R>) => this.db.scope(fn);
    const outcomes: Outcome[] = [];
    // SQLite rolls the whole transaction back on some errors (a full disk or an I/O error while
    // a member's pages spill to the WAL): the members after it must not run in a transaction that
    // is gone (they answered TRANSACTION_CLOSED 500s), and those before it lost their work.
    let lost = null as { error: unknown } | null;
    try {
      await this.db.orm.transaction((tx) =>
        scope(() =>
          inGroup.run(true, async () => {
            for (const m of batch) {
              if (lost) break;
              let own = null as { error: unknown } | null;
              try {
                // A savepoint per caller: its failure rolls back its own work only.
                const value = await tx.transaction((sp) =>
                  m.work(sp).catch((error: unknown) => {
                    own = { error }; // the work's own error, not the savepoint's rollback failing after it
                    throw error;
                  }),
                );
                outcomes.push({ ok: true, value });
              } catch (error) {
                const cause = own ? own.error : error;
                outcomes.push({ ok: false, error: cause });
                if (libsqlTransactionClosed(tx)) lost = { error: cause };
              }
            }
            if (lost) throw lost.error;
          }),
        ),
      );
    } catch (e) {
      // Nothing of the group was written. After a storage fault each other caller gets a
      // transaction of its own (and its own true answer); otherwise every caller hears why.
      const fault = lost ? lost.error : e;
      if (storageFaultOf(fault)) return this.#retryAlone(batch, outcomes, lost ? fault : null);
      batch.forEach((m, i) => {
        const own = outcomes[i];
        m.reject(own && !own.ok ? own.error : e);
      });
      return;
    }
    batch.forEach((m, i) => {
      const own = outcomes[i]!;
      if (own.ok) m.resolve(own.value);
      else m.reject(own.error);
    });
  }

  /**
   * After a storage fault cost the group its transaction: the member whose work raised it hears
   * its error; every other member runs again, alone (its work is idempotent per attempt: nothing
   * of the first attempt was written).
   */
  async #retryAlone(batch: Member[], outcomes: Outcome[], cause: unknown) {
    for (const [i, m] of batch.entries()) {
      const own = outcomes[i];
      if (own && !own.ok && (own.error === cause || !storageFaultOf(own.error))) {
        m.reject(own.error);
        continue;
      }
      await inGroup.run(true, () => this.#alone(m.work)).then(m.resolve, m.reject);
    }
  }
}

/**
 * Group commit for `write` batches (decision 0071 on a local file, 0053's idea): batches that
 * arrive while one is being written wait, and the next write carries all of them as one batch —
 * one BEGIN … COMMIT. Each batch's statements still run in order, so what one batch names by
 * `max(id)` or `last_insert_rowid()` is its own. Should the joint batch fail, each batch is
 * written again alone: a guard or a unique index that fails one caller fails only that caller.
 */
interface Waiting<Q> {
  queries: Q[];
  resolve(value: unknown[]): void;
  reject(error: unknown): void;
}

export class BatchGroup<Q> {
  #queue: Array<Waiting<Q>> = [];
  #running = false;
  /** Joint writes and callers served, for benches and tests. */
  readonly stats = { groups: 0, members: 0, largest: 0 };

  constructor(private readonly send: (queries: Q[]) => Promise<unknown[]>) {}

  run(queries: Q[]): Promise<unknown[]> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ queries, resolve, reject });
      if (this.#running) return;
      this.#running = true;
      // The write starts after the event loop's current turn: batches whose read phases answered
      // in the same turn meet in one write. The driver's write holds the thread, so nothing
      // could join one that started at once.
      setImmediate(() => void this.#drain());
    });
  }

  /**
   * Writes `group` as one batch; when that fails, each half again, down to single batches, whose
   * outcome is their caller's: one failing batch among n costs about 2·log2(n) writes, not n.
   */
  async #write(group: Array<Waiting<Q>>): Promise<void> {
    if (group.length === 1) {
      const m = group[0]!;
      await this.send(m.queries).then(m.resolve, m.reject);
      return;
    }
    let failure: unknown = null;
    const joint = await this.send(group.flatMap((m) => m.queries)).then(
      (r) => r,
      (e) => {
        failure = e;
        return null;
      },
    );
    // a busy database (a long write holds the lock) fails every member alike: no halving
    if (!joint && isBusyError(failure)) {
      for (const m of group) m.reject(failure);
      return;
    }
    if (!joint) {
      const half = Math.ceil(group.length / 2);
      await this.#write(group.slice(0, half));
      await this.#write(group.slice(half));
      return;
    }
    let at = 0;
    for (const m of group) {
      m.resolve(joint.slice(at, at + m.queries.length));
      at += m.queries.length;
    }
  }

  async #drain() {
    this.#running = true;
    try {
      while (this.#queue.length) {
        const group = this.#queue.splice(0, MAX_GROUP);
        this.stats.groups++;
        this.stats.members += group.length;
        this.stats.largest = Math.max(this.stats.largest, group.length);
        await this.#write(group);
      }
    } finally {
      this.#running = false;
    }
  }
}
