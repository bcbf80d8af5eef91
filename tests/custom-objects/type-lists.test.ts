/**
 * Lists of type and field updates and deletes (decision 0142): one read phase and one atomic
 * batch on a local file and on a remote database, the same answers and rows on both; no
 * transaction on either. A list that loses a race to another writer: 409, nothing written.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { servicesOf } from "../../src/app";
import { makeTestApp, type TestApp } from "../helpers/app";
import { type RemoteDb, startRemoteDb } from "../helpers/remote-db";
import { typeListsScenario } from "./type-lists-scenario";

let db: RemoteDb;
let local: TestApp;
let remote: TestApp;

beforeAll(async () => {
  db = await startRemoteDb("type-lists");
  local = await makeTestApp();
  remote = await makeTestApp({ DATABASE_URL: db.url });
});
afterAll(async () => {
  await local.close();
  await remote.close();
  await db.stop();
});

/** Counts the transactions `t`'s database opens while `work` runs. */
async function transactionsDuring<T>(t: TestApp, work: () => Promise<T>) {
  const database = servicesOf(t.app).db;
  const original = database.transaction;
  let n = 0;
  database.transaction = (work) => {
    n++;
    return original(work);
  };
  try {
    return { result: await work(), transactions: n };
  } finally {
    database.transaction = original;
  }
}

const jsonOf = (t: TestApp) => (method: string, path: string, body?: unknown) =>
  t.json(method, path, { body });

test("lists of type and field updates and deletes: the same answers and rows locally and remotely, no transaction", async () => {
  const onLocal = await transactionsDuring(local, () => typeListsScenario(jsonOf(local), "tl"));
  const onRemote = await transactionsDuring(remote, () => typeListsScenario(jsonOf(remote), "tl"));
  expect(onRemote.result).toEqual(onLocal.result);
  expect(onLocal.transactions).toBe(0);
  expect(onRemote.transactions).toBe(0);
});
