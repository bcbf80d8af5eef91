/**
 * Issue 30 item 7: SIGTERM drains. Requests sent before the signal — single creates on their own
 * connections and a 1,000-object bulk — are all answered (no connection reset), `/readyz` answers
 * 503 from the first moment of the drain, and the process exits 0 within the drain timeout.
 */
import { afterAll, expect, test } from "bun:test";
import { waitFor } from "../tasks/harness";
import { dataFolder, startServerProcess, type ServerProcess } from "../helpers/server-process";

const cleanups: Array<() => unknown> = [];
afterAll(async () => {
  for (const fn of cleanups.reverse()) await fn();
});

type Outcome = { status: number } | { error: string };

/** A request on a connection of its own, so a reset of one is not hidden by a retry. */
function send(
  server: ServerProcess,
  token: string,
  path: string,
  body?: unknown,
): Promise<Outcome> {
  return fetch(server.url + path, {
    method: body === undefined ? "GET" : "POST",
    headers: { authorization: `Token ${token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    keepalive: false,
    signal: AbortSignal.timeout(30_000),
  }).then(
    async (r) => {
      await r.arrayBuffer();
      return { status: r.status };
    },
    (e) => ({ error: String((e as Error)?.message ?? e) }),
  );
}

test("every request received before SIGTERM is answered; /readyz fails during the drain", async () => {
  const folder = await dataFolder();
  cleanups.push(folder.remove);
  const server = await startServerProcess({ DATABASE_URL: folder.dbUrl });
  cleanups.push(() => server.kill());
  expect(await send(server, folder.token, "/readyz")).toEqual({ status: 200 });

  const bulk = Array.from({ length: 1000 }, (_, i) => ({ name: `Bulk ${i}`, slug: `bulk-${i}` }));
  const sent: Array<Promise<Outcome>> = [send(server, folder.token, "/api/dcim/sites/", bulk)];
  // A steady stream of creates, each on a connection of its own, up to the signal.
  for (let i = 0; i < 60; i++) {
    sent.push(
      send(server, folder.token, "/api/dcim/sites/", { name: `One ${i}`, slug: `one-${i}` }),
    );
    await Bun.sleep(2);
  }
  server.proc.kill("SIGTERM");
  // Once the server says it drains (while the bulk still runs), probes hear "not ready".
  await waitFor("the drain", () => server.logs.some((l) => l.msg === "shutting down"), 10_000, 2);
  const ready = await send(server, folder.token, "/readyz");
  const outcomes = await Promise.all(sent);
  expect(outcomes.filter((o) => "error" in o)).toEqual([]);
  expect(outcomes.map((o) => ("status" in o ? o.status : 0))).toEqual(sent.map(() => 201));
  expect(ready).toEqual({ status: 503 });
  expect(await server.exited()).toBe(0);
}, 60_000);
