/**
 * Group commit (decision 0053): concurrent writes share one transaction, each in a savepoint of
 * its own — so each stays all-or-nothing for its client, with its change record, and a failing
 * one (a unique clash, a bulk with a bad item) takes nothing of the others with it.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { TransactionMode } from "@libsql/client";
import { makeTestApp, type TestApp } from "../helpers/app";
import { addField, CO, makeCot } from "../custom-objects/fixtures";

let t: TestApp;
let transactions = 0;
let batches = 0;

beforeAll(async () => {
  t = await makeTestApp();
  const cot = await makeCot(t, "grouped", "grouped");
  await addField(t, cot.id, { name: "title", type: "text", unique: true });
  const client = t.deps.db.client;
  const open = client.transaction.bind(client);
  client.transaction = ((mode?: TransactionMode) => {
    transactions++;
    return open(mode);
  }) as typeof client.transaction;
  const batch = client.batch.bind(client);
  client.batch = ((...args: Parameters<typeof client.batch>) => {
    batches++;
    return batch(...args);
  }) as typeof client.batch;
});
afterAll(() => t.close());

const post = (body: unknown) => t.json("POST", `${CO}/grouped/`, { body });
const changesFor = async (title: string) =>
  (
    (
      await t.json(
        "GET",
        `/api/core/object-changes/?limit=1000&changed_object_type=custom_objects.grouped`,
      )
    ).body.results as Array<{ postchange_data: { title?: string } | null }>
  ).filter((c) => c.postchange_data?.title === title).length;

describe("group commit", () => {
  test("40 concurrent creates: fewer transactions than requests, every good one written with its change record, clashes refused alone", async () => {
    transactions = 0;
    const bodies: unknown[] = Array.from({ length: 40 }, (_, i) => ({
      title: i % 10 === 3 ? "clash" : `t-${i}`,
    }));
    bodies.push([{ title: "bulk-a" }, { title: "bulk-a" }]); // a bulk whose second item clashes with its first
    const answers = await Promise.all(bodies.map(post));
    expect(transactions).toBeLessThan(bodies.length);
    const statuses = answers.map((a) => a.status);
    // Four bodies ask for "clash": exactly one wins.
    expect(statuses.filter((s, i) => i < 40 && i % 10 === 3 && s === 201)).toHaveLength(1);
    expect(statuses.filter((s, i) => i < 40 && i % 10 === 3 && s === 400)).toHaveLength(3);
    expect(statuses.filter((_s, i) => i < 40 && i % 10 !== 3).every((s) => s === 201)).toBe(true);
    expect(statuses[40]).toBe(400);
    const list = (await t.json("GET", `${CO}/grouped/?limit=1000`)).body as {
      count: number;
      results: Array<{ title: string }>;
    };
    expect(list.count).toBe(37);
    expect(list.results.filter((r) => r.title === "bulk-a")).toHaveLength(0);
    expect(await changesFor("clash")).toBe(1);
    expect(await changesFor("t-0")).toBe(1);
    expect(await changesFor("bulk-a")).toBe(0);
  });

  test("a lone write still runs on its own (one write batch; no transaction since decision 0090)", async () => {
    transactions = 0;
    batches = 0;
    expect((await post({ title: "alone" })).status).toBe(201);
    expect(transactions).toBe(0);
    expect(batches).toBe(1);
  });
});

describe("group commit of write batches (staged host-model writes, decision 0083)", () => {
  const site = (slug: string) =>
    t.json("POST", "/api/dcim/sites/", { body: { name: `n-${slug}`, slug } });
  const siteChanges = async (slug: string) =>
    (
      (await t.json("GET", "/api/core/object-changes/?limit=1000&changed_object_type=dcim.site"))
        .body.results as Array<{ postchange_data: { slug?: string } | null }>
    ).filter((c) => c.postchange_data?.slug === slug).length;

  test("40 concurrent creates share a few batches", async () => {
    batches = 0;
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => site(`own-${i}`)));
    expect(answers.every((a) => a.status === 201)).toBe(true);
    expect(batches).toBeLessThan(10);
  });

  test("40 concurrent creates, four with one slug: each written with its change record, the clashes refused alone", async () => {
    batches = 0;
    const slugs = Array.from({ length: 40 }, (_, i) => (i % 10 === 3 ? "same" : `s-${i}`));
    const answers = await Promise.all(slugs.map(site));
    if (process.env.GROUP_LOG) console.log("batches", batches);
    // a joint batch that fails is halved until the clashing members stand alone
    expect(batches).toBeLessThan(slugs.length);
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s, i) => i % 10 === 3 && s === 201)).toHaveLength(1);
    const refused = answers.filter((a, i) => i % 10 === 3 && a.status === 400);
    expect(refused).toHaveLength(3);
    for (const r of refused) expect(r.body.slug).toBeDefined();
    expect(statuses.filter((_s, i) => i % 10 !== 3).every((s) => s === 201)).toBe(true);
    // each answer is its own object, with its own id and change record
    const ids = answers.filter((a) => a.status === 201).map((a) => a.body.id as number);
    expect(new Set(ids).size).toBe(37);
    for (const a of answers.filter((x) => x.status === 201)) {
      const stored = await t.json("GET", `/api/dcim/sites/${a.body.id}/`);
      // the answer, built before SQLite gave the id, is the object as a GET reads it
      expect(a.body).toEqual(stored.body);
      expect(await siteChanges(a.body.slug)).toBe(1);
    }
    expect(await siteChanges("same")).toBe(1);
  });
});
