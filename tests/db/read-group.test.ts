/**
 * Reads on a remote database that start in the same turn share one round trip (decision 0098):
 * concurrent GETs each answer their own object in fewer requests than there are GETs; a write
 * committed before they began is seen by all of them; a read whose statement fails fails alone.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createClient } from "@libsql/client";
import { sql } from "drizzle-orm";
import { libsqlDatabase } from "../../src/db/libsql";
import { sites } from "../../src/db/schema";
import { BASE, makeTestApp, type TestApp } from "../helpers/app";
import { anotherInstance } from "../helpers/instances";
import type { CountingProxy } from "../helpers/counting-proxy";
import { type RemoteDb, startRemoteDb } from "../helpers/remote-db";
import { settleBeforeCounting } from "../helpers/settle";

let remote: RemoteDb;
let proxy: CountingProxy;
let a: TestApp;
/** Another app on the same database, with caches of its own (another process or isolate). */
let b: Awaited<ReturnType<typeof anotherInstance>>;
const siteIds: number[] = [];
const READERS = 12;

beforeAll(async () => {
  remote = await startRemoteDb("read-group");
  proxy = remote.proxy;
  a = await makeTestApp({ DATABASE_URL: remote.url });
  b = await anotherInstance(remote.url);
  for (let i = 0; i < READERS; i++) {
    const made = await a.json("POST", "/api/dcim/sites/", {
      body: { name: `site ${i}`, slug: `site-${i}` },
    });
    expect(made.status).toBe(201);
    siteIds.push(made.body.id);
  }
});
afterAll(async () => {
  await b?.close();
  await a?.close();
  await remote.stop();
});

const getAll = (t: TestApp) =>
  Promise.all(siteIds.map((id) => t.json("GET", `/api/dcim/sites/${id}/`)));

const getAllThroughB = () =>
  Promise.all(
    siteIds.map(async (id) => {
      const res = await b.app.request(`${BASE}/api/dcim/sites/${id}/`, {
        headers: { authorization: `Token ${a.admin}` },
      });
      return { status: res.status, body: await res.json() };
    }),
  );

test("concurrent GETs each answer their own object, in fewer round trips than GETs", async () => {
  await getAll(a); // warm the caches
  await settleBeforeCounting(a.app, () => a.json("GET", "/api/status/"), "admin");
  proxy.reset();
  const answers = await getAll(a);
  answers.forEach((r, i) => {
    expect(r.status).toBe(200);
    expect(r.body.id).toBe(siteIds[i]);
    expect(r.body.name).toBe(`site ${i}`);
  });
  expect(proxy.count).toBeLessThan(READERS);
});

test("concurrent GETs with one token: a round trip carries the token's proof once, each GET its row", async () => {
  await getAll(a);
  await settleBeforeCounting(a.app, () => a.json("GET", "/api/status/"), "admin");
  proxy.reset();
  const answers = await getAll(a);
  expect(answers.map((r) => r.body.id)).toEqual(siteIds);
  // the GETs' round trips: each leads with the token's print (the app's background statements
  // may pass the proxy meanwhile)
  const isProof = (q: string) => q.startsWith('select quote("tokens"');
  const trips = proxy.log.filter((trip) => trip.sql.some(isProof));
  const statements = trips
    .flatMap((trip) => trip.sql)
    .filter((q) => !/^(BEGIN|COMMIT|ROLLBACK)\b/.test(q));
  // decision 0122: identical statements of a group are sent once (the token's print), a GET's
  // own row is its own statement
  const proofs = statements.filter(isProof);
  expect(proofs).toHaveLength(trips.length);
  expect(statements.length - proofs.length).toBe(READERS); // a site's row (its tags ride on it)
  expect(trips.length).toBeLessThan(READERS);
});

test("a write committed through another instance before the GETs began is seen by each", async () => {
  await getAllThroughB(); // B's caches hold the old names
  for (const [i, id] of siteIds.entries()) {
    const r = await a.json("PATCH", `/api/dcim/sites/${id}/`, { body: { name: `renamed ${i}` } });
    expect(r.status).toBe(200);
  }
  // the token's use, recorded off B's requests once a minute, is not the GETs'
  const viaB = async () =>
    b.app.request(`${BASE}/api/status/`, { headers: { authorization: `Token ${a.admin}` } });
  await settleBeforeCounting(b.app, viaB, "admin");
  proxy.reset();
  const answers = await getAllThroughB();
  answers.forEach((r, i) => {
    expect(r.status).toBe(200);
    expect(r.body.name).toBe(`renamed ${i}`);
  });
  expect(proxy.count).toBeLessThan(READERS);
});

test("a read whose statement fails fails alone; the reads grouped with it answer", async () => {
  const db = libsqlDatabase(createClient({ url: proxy.url }), "remote");
  try {
    proxy.reset();
    const reads = [
      db.read([
        db.orm.select({ id: sites.id }).from(sites).where(sql`${sites.id} = ${siteIds[0]}`),
      ]),
      db.read([db.orm.all(sql`SELECT * FROM no_such_table`)]),
      db.read([
        db.orm.select({ id: sites.id }).from(sites).where(sql`${sites.id} = ${siteIds[1]}`),
        db.orm.all(sql`SELECT count(*) AS n FROM sites`),
      ]),
    ];
    const [first, broken, third] = await Promise.allSettled(reads);
    expect(first).toEqual({ status: "fulfilled", value: [[{ id: siteIds[0] }]] });
    expect(broken?.status).toBe("rejected");
    expect(third?.status).toBe("fulfilled");
    const [rows, count] = (third as PromiseFulfilledResult<unknown[]>).value as [
      Array<{ id: number }>,
      Array<{ n: number }>,
    ];
    expect(rows).toEqual([{ id: siteIds[1]! }]);
    expect(Number(count[0]!.n)).toBe(READERS);
    // one request for the group, then one for each read on its own (the app of the tests before
    // may still send background statements through the proxy: only this test's are counted)
    const ours = proxy.log.filter((r) => r.sql.some((q) => /\bsites\b|no_such_table/.test(q)));
    expect(ours.length).toBe(1 + reads.length);
  } finally {
    await db.close();
  }
});
