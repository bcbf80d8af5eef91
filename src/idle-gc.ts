/**
 * One full garbage collection when the Bun server goes quiet after a burst of requests (decision
 * 0060). Under load the JS heap grows to twice what is live, and the allocator keeps what the
 * heap gave back only as long as the heap holds on to it; a burst therefore leaves the process
 * tens of MB above what it needs until enough later garbage triggers a full collection. A
 * collection run once the server has been idle for `idleMs` returns that memory before the next
 * burst starts from it. It runs only after requests were served (an idle server never pays for
 * it) and never while one is in flight. A pause of only `quickMs` is enough when the heap has
 * grown by half since the last collection (a burst of bulk writes or pages): such a burst would
 * otherwise hand its garbage to the next one, whose own growth comes on top of it.
 */
import { heapSize } from "bun:jsc";

type Fetch = (request: Request, server?: any) => Response | Promise<Response>;

export interface IdleCollector {
  /** `fetch`, counting requests in flight. */
  fetch: (request: Request, server?: unknown) => Response | Promise<Response>;
  /** Full collections run so far (for tests). */
  readonly collections: number;
  stop(): void;
}

/** Growth of the heap since the last collection after which a short pause is enough. */
const GROWN = 1.5;
/** Least time between two collections after short pauses (light steady traffic pauses often). */
const QUICK_SPACING_MS = 5000;

export function idleCollector(
  fetch: Fetch,
  options: {
    idleMs?: number;
    quickMs?: number;
    collect?: () => void;
    heapBytes?: () => number;
    /** The clock idle time is measured on (tests pass one they move by hand). */
    now?: () => number;
    /** Runs `tick` every `ms`; returns how to stop it (tests keep the tick and call it). */
    every?: (tick: () => void, ms: number) => () => void;
  } = {},
): IdleCollector {
  const idleMs = options.idleMs ?? 1000;
  const quickMs = Math.min(idleMs, options.quickMs ?? 100);
  const collect = options.collect ?? (() => Bun.gc(true));
  const heapBytes = options.heapBytes ?? heapSize;
  const now = options.now ?? (() => performance.now());
  const every = options.every ?? unrefInterval;
  let inFlight = 0;
  let served = false;
  let lastActive = 0;
  let collections = 0;
  let afterLast = heapBytes();
  let lastCollection = -Infinity;
  const stop = every(
    () => {
      if (!served || inFlight > 0) return;
      const idle = now() - lastActive;
      if (idle < quickMs) return;
      if (
        idle < idleMs &&
        (now() - lastCollection < QUICK_SPACING_MS || heapBytes() < afterLast * GROWN)
      )
        return;
      served = false;
      collections++;
      collect();
      afterLast = heapBytes();
      lastCollection = now();
    },
    Math.max(10, quickMs / 2),
  );
  const settle = () => {
    inFlight--;
    lastActive = now();
  };
  const counted = (request: Request, server?: unknown) => {
    inFlight++;
    served = true;
    lastActive = now();
    let answer: Response | Promise<Response>;
    try {
      answer = fetch(request, server);
    } catch (e) {
      settle();
      throw e;
    }
    if (answer instanceof Promise) return answer.finally(settle);
    settle();
    return answer;
  };
  return {
    fetch: counted,
    get collections() {
      return collections;
    },
    stop,
  };
}

function unrefInterval(tick: () => void, ms: number): () => void {
  const timer = setInterval(tick, ms);
  timer.unref?.();
  return () => clearInterval(timer);
}
