/**
 * A retargeting schema apply (decision 0142) on a local file and on a remote database: the same
 * gate, the same answers and rows; remotely reads and one batch (≤ 4 round trips), no
 * transaction.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { servicesOf } from "../../src/app";
import { makeTestApp, type TestApp } from "../helpers/app";
import { type RemoteDb, startRemoteDb } from "../helpers/remote-db";
import { waitFor } from "../helpers/wait";
import { retargetScenario } from "./apply-retarget";
import { swapScenario } from "./apply-swap";
import { addedKeyScenario } from "./apply-added-key";

const CO = "/api/plugins/custom-objects";
const SCHEMA = `${CO}/schema`;

let db: RemoteDb;
let local: TestApp;
let remote: TestApp;

beforeAll(async () => {
  db = await startRemoteDb("apply-retarget");
  local = await makeTestApp();
  remote = await makeTestApp({ DATABASE_URL: db.url });
});
afterAll(async () => {
  await local.close();
  await remote.close();
  await db.stop();
});

const jsonOf = (t: TestApp) => (method: string, path: string, body?: unknown) =>
  t.json(method, path, { body });

test("a retargeting apply: gated, then applied with its links cleared — alike locally and remotely, no transaction remotely", async () => {
  const onLocal = await retargetScenario(jsonOf(local), "rt");
  const database = servicesOf(remote.app).db;
  const transaction = database.transaction;
  let transactions = 0;
  database.transaction = (work) => {
    transactions++;
    return transaction(work);
  };
  try {
    const onRemote = await retargetScenario(jsonOf(remote), "rt");
    expect(onRemote).toEqual(onLocal);
  } finally {
    database.transaction = transaction;
  }
  expect(transactions).toBe(0);
  expect(onLocal.after).toEqual({ home: null, links: [], any: null, colour: "a" });
  expect(onLocal.flipped.status).toBe(400);
});

test("a retarget racing a link made meanwhile: the batch's guard fails, the apply reruns to its gate (409), nothing applied", async () => {
  const json = jsonOf(remote);
  const site = await json("POST", "/api/dcim/sites/", { name: "race s", slug: "race-s" });
  const bundle = (target: string) => ({
    schema: {
      schema_version: "1",
      types: [
        {
          name: "race_other",
          slug: "race_other",
          fields: [{ id: 1, name: "label", type: "text" }],
        },
        {
          name: "race_holder",
          slug: "race_holder",
          fields: [{ id: 1, name: "home", type: "object", related_object_type: target }],
        },
      ],
    },
  });
  expect((await json("POST", `${SCHEMA}/apply/`, bundle("dcim/site"))).status).toBe(200);
  db.proxy.hold((statements) => statements.some((s) => /SELECT n = 0 FROM/.test(s)));
  try {
    const applying = json("POST", `${SCHEMA}/apply/`, bundle("custom-objects/race_other"));
    await waitFor(() => db.proxy.held >= 1, { message: () => `${db.proxy.held} batches held` });
    const linked = await json("POST", `${CO}/race_holder/`, { home: site.body.id });
    expect(linked.status, JSON.stringify(linked.body)).toBe(201);
    db.proxy.release();
    const applied = await applying;
    expect(applied.status, JSON.stringify(applied.body)).toBe(409);
    expect(applied.body.destructive_changes).toEqual([
      expect.objectContaining({ field: "home", reason: "link_target_changed", rows: 1 }),
    ]);
  } finally {
    db.proxy.release();
  }
  const type = (await json("GET", `${CO}/custom-object-types/?slug=race_holder`)).body.results[0];
  expect(type.fields[0].related_object_type.model).toBe("site");
  expect((await json("GET", `${CO}/race_holder/`)).body.results[0].home.id).toBe(site.body.id);
});

test("an apply swapping two fields' names: values follow their fields, alike locally and remotely, no transaction remotely (0142)", async () => {
  const onLocal = await swapScenario(jsonOf(local), "sw");
  const database = servicesOf(remote.app).db;
  const transaction = database.transaction;
  let transactions = 0;
  database.transaction = (work) => {
    transactions++;
    return transaction(work);
  };
  try {
    expect(await swapScenario(jsonOf(remote), "sw")).toEqual(onLocal);
  } finally {
    database.transaction = transaction;
  }
  expect(transactions).toBe(0);
  expect(onLocal.renames).toEqual(["left->right", "right->left", "right->left", "left->right"]);
});

test("a partial key and a check reading a field the apply adds: rows read its default — the gate, 400s and keys alike locally and remotely, no transaction remotely (0142)", async () => {
  const onLocal = await addedKeyScenario(jsonOf(local), "ak");
  const database = servicesOf(remote.app).db;
  const transaction = database.transaction;
  let transactions = 0;
  database.transaction = (work) => {
    transactions++;
    return transaction(work);
  };
  try {
    expect(await addedKeyScenario(jsonOf(remote), "ak")).toEqual(onLocal);
  } finally {
    database.transaction = transaction;
  }
  expect(transactions).toBe(0);
  expect(onLocal.gated).toEqual([
    409,
    [expect.objectContaining({ reason: "unique_over_duplicates", rows: 2 })],
  ]);
  expect(onLocal.keyed[0]).toBe(400);
  expect(onLocal.keyed[1][0].message).toStartWith("2 existing row(s) matching the condition");
  expect(onLocal.checkGated).toEqual([
    409,
    [expect.objectContaining({ reason: "check_over_violations", rows: 3 })],
  ]);
  expect(onLocal.checked[0]).toBe(400);
  expect(onLocal.unchanged).toEqual(["code"]);
  expect(onLocal.built).toEqual([200, "ok"]);
  expect([onLocal.one, onLocal.clash[0], onLocal.low[0]]).toEqual([201, 400, 400]);
});
