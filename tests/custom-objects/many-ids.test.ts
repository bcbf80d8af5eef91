/**
 * Writes naming more distinct objects of one model than D1 takes bound values or expression
 * depth (decision 0169): the same answers on a local file, a remote database and Cloudflare D1
 * (miniflare's), the second of each write proving the referenced objects' cached forms.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { type D1App, startD1App } from "../helpers/d1-app";
import { type RemoteDb, startRemoteDb } from "../helpers/remote-db";
import { MANY, manyIdsScenario } from "./many-ids-scenario";

// wrangler's migration run takes 10–30 s on a busy machine
setDefaultTimeout(180_000);

let d1: D1App;
let db: RemoteDb;
let local: TestApp;
let remote: TestApp;

beforeAll(async () => {
  d1 = await startD1App("many-ids");
  db = await startRemoteDb("many-ids");
  local = await makeTestApp();
  remote = await makeTestApp({ DATABASE_URL: db.url });
});
afterAll(async () => {
  await local?.close();
  await remote?.close();
  await db?.stop();
  await d1?.stop();
});

const jsonOf = (t: TestApp) => (method: string, path: string, body?: unknown) =>
  t.json(method, path, { body });

test(`writes naming ${MANY} sites, tenants or devices each: the same answers locally, remotely and on D1`, async () => {
  const onLocal = await manyIdsScenario(jsonOf(local), "mi");
  for (const step of [...onLocal.patched, ...onLocal.created, ...onLocal.many, ...onLocal.updated])
    expect(step.error).toBeNull();
  expect(onLocal.created[1]!.objects[MANY - 1]).toBe(`mi 2-149|mi site 149|||`);
  expect(onLocal.updated[0]!.objects[0]).toBe(`mi 2-000|mi site 001|||`);
  expect(onLocal.listed).toHaveLength(2 * MANY + 2);
  const onRemote = await manyIdsScenario(jsonOf(remote), "mi");
  expect(onRemote).toEqual(onLocal);
  const onD1 = await manyIdsScenario((m, p, b) => d1.json(m, p, b), "mi");
  expect(onD1).toEqual(onLocal);
});
