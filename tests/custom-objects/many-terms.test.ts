/**
 * Reads whose SQL grows a term per linking field or per related model (decision 0161): the same
 * answers on a local file, a remote database and Cloudflare D1 (miniflare's, where a compound
 * SELECT of more than five terms is refused); linked-objects still one round trip remote and on D1.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import type { TestApp } from "../helpers/app";
import type { D1App } from "../helpers/d1-app";
import type { RemoteDb } from "../helpers/remote-db";
import { jsonOf, startThreeBackends, type ThreeBackends } from "../helpers/three-backends";
import {
  constrainedAddsScenario,
  constrainedReadsScenario,
  expectManyTermsAnswers,
  manyTermsScenario,
} from "./many-terms-scenario";
import { settleBeforeCounting } from "../helpers/settle";

// wrangler's migration run takes 10–30 s on a busy machine
setDefaultTimeout(120_000);

let d1: D1App;
let db: RemoteDb;
let local: TestApp;
let remote: TestApp;
let apps: ThreeBackends;

beforeAll(async () => {
  apps = await startThreeBackends("many-terms");
  ({ d1, db, local, remote } = apps);
});
afterAll(() => apps?.stop());

test("linked-objects of a site linked from seven fields, objects pointing at seven models: the same answers locally, remotely and on D1", async () => {
  const onLocal = await manyTermsScenario(jsonOf(local), "mt");
  expectManyTermsAnswers(onLocal);
  const onRemote = await manyTermsScenario(jsonOf(remote), "mt");
  expect(onRemote).toEqual(onLocal);
  const onD1 = await manyTermsScenario((m, p, b) => d1.json(m, p, b), "mt");
  expect(onD1).toEqual(onLocal);
});

/** The linked-objects read of the scenario's site (its id looked up by slug). */
async function linkedPath(json: (m: string, p: string) => Promise<{ body: any }>) {
  const site = (await json("GET", "/api/dcim/sites/?slug=mt-linked")).body.results[0].id;
  return `/api/plugins/custom-objects/linked-objects/?object_type=dcim.site&object_id=${site}`;
}

test("linked-objects of seven fields stays one round trip, remotely and on D1 (warm caches)", async () => {
  const remotePath = await linkedPath((m, p) => remote.json(m, p));
  // the deferred search flush and the token's use run off earlier requests: not this one's
  await settleBeforeCounting(remote.app, () => remote.json("GET", "/api/status/"));
  db.proxy.reset();
  expect((await remote.json("GET", remotePath)).body.count).toBe(9);
  expect(db.proxy.count).toBe(1);
  const d1Path = await linkedPath((m, p) => d1.json(m, p));
  await settleBeforeCounting(d1.app, () => d1.json("GET", "/api/status/"));
  const before = apps.d1Reads;
  expect((await d1.json("GET", d1Path)).body.count).toBe(9);
  expect(apps.d1Reads - before).toBe(1);
});

test("a constrained caller's apply adding seven types, one outside: the same 403 locally, remotely and on D1", async () => {
  const as = (t: TestApp) => (method: string, path: string, body?: unknown, token?: string) =>
    t.json(method, path, { body, ...(token ? { token } : {}) });
  const onLocal = await constrainedAddsScenario(as(local), "ca");
  expect(onLocal.inside.status).toBe(200);
  expect(onLocal.outside.status).toBe(403);
  expect(onLocal.outside.detail).toContain("bad_ca");
  expect(onLocal.slugs).toHaveLength(6);
  expect(await constrainedAddsScenario(as(remote), "ca")).toEqual(onLocal);
  expect(await constrainedAddsScenario(d1.json, "ca")).toEqual(onLocal);
});

test("a constrained caller's reads of objects pointing at seven models: the same hidden and shown objects locally, remotely and on D1 (decision 0165)", async () => {
  const as = (t: TestApp) => (method: string, path: string, body?: unknown, token?: string) =>
    t.json(method, path, { body, ...(token ? { token } : {}) });
  const onLocal = await constrainedReadsScenario(as(local), "cr");
  expect(onLocal.got).toEqual({
    fields: ["hidden", "hidden", "hidden", "hidden", "cr tag", "x1", "hidden"],
    all: [
      "custom_objects.cr_px:x1",
      "custom_objects.cr_py:hidden",
      "dcim.device:hidden",
      "dcim.site:hidden",
      "extras.tag:cr tag",
      "ipam.prefix:hidden",
      "tenancy.tenant:hidden",
    ],
  });
  expect(onLocal.listed).toEqual([onLocal.got]);
  expect(onLocal.again).toEqual(onLocal.got);
  expect(await constrainedReadsScenario(as(remote), "cr")).toEqual(onLocal);
  expect(await constrainedReadsScenario(d1.json, "cr")).toEqual(onLocal);
});
