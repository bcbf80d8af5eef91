/**
 * A retargeting schema apply (decision 0142) on a local file and on a remote database: the same
 * gate, the same answers and rows; remotely reads and one batch (≤ 4 round trips), no
 * transaction.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { servicesOf } from "../../src/app";
import { makeTestApp, type TestApp } from "../helpers/app";
import { type RemoteDb, startRemoteDb } from "../helpers/remote-db";
import { retargetScenario } from "./apply-retarget";

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
