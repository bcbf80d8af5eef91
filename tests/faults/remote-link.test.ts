/**
 * The edge path's database link misbehaving (decision 0202): the app over the Hrana stand-in with
 * a fault-injecting proxy between them. A read that meets a timeout, a hang, a reset, a 5xx or an
 * answer that is not Hrana is a 503 `database_unavailable` with `Retry-After`, never a 500 or a
 * hung request; a write whose answer never came is a 503 `write_outcome_unknown`, and what it
 * committed (the object, its change record, its outbox row) is there and handed on; the app
 * recovers by itself when the link does.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { DatabaseLinkError } from "../../src/db/remote-link";
import { startHranaServer, type HranaServer } from "../../tools/hrana-server";
import { startFaultProxy, type FaultKind, type FaultProxy } from "../helpers/fault-proxy";
import { TIMED_OUT, waitFor, within } from "../helpers/wait";
import { hookAndRule, makeTasksEnv, startReceiver, type TasksEnv } from "../tasks/harness";
import { HEALTH } from "../healthcheck/helpers";

const SECRET = "hrana-secret-5d1e9a";
// Short, so a hung round trip is given up soon; a bound on the wait, never asserted as a time.
const TIMEOUT_MS = 1_500;
// How long a test waits for an answer before calling the request hung (a failure bound).
const HUNG = 30_000;

let dir: string;
let hrana: HranaServer;
let proxy: FaultProxy;
let env: TasksEnv;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "host-remote-link-"));
  hrana = await startHranaServer({ path: join(dir, "remote.db"), authToken: SECRET });
  proxy = await startFaultProxy(hrana.url);
  env = await makeTasksEnv({
    DATABASE_URL: proxy.url,
    DATABASE_AUTH_TOKEN: SECRET,
    DATABASE_TIMEOUT_MS: String(TIMEOUT_MS),
    PLUGINS_CONFIG: JSON.stringify({
      host_healthcheck_plugin: {
        timeout_ms: 10_000,
        checks: [
          "health_check.Database",
          "host_healthcheck_plugin.backends.redis.HostRedisTasksHealthCheck",
        ],
      },
    }),
  });
});
afterAll(async () => {
  proxy.clear();
  await env.close();
  await proxy.stop();
  await hrana.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** The answer, or a failure naming the request that hung past the bound. */
async function answered(
  what: string,
  pending: Promise<{ status: number; body: any; res: Response }>,
) {
  const r = await within(pending, HUNG);
  if (r === TIMED_OUT) throw new Error(`${what}: no answer within ${HUNG} ms (hung)`);
  return r;
}

function expect503(r: { status: number; body: any; res: Response }, error: string) {
  expect({ status: r.status, error: r.body?.error }).toEqual({ status: 503, error });
  expect(r.res.headers.get("retry-after")).toMatch(/^\d+$/);
  expect(JSON.stringify(r.body)).not.toContain(SECRET);
  expect(JSON.stringify(r.body)).not.toContain("Failed query");
}

/**
 * The request's own round trips: not the token's `last_used` write nor the search flusher's sweep
 * (sent now and then beside a request, so counting them would make counts depend on the time).
 */
const requestOwn = (_path: string, body: string) => !/last_used|co_search_pending/.test(body);

/** A Hrana round trip that carries the INSERT of a site (a create's write batch). */
const siteInsert = (_path: string, body: string) => body.includes('insert into \\"sites\\"');

const READ_FAULTS: Array<[FaultKind, RegExp]> = [
  ["status", /the server failed \(HTTP 503\)/],
  ["malformed", /the server's answer could not be read/],
  ["reset", /unreachable|refused or dropped/],
  ["reset-mid", /unreachable|refused or dropped/],
  ["hang", /timed out waiting for the server/],
];

describe("a read over a failing link", () => {
  for (const [kind, reason] of READ_FAULTS) {
    test(`${kind}: 503 database_unavailable naming the cause, then served again by itself`, async () => {
      const { t } = env;
      proxy.inject({ kind, match: requestOwn });
      const r = await answered("GET during the fault", t.json("GET", "/api/dcim/sites/"));
      const tried = proxy.hits;
      const log = proxy.hitLog;
      proxy.clear();
      expect503(r, "database_unavailable");
      expect(r.body.detail).toMatch(reason);
      expect({ kind, tried, log }).toEqual({ kind, tried: 1, log: [expect.any(String)] }); // not sent again over the failing link
      // the link is back: the next request is served, no restart
      expect((await t.json("GET", "/api/dcim/sites/")).status).toBe(200);
    });
  }
});

test("a link failure that describes the deployment (a refused credential) is named only in the log, not in the answer", async () => {
  const { t } = env;
  proxy.inject({ kind: "status", status: 401, match: requestOwn });
  const r = await answered("GET during the fault", t.json("GET", "/api/dcim/sites/"));
  proxy.clear();
  expect503(r, "database_unavailable");
  expect(r.body.detail).toMatch(/unreachable/);
  expect(JSON.stringify(r.body)).not.toMatch(/DATABASE_AUTH_TOKEN|unauthorized|401|127\.0\.0\.1/);
});

test("a create whose read fails writes nothing: 503 database_unavailable", async () => {
  const { t } = env;
  proxy.inject({ kind: "status", status: 502, times: 1 });
  const r = await answered(
    "POST during the fault",
    t.json("POST", "/api/dcim/sites/", { body: { name: "Unread", slug: "unread" } }),
  );
  proxy.clear();
  expect503(r, "database_unavailable");
  expect((await t.json("GET", "/api/dcim/sites/?slug=unread")).body.count).toBe(0);
});

describe("a write committed whose answer never came", () => {
  for (const kind of ["late", "reset-mid"] as FaultKind[]) {
    test(`${kind}: 503 write_outcome_unknown; the object, its change record and its event are kept`, async () => {
      const { t } = env;
      const receiver = startReceiver();
      const { rule } = await hookAndRule(t, { url: receiver.url, eventTypes: ["object_created"] });
      try {
        const slug = `ambiguous-${kind}`;
        proxy.inject({ kind, match: siteInsert, times: 1 });
        const r = await answered(
          "POST whose answer is lost",
          t.json("POST", "/api/dcim/sites/", { body: { name: slug, slug } }),
        );
        expect(proxy.hits).toBe(1);
        proxy.clear();
        // It did commit: the answer must not call it a failure without saying so.
        expect503(r, "write_outcome_unknown");
        expect(r.body.detail).toMatch(/may or may not have been committed/);
        const sites = await t.json("GET", `/api/dcim/sites/?slug=${slug}`);
        expect(sites.body.count).toBe(1);
        const id = sites.body.results[0].id;
        const changes = await t.json(
          "GET",
          `/api/core/object-changes/?changed_object_type=dcim.site&changed_object_id=${id}`,
        );
        expect(changes.body.count).toBe(1);
        // The outbox row committed with it: the worker hands it on and the receiver gets it.
        const worker = env.startWorker();
        const got = await waitFor(
          () => receiver.received.find((d) => JSON.parse(d.body).data?.slug === slug),
          { timeoutMs: 20_000, message: `the delivery of ${slug}` },
        );
        expect(JSON.parse(got.body).event).toBe("created");
        await worker.stop(5_000);
      } finally {
        proxy.clear();
        await t.req("DELETE", `/api/extras/event-rules/${rule.id}/`);
        receiver.stop();
      }
    });
  }
});

test("a hung database: the request is answered once the deadline passes, other requests meanwhile", async () => {
  const { t } = env;
  proxy.inject({ kind: "hang", match: requestOwn });
  let settled = false;
  const pending = t.json("GET", "/api/dcim/sites/").finally(() => {
    settled = true;
  });
  await waitFor(() => proxy.held > 0, { message: "the round trip held" });
  // the event loop is free: the liveness probe (no database) is answered while the read waits
  const live = await t.req("GET", "/livez", { token: null });
  expect(live.status).toBe(200);
  expect(settled).toBe(false);
  const r = await answered("GET on a hung link", pending);
  expect503(r, "database_unavailable");
  expect(r.body.detail).toMatch(/timed out/);
  // one round trip given up, none sent again over the hung link (each would cost the deadline)
  expect(proxy.hits).toBe(1);
  proxy.clear();
  expect((await t.json("GET", "/api/dcim/sites/")).status).toBe(200);
});

test("the health check names the database while its server answers 5xx, and working again after", async () => {
  const { t } = env;
  proxy.inject({ kind: "status", status: 500 });
  const down = await answered(
    "health during the fault",
    t.json("GET", `${HEALTH}?format=json`, { token: null }),
  );
  proxy.clear();
  expect(down.status).toBe(500);
  expect(down.body.checks.Database).toMatch(/^unavailable: .*HTTP (status )?500/);
  // Redis answered its PING: the tasks check warns of the figures it could not read, and fails
  // nothing of its own (the database is the component that failed).
  expect(down.body.checks.HostRedisTasksHealthCheck).toMatch(/^warning: .*database is unavailable/);
  expect(JSON.stringify(down.body)).not.toContain(SECRET);
  const up = await t.json("GET", `${HEALTH}?format=json`, { token: null });
  expect({ status: up.status, checks: up.body.checks }).toEqual({
    status: 200,
    checks: { Database: "working", HostRedisTasksHealthCheck: "working" },
  });
});

describe("an interactive transaction over a failing link", () => {
  beforeAll(() => env.t.deps.db.client.execute("CREATE TABLE fault_probe (name TEXT NOT NULL)"));
  const insert = (tx: { run(q: unknown): Promise<unknown> }, name: string) =>
    tx.run(sql`INSERT INTO "fault_probe" ("name") VALUES (${name})`);
  const stored = async (name: string) =>
    (
      await env.t.deps.db.client.execute({
        sql: "SELECT count(*) AS n FROM fault_probe WHERE name = ?",
        args: [name],
      })
    ).rows[0]!.n;

  test("its COMMIT's answer lost: outcome unknown, and it did commit", async () => {
    proxy.inject({ kind: "late", match: (_p, body) => /"sql":"COMMIT"/i.test(body), times: 1 });
    const failed = await env.t.deps.db
      .transaction((tx) => insert(tx, "tx-commit-lost"))
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(proxy.hits).toBe(1);
    proxy.clear();
    expect(failed).toBeInstanceOf(DatabaseLinkError);
    expect((failed as DatabaseLinkError).outcome).toBe("unknown");
    expect(Number(await stored("tx-commit-lost"))).toBe(1);
  });

  test("a statement before its COMMIT lost: nothing committed, and it says so", async () => {
    proxy.inject({
      kind: "reset",
      match: (_p, body) => body.includes("tx-statement-lost"),
      times: 1,
    });
    const failed = await env.t.deps.db
      .transaction((tx) => insert(tx, "tx-statement-lost"))
      .then(
        () => null,
        (e: unknown) => e,
      );
    proxy.clear();
    expect(failed).toBeInstanceOf(DatabaseLinkError);
    expect((failed as DatabaseLinkError).outcome).toBe("none");
    expect(Number(await stored("tx-statement-lost"))).toBe(0);
  });
});

test("custom objects: a create, an update and a delete whose answers were lost each say so, and each committed", async () => {
  const { t } = env;
  const applied = await t.json("POST", "/api/plugins/custom-objects/schema/apply/", {
    body: {
      schema: {
        schema_version: "1",
        types: [
          { name: "circuit", slug: "circuit", fields: [{ id: 1, name: "cid", type: "text" }] },
        ],
      },
    },
  });
  expect(applied.status).toBe(200);
  const base = "/api/plugins/custom-objects/circuit/";
  // the round trip carrying the custom object table's own write (its name is co_<type id>)
  const writesTable = (verb: string) => (_path: string, body: string) =>
    new RegExp(`${verb} \\\\"co_\\d+\\\\"`, "i").test(body);
  const lost = async (verb: string, method: string, path: string, body?: unknown) => {
    proxy.inject({ kind: "late", match: writesTable(verb), times: 1 });
    const r = await answered(`${method} ${path}`, t.json(method, path, body ? { body } : {}));
    const hits = proxy.hits;
    proxy.clear();
    expect({ verb, hits }).toEqual({ verb, hits: 1 });
    expect503(r, "write_outcome_unknown");
  };
  await lost("insert into", "POST", base, { cid: "C-1" });
  const made = await t.json("GET", `${base}?cid=C-1`);
  expect(made.body.count).toBe(1);
  const id = made.body.results[0].id;
  await lost("update", "PATCH", `${base}${id}/`, { cid: "C-2" });
  expect((await t.json("GET", `${base}${id}/`)).body.cid).toBe("C-2");
  await lost("delete from", "DELETE", `${base}${id}/`);
  expect((await t.json("GET", `${base}${id}/`)).status).toBe(404);
});
