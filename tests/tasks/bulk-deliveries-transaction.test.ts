/**
 * An interactive write transaction's event deliveries are set-based too (decision 0201): a local
 * bulk create of custom objects (`logChanges`) wrote two statements per (change, webhook); now two
 * per document of deliveries per batch of change records. The same jobs and outbox rows: one per
 * (change, webhook), in change order then rule order, each payload naming its change record.
 * Statements are counted on the transaction's libSQL connection, never milliseconds.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { asc, gt } from "drizzle-orm";
import type { Database, Executor } from "../../src/db/client";
import { jobs, outbox } from "../../src/db/schema";
import { makeTasksEnv, type TasksEnv, hookAndRule } from "./harness";

const OBJECTS = 310;
const WEBHOOKS = 3;

let env: TasksEnv;
beforeAll(async () => {
  env = await makeTasksEnv();
}, 60_000);
afterAll(() => env?.close());

/** Statements writing `jobs` or `outbox` that `work` sends on interactive transactions. */
async function deliveryStatements(db: Database, work: () => Promise<unknown>): Promise<number> {
  const transaction = db.transaction;
  let n = 0;
  const count = (text: string) => {
    if (/^\s*insert into "(jobs|outbox)"/i.test(text)) n++;
  };
  db.transaction = ((fn: (tx: Executor) => Promise<unknown>) =>
    transaction((tx) => {
      // the libSQL transaction under Drizzle's (driver-internals.ts reads the same field)
      const under = (tx as unknown as { session: { tx: any } }).session.tx;
      if (!under?.execute) throw new Error("no libSQL transaction under the Drizzle one");
      const execute = under.execute;
      under.execute = (stmt: { sql: string } | string, ...rest: unknown[]) => {
        count(typeof stmt === "string" ? stmt : stmt.sql);
        return execute.call(under, stmt, ...rest);
      };
      return fn(tx);
    })) as typeof db.transaction;
  try {
    await work();
  } finally {
    db.transaction = transaction;
  }
  return n;
}

test("a bulk create of custom objects writes its deliveries as a few statements: the same rows", async () => {
  const { t } = env;
  const cot = await t.json("POST", "/api/plugins/custom-objects/custom-object-types/", {
    body: { name: "setbased", slug: "setbased" },
  });
  expect(cot.status).toBe(201);
  const field = await t.json("POST", "/api/plugins/custom-objects/custom-object-type-fields/", {
    body: { custom_object_type: cot.body.id, name: "name", type: "text", primary: true },
  });
  expect(field.status).toBe(201);
  const pairs: Array<{ hook: number; rule: number }> = [];
  for (let i = 0; i < WEBHOOKS; i++) {
    const { hook, rule } = await hookAndRule(t, {
      url: "http://127.0.0.1:9/",
      objectTypes: ["custom_objects.setbased"],
      eventTypes: ["object_created"],
    });
    pairs.push({ hook: hook.id, rule: rule.id });
  }
  const db = t.deps.db;
  const lastJob = Number((await db.orm.select({ id: jobs.id }).from(jobs)).at(-1)?.id ?? 0);
  let requestId = "";
  const statements = await deliveryStatements(db, async () => {
    const r = await t.json("POST", "/api/plugins/custom-objects/setbased/", {
      body: Array.from({ length: OBJECTS }, (_, i) => ({ name: `set-${i}` })),
    });
    expect(r.status).toBe(201);
    requestId = r.res.headers.get("x-request-id")!;
  });
  // two batches of change records (250 and 60), each one document: a jobs and an outbox statement
  expect(statements).toBe(4);

  const changes = (
    await db.client.execute({
      sql: "SELECT id FROM object_changes WHERE request_id = ? ORDER BY id",
      args: [requestId],
    })
  ).rows.map((c) => Number((c as unknown as { id: number }).id));
  expect(changes.length).toBe(OBJECTS);
  const written = await db.orm
    .select()
    .from(outbox)
    .where(gt(outbox.jobId, lastJob))
    .orderBy(asc(outbox.id));
  const writtenJobs = await db.orm
    .select()
    .from(jobs)
    .where(gt(jobs.id, lastJob))
    .orderBy(asc(jobs.id));
  // change order, then rule order; one delivery per (change, webhook)
  const expected = changes.flatMap((change) =>
    pairs.map(({ hook, rule }) => ({ webhook: hook, change, event_rule: rule, model: "setbased" })),
  );
  expect(written.map((o) => o.payload)).toEqual(expected);
  // the payload's text keeps the keys in that order (what the relay sends)
  const text = await db.client.execute({
    sql: "SELECT payload FROM outbox WHERE id = ?",
    args: [written[0]!.id],
  });
  expect(String((text.rows[0] as unknown as { payload: string }).payload)).toBe(
    JSON.stringify(expected[0]),
  );
  expect(written.map((o) => o.jobId)).toEqual(writtenJobs.map((j) => j.id));
  expect(writtenJobs.map((j) => [j.name, j.status, j.objectId, j.userId])).toEqual(
    expected.map((e) => ["webhook.deliver", "pending", e.webhook, null]),
  );
  expect(new Set(written.map((o) => o.key)).size).toBe(expected.length);
  for (const o of written)
    expect(o.key).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
}, 60_000);
