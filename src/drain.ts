/**
 * The drain of `npm start` on SIGTERM/SIGINT (decision 0080). Closing the listening socket at once
 * reset the connections the kernel had already taken but the server had not yet accepted
 * (requests sent up to ~100 ms before the signal, while the event loop was busy). So the server
 * first keeps serving — `/readyz` answers 503, responses say `Connection: close` — until no request
 * has been in flight for `QUIET_MS`, then stops listening, lets the last responses finish and
 * returns; all within `DRAIN_TIMEOUT_MS`, after which remaining connections are cut.
 */
import { orAfter } from "./db/bounded-wait";

type Fetch = (request: Request, server?: any) => Response | Promise<Response>;

/** The longest a drain waits for requests; the process exits shortly after (documented in the README). */
export const DRAIN_TIMEOUT_MS = 10_000;
/** No request in flight for this long: whatever the kernel had queued before the signal is answered. */
const QUIET_MS = 250;

export interface Drainer {
  /** `fetch`, counting requests in flight. */
  fetch: Fetch;
  /** Serves until quiet, stops listening, waits for the last responses; true when nothing was cut. */
  drain(server: { stop(closeActive?: boolean): Promise<void> | void }): Promise<boolean>;
}

export function drainer(
  fetch: Fetch,
  options: { timeoutMs?: number; quietMs?: number } = {},
): Drainer {
  const timeoutMs = options.timeoutMs ?? DRAIN_TIMEOUT_MS;
  const quietMs = options.quietMs ?? QUIET_MS;
  let inFlight = 0;
  let lastActive = performance.now();
  let draining = false;
  const settle = (response: Response) => {
    inFlight--;
    lastActive = performance.now();
    if (draining) {
      try {
        response.headers.set("Connection", "close"); // the client opens a new connection elsewhere
      } catch {
        // immutable headers: the connection closes when the server stops listening
      }
    }
    return response;
  };
  const counted: Fetch = async (request, server) => {
    inFlight++;
    lastActive = performance.now();
    try {
      return settle(await fetch(request, server));
    } catch (e) {
      inFlight--;
      lastActive = performance.now();
      throw e;
    }
  };
  return {
    fetch: counted,
    async drain(server) {
      draining = true;
      const deadline = performance.now() + timeoutMs;
      const left = () => deadline - performance.now();
      while (left() > 0 && (inFlight > 0 || performance.now() - lastActive < quietMs))
        await Bun.sleep(Math.min(10, Math.max(1, left())));
      const stopped = Promise.resolve(server.stop(false)).then(() => true);
      // the bound's timer cleared once the server stopped: it held a process for the rest of it
      const finished = await orAfter(stopped, Math.max(0, left()), false);
      if (!finished) await server.stop(true);
      return finished;
    },
  };
}
