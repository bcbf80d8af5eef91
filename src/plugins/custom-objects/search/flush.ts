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
    // A pending flush does not keep a process (a CLI, a test run) alive; a sweep catches it later.
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

  constructor(
    private readonly services: Pick<Services, "db" | "logger">,
    private readonly delayMs = FLUSH_DELAY_MS,
    private readonly maxWaitMs = FLUSH_MAX_WAIT_MS,
    private readonly clock: FlushClock = REAL_CLOCK,
  ) {}

  /** Indexes `cotId`'s pending rows soon (every type's without one). Cheap; never throws. */
  schedule(cotId?: number): void {
    if (cotId === undefined) this.#sweep = true;
    else this.#dirty.add(cotId);
    this.#arm();
  }

  /** When the armed timer's wait began (its first write), for FLUSH_MAX_WAIT_MS. */
  #waitingSince = 0;

  #arm() {
    if (this.#running) return;
    const now = this.clock.now();
    if (this.#timer) {
      this.#timer();
    } else this.#waitingSince = now;
    const wait = Math.max(0, Math.min(this.delayMs, this.#waitingSince + this.maxWaitMs - now));
    this.#timer = this.clock.setTimer(() => {
      this.#timer = null;
      this.#running = this.#run().finally(() => {
        this.#running = null;
        if (this.#dirty.size || this.#sweep) this.#arm();
      });
    }, wait);
  }

  /** Flushes what is due now, until nothing is left (also for tests and benches). */
  async flushNow(): Promise<void> {
    if (this.#timer) {
      this.#timer();
      this.#timer = null;
    }
    while (this.#running) await this.#running;
    this.#running = this.#run().finally(() => (this.#running = null));
    await this.#running;
  }

  async #run(): Promise<void> {
    const db = this.services.db;
    let ids: number[] = [...this.#dirty];
    this.#dirty.clear();
    try {
      if (this.#sweep) {
        this.#sweep = false;
        ids = [...new Set([...ids, ...(await typesWithPending(db.reader))])];
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
    } catch (e) {
      const error = String((e as Error)?.message ?? e);
      // a database closed under a pending flush (shutdown, a test's end): nothing to retry
      if (/closed/i.test(error)) {
        this.#dirty.clear();
        this.#sweep = false;
        return;
      }
      this.services.logger.warn("search index flush failed; retrying later", { error });
      await new Promise((r) => setTimeout(r, 1000));
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
