/**
 * The Worker (real workerd) over a remote database whose link fails after start-up (decision
 * 0202): a hung or garbled round trip is a 503 `database_unavailable` once `DATABASE_TIMEOUT_MS`
 * passes, a create whose answer never came is a 503 `write_outcome_unknown` though it committed,
 * and the isolate serves again by itself when the link does.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { startFaultProxy, type FaultProxy } from "../helpers/fault-proxy";
import { TIMED_OUT, within } from "../helpers/wait";
import {
  startRemoteDatabase,
  startWorker,
  type RemoteDatabase,
  type RunningWorker,
} from "../helpers/worker";

setDefaultTimeout(120_000);
// A failure bound on one answer (a hung request), never asserted as a time.
const HUNG = 30_000;

let db: RemoteDatabase;
let proxy: FaultProxy;
let w: RunningWorker;
let auth: Record<string, string>;

beforeAll(async () => {
  db = await startRemoteDatabase();
  proxy = await startFaultProxy(db.url);
  w = await startWorker({
    bindings: { DATABASE_URL: proxy.url, DATABASE_TIMEOUT_MS: "1500" },
    name: "database-link",
  });
  auth = { authorization: `Token ${await db.superuserToken()}` };
});
afterAll(async () => {
  proxy?.clear();
  await w?.stop();
  await proxy?.stop();
  await db?.stop();
});

async function call(path: string, init: RequestInit = {}) {
  const res = await within(
    w.fetch(path, { ...init, headers: { ...auth, "content-type": "application/json" } }),
    HUNG,
  );
  if (res === TIMED_OUT) throw new Error(`${path}: no answer within ${HUNG} ms (hung)`);
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null, res };
}

test("a hung and a garbled database answer 503 database_unavailable; the isolate recovers", async () => {
  expect((await call("/api/dcim/sites/")).status).toBe(200);
  for (const kind of ["hang", "malformed"] as const) {
    proxy.inject({ kind });
    const r = await call("/api/dcim/sites/");
    proxy.clear();
    expect({ kind, status: r.status, error: r.body.error }).toEqual({
      kind,
      status: 503,
      error: "database_unavailable",
    });
    expect(r.res.headers.get("retry-after")).toMatch(/^\d+$/);
    expect((await call("/api/dcim/sites/")).status).toBe(200);
  }
});

test("a create whose answer never came: 503 write_outcome_unknown, and the site is there", async () => {
  proxy.inject({
    kind: "late",
    match: (_path, body) => body.includes('insert into \\"sites\\"'),
    times: 1,
  });
  const r = await call("/api/dcim/sites/", {
    method: "POST",
    body: JSON.stringify({ name: "Edge", slug: "edge" }),
  });
  expect(proxy.hits).toBe(1);
  proxy.clear();
  expect({ status: r.status, error: r.body.error }).toEqual({
    status: 503,
    error: "write_outcome_unknown",
  });
  expect((await call("/api/dcim/sites/?slug=edge")).body.count).toBe(1);
});
