/**
 * When the full-text index's pending rows get indexed (decision 0056): shortly after a write to a
 * custom object type commits (`scheduleSearchFlush`, debounced), at start-up and periodically (a
 * sweep of every type), and on Workers by the cron's periodic run. One flusher per app, kept in
 * `services.state`; it works one chunk at a time — one read, then one atomic write batch, as
 * requests write (decision 0105) — giving the event loop a turn between chunks, so requests
 * interleave with it. Searches are exact whatever is pending: this only keeps them fast.
 */
import type { Services } from "../../../core/context";
import { slotKey } from "../../../core/slots";
import { isClosedDatabaseError } from "../../../db/connection-errors";
import { Outage } from "../../../services/outage";
import { flushSearchIndex, typesWithPending } from "./search-index";

/**
 * How long the writes must pause before pending rows are indexed: each write within it starts the
 * wait again, so a burst of writes (a bulk load in batches) is indexed once, after it, instead of
 * between its requests...
 */
const FLUSH_DELAY_MS = 150;
/** ...but never later than this after the first write waiting (steady writes are indexed too). */
const FLUSH_MAX_WAIT_MS = 1000;
/** How often every type is swept (rows written by other processes or plain SQL, failed flushes). */
const SWEEP_EVERY_MS = 60_000;
/**
 * After a failed flush (busy, a disk error, the database link down), how long before the flusher
 * tries again: doubling per failure up to RETRY_MAX_MS, with jitter (decision 0204).
 */
const RETRY_MS = 1000;
const RETRY_MAX_MS = 30_000;

const turn = () => new Promise<void>((r) => setTimeout(r, 0));

/** Where the flusher reads the time and sets its timer (tests pass a clock they move by hand). */
export interface FlushClock {
  now(): number;
  /** Calls `fn` after `ms`; returns how to cancel it. */
  setTimer(fn: () => void, ms: number): () => void;
}

const REAL_CLOCK: FlushClock = {
  now: () => performance.now(),
  setTimer(fn, ms) {
    const timer = setTimeout(fn, ms);
    // A pending flush or retry does not keep a process (a CLI, a bench, a test run) alive: what
    // it would have indexed stays pending, and the next start-up's or sweep's flush indexes it.
    (timer as { unref?: () => void }).unref?.();
    return () => clearTimeout(timer);
  },
};

export class SearchFlusher {
  /** Types written since their last flush; `null` in the set's place: sweep every type. */
  #dirty = new Set<number>();
  #sweep = false;
  /** Cancels the armed timer. */
  #timer: (() => void) | null = null;
  #running: Promise<void> | null = null;
  /** Failures in a row: the retry's pause, and one log line a minute at most. */
  readonly #outage: Outage;

  constructor(
    private readonly services: Pick<Services, "db" | "logger">,
    private readonly delayMs = FLUSH_DELAY_MS,
    private readonly maxWaitMs = FLUSH_MAX_WAIT_MS,
    private readonly clock: FlushClock = REAL_CLOCK,
  ) {
    this.#outage = new Outage({
      name: "search index flush",
      logger: services.logger,
      baseMs: RETRY_MS,
      maxMs: RETRY_MAX_MS,
      now: () => clock.now(),
    });
  }

  /** Indexes `cotId`'s pending rows soon (every type's without one). Cheap; never throws. */
  schedule(cotId?: number): void {
    if (cotId === undefined) this.#sweep = true;
    else this.#dirty.add(cotId);
    this.#arm();
  }

  /** When the armed timer's wait began (its first write), for FLUSH_MAX_WAIT_MS. */
  #waitingSince = 0;

  /** Arms the timer: after the debounce, or `retryMs` after a failed flush. */
  #arm(retryMs?: number) {
    if (this.#running) return;
    const now = this.clock.now();
    if (this.#timer) {
      this.#timer();
    } else this.#waitingSince = now;
    const wait =
      retryMs ?? Math.max(0, Math.min(this.delayMs, this.#waitingSince + this.maxWaitMs - now));
    this.#timer = this.clock.setTimer(() => {
      this.#timer = null;
      this.#start();
    }, wait);
  }

  /**
   * Runs a flush. After it, what is still dirty (a failed type, or a write scheduled while it ran,
   * whose `#arm` found it running) gets a timer: nothing waits for the next write or sweep.
   */
  #start(): Promise<void> {
    let retryMs: number | undefined;
    this.#running = this.#run()
      .then((pause) => void (retryMs = pause))
      .finally(() => {
        this.#running = null;
        if (this.#dirty.size || this.#sweep) this.#arm(retryMs);
      });
    return this.#running;
  }

  /** Flushes what is due now, until nothing is left (also for tests and benches). */
  async flushNow(): Promise<void> {
    if (this.#timer) {
      this.#timer();
      this.#timer = null;
    }
    while (this.#running) await this.#running;
    await this.#start();
  }

  /**
   * Flushes the dirty types (every type's after a sweep request). When a flush failed, its types
   * stay dirty and this returns the pause before the retry. A closed database ends the work for
   * good (nothing dirty).
   */
  async #run(): Promise<number | undefined> {
    const db = this.services.db;
    let ids: number[] = [...this.#dirty];
    this.#dirty.clear();
    try {
      if (this.#sweep) {
        this.#sweep = false;
        ids = [...new Set([...ids, ...(await this.#pendingTypes(ids))])];
      }
      for (const [i, cotId] of ids.entries()) {
        try {
          while ((await flushSearchIndex(db, cotId)) > 0) {
            await turn();
            // Writes of this type that came meanwhile are in this loop's batches already.
            this.#dirty.delete(cotId);
          }
        } catch (e) {
          // Busy or failed: left pending (searches stay exact), tried again by the next flush.
          this.#dirty.add(cotId);
          for (const rest of ids.slice(i + 1)) this.#dirty.add(rest);
          throw e;
        }
        await turn();
      }
      this.#outage.succeeded();
      return undefined;
    } catch (e) {
      // a database closed under a pending flush (shutdown, a bench's or a test's end): nothing to
      // retry, and no timer of ours may keep the process alive for it
      if (isClosedDatabaseError(e)) {
        this.#dirty.clear();
        this.#sweep = false;
        this.services.logger.debug("search index flush stopped: the database is closed");
        return undefined;
      }
      return this.#outage.failed(e);
    }
  }

  /** Every type with pending rows; when that read fails, the sweep and `ids` wait for the retry. */
  async #pendingTypes(ids: number[]): Promise<number[]> {
    try {
      return await typesWithPending(this.services.db.reader);
    } catch (e) {
      this.#sweep = true;
      for (const id of ids) this.#dirty.add(id);
      throw e;
    }
  }
}

const FLUSHER = slotKey<SearchFlusher>("custom-objects.search-flusher");

/** The app's flusher (one per `services`). */
export function searchFlusher(services: Pick<Services, "db" | "logger" | "state">): SearchFlusher {
  return services.state.ensure(FLUSHER, () => new SearchFlusher(services));
}

/**
 * After a commit that marked rows of `cotId` pending: index them shortly. Not on Workers, where a
 * timer may outlive its request (the cron's periodic run flushes there).
 */
export function scheduleSearchFlush(
  services: Pick<Services, "db" | "logger" | "state" | "config">,
  cotId: number,
): void {
  if (services.config.runtime === "workerd") return;
  searchFlusher(services).schedule(cotId);
}

/** Flushes every type's pending rows now (benches, tests, the Workers cron). */
export async function flushSearchIndexesNow(
  services: Pick<Services, "db" | "logger" | "state">,
): Promise<void> {
  const flusher = searchFlusher(services);
  flusher.schedule();
  await flusher.flushNow();
}

export { SWEEP_EVERY_MS as SEARCH_SWEEP_EVERY_MS };
