/**
 * Workers start-up while the database is down: `/livez` answers 200 (the isolate lives), every
 * other route a 503 naming the cause in one line, and the log says the same without SQL or secrets.
 */
import { afterEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import {
  freePort,
  startRemoteDatabase,
  startWorker,
  type RemoteDatabase,
  type RunningWorker,
} from "../helpers/worker";
import { waitFor } from "../helpers/wait";

setDefaultTimeout(30_000);
const SECRET = "db-secret-41c2e0aa";

const running: Array<RunningWorker | RemoteDatabase | { stop(): unknown }> = [];
afterEach(async () => {
  for (const r of running.splice(0).reverse()) await r.stop();
});

async function worker(bindings: Record<string, string>) {
  const output: string[] = [];
  const w = await startWorker({
    bindings: { LOG_LEVEL: "info", ...bindings },
    onOutput: (l) => output.push(l),
  });
  running.push(w);
  return { w, output };
}

async function expectDown(w: RunningWorker, output: string[], cause: RegExp, kind: string) {
  const live = await w.fetch("/livez");
  expect(live.status).toBe(200);
  expect(await live.json()).toEqual({ status: "ok" });
  for (const path of ["/api/status/", "/readyz", "/plugins/host_healthcheck_plugin/healthcheck/"]) {
    const res = await w.fetch(path);
    const text = await res.text();
    expect(res.status).toBe(503);
    const body = JSON.parse(text);
    expect(body.error).toBe("database_unavailable");
    expect(body.detail).toMatch(cause);
    expect(text).not.toContain(SECRET);
  }
  const logged = await waitFor(
    () => {
      const lines = output.filter((l) => l.includes("isolate start-up failed"));
      return lines.length > 0 && lines;
    },
    { message: "the start-up failure logged" },
  );
  for (const line of logged) {
    expect(line).toContain(`"cause":"${kind}"`);
    expect(line).not.toContain("Failed query");
    expect(line).not.toContain(SECRET);
  }
}

describe("Workers start-up with the database down", () => {
  test("refused (nothing listens): /livez 200, other routes 503 'connection refused'", async () => {
    const port = await freePort();
    const { w, output } = await worker({
      DATABASE_URL: `http://127.0.0.1:${port}`,
      DATABASE_AUTH_TOKEN: SECRET,
    });
    await expectDown(w, output, /^The database is unavailable: connection refused/, "refused");
  });

  test("unauthorized (the server refuses the token): 503 naming DATABASE_AUTH_TOKEN, never its value", async () => {
    const db = await startRemoteDatabase({ authToken: "the-right-token-9e" });
    running.push(db);
    const { w, output } = await worker({ DATABASE_URL: db.url, DATABASE_AUTH_TOKEN: SECRET });
    await expectDown(
      w,
      output,
      /^The database is unavailable: unauthorized: the server refused DATABASE_AUTH_TOKEN \(HTTP 401\)/,
      "unauthorized",
    );
  });

  test("not found (a server that is not the database): 503 'not found'", async () => {
    const server = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: () => new Response("no such thing", { status: 404 }),
    });
    running.push({ stop: () => server.stop(true) });
    const { w, output } = await worker({
      DATABASE_URL: `http://127.0.0.1:${server.port}`,
      DATABASE_AUTH_TOKEN: SECRET,
    });
    await expectDown(w, output, /^The database is unavailable: not found/, "not_found");
  });

  test("the database coming back is picked up by the next request", async () => {
    const port = await freePort();
    const { w } = await worker({ DATABASE_URL: `http://127.0.0.1:${port}` });
    expect((await w.fetch("/api/status/")).status).toBe(503);
    const db = await startRemoteDatabase({ port });
    running.push(db);
    const token = await db.superuserToken();
    expect(
      (await w.fetch("/api/status/", { headers: { authorization: `Token ${token}` } })).status,
    ).toBe(200);
  });
});
