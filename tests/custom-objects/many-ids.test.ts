/**
 * Writes naming more distinct objects of one model than D1 takes bound values or expression
 * depth (decision 0169): the same answers on a local file, a remote database and Cloudflare D1
 * (miniflare's), the second of each write proving the referenced objects' cached forms.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import type { TestApp } from "../helpers/app";
import type { D1App } from "../helpers/d1-app";
import type { RemoteDb } from "../helpers/remote-db";
import { jsonOf, startThreeBackends, type ThreeBackends } from "../helpers/three-backends";
import { MANY, manyIdsScenario } from "./many-ids-scenario";
import { settleBeforeCounting } from "../helpers/settle";

// wrangler's migration run takes 10–30 s on a busy machine
setDefaultTimeout(180_000);

let d1: D1App;
let db: RemoteDb;
let local: TestApp;
let remote: TestApp;
let apps: ThreeBackends;

beforeAll(async () => {
  apps = await startThreeBackends("many-ids");
  ({ d1, db, local, remote } = apps);
});
afterAll(() => apps?.stop());

test(`writes naming ${MANY} sites, tenants or devices each: the same answers locally, remotely and on D1`, async () => {
  const onLocal = await manyIdsScenario(jsonOf(local), "mi");
  for (const step of [...onLocal.patched, ...onLocal.created, ...onLocal.many, ...onLocal.updated])
    expect(step.error).toBeNull();
  expect(onLocal.created[1]!.objects[MANY - 1]).toBe(`mi 2-149|mi site 149|||`);
  expect(onLocal.updated[0]!.objects[0]).toBe(`mi 2-000|mi site 001|||`);
  expect(onLocal.many[2]!.objects[0]).toContain(",mi renamed,");
  expect(onLocal.listed).toHaveLength(2 * MANY + 3);
  const onRemote = await manyIdsScenario(jsonOf(remote), "mi");
  expect(onRemote).toEqual(onLocal);
  const onD1 = await manyIdsScenario((m, p, b) => d1.json(m, p, b), "mi");
  expect(onD1).toEqual(onLocal);
});

test(`a create naming ${MANY} cached sites stays one round trip, remotely and on D1 (decision 0107)`, async () => {
  const path = "/api/plugins/custom-objects/mi_ref/";
  const sitesOf = async (json: (m: string, p: string) => Promise<{ body: any }>) =>
    (await json("GET", "/api/dcim/sites/?q=mi&limit=1000")).body.results.map((s: any) => s.id);
  const remoteSites = await sitesOf((m, p) => remote.json(m, p));
  expect(remoteSites).toHaveLength(MANY);
  const body = (n: number, sites: number[]) => ({ name: `mi trip ${n}`, sites });
  await remote.json("POST", path, { body: body(0, remoteSites) });
  // the warm-up's deferred search-index flush and token use would land in the count (loaded machine)
  await settleBeforeCounting(remote.app, () => remote.json("GET", "/api/status/"));
  db.proxy.reset();
  expect((await remote.json("POST", path, { body: body(1, remoteSites) })).status).toBe(201);
  expect(db.proxy.count).toBe(1);
  const d1Sites = await sitesOf(d1.json);
  await d1.json("POST", path, body(0, d1Sites));
  await settleBeforeCounting(d1.app, () => d1.json("GET", "/api/status/"));
  const before = apps.d1Reads;
  expect((await d1.json("POST", path, body(1, d1Sites))).status).toBe(201);
  expect(apps.d1Reads - before).toBe(0);
});
