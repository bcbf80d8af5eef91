/**
 * Issue 30 items 2 and 3: the outbox relays by sequence and retention keeps what a live job
 * needs, whatever the clock says (an injected clock: stored times two hours ahead of it, a prune
 * that believes it is 100 days later); and retention deletes in bounded batches with a turn of
 * the event loop between them. Real libSQL file, real redis-server behind the Upstash bridge.
 */
import { afterAll, beforeAll, beforeEach, expect, test } from "bun:test";
import { isNull, sql } from "drizzle-orm";
import { servicesOf } from "../../src/app";
import { WEBHOOK_TASK } from "../../src/core/events/dispatch";
import { jobs, objectChanges, outbox } from "../../src/db/schema";
import { createUpstashRedis } from "../../src/services/redis";
import { recordOutbox } from "../../src/services/tasks/outbox";
import { pruneExpired, RETENTION_BATCH } from "../../src/services/tasks/retention";
import { startRedisBridge, type RedisBridge } from "../../tools/redis-bridge";
import { makeTestApp, type TestApp } from "../helpers/app";
import { startRedisProcess, type RedisProcess } from "../helpers/redis-process";

const DAY = 86_400_000;
let redis: RedisProcess;
let bridge: RedisBridge;
let t: TestApp;
let client: ReturnType<typeof createUpstashRedis>;

beforeAll(async () => {
  redis = await startRedisProcess();
  const token = `clock-${crypto.randomUUID()}`;
  bridge = await startRedisBridge({ redisUrl: redis.url, token });
  client = createUpstashRedis({ url: bridge.url, token }, { timeoutMs: 1_000 });
  t = await makeTestApp({}, { redis: { tasks: client } });
});
afterAll(async () => {
  await client.close();
  await t.close();
  await bridge.stop();
  await redis.close();
});
beforeEach(async () => {
  for (const table of [objectChanges, outbox, jobs]) await t.deps.db.orm.delete(table);
});

const db = () => t.deps.db;
const at = (ms: number) => new Date(ms).toISOString();

async function changeRecord(time: string): Promise<number> {
  const [row] = await db()
    .orm.insert(objectChanges)
    .values({ time, action: "create", changedObjectTypeId: 1, changedObjectId: 1, objectRepr: "x" })
    .returning({ id: objectChanges.id });
  return row!.id;
}

/** A pending webhook delivery of change `change`, as dispatch writes it. */
const delivery = (change: number) =>
  recordOutbox(db().orm, db().orm, {
    name: WEBHOOK_TASK,
    payload: { webhook: 1, change, event_rule: 1, model: "site" },
    maxAttempts: 3,
    userId: null,
  });

test("rows written while the clock ran two hours ahead are relayed at the first pass", async () => {
  for (let i = 0; i < 30; i++) await delivery(i + 1);
  // The clock stepped back two hours since they were written.
  await db()
    .orm.update(outbox)
    .set({ created: at(Date.now() + 2 * 3_600_000) });
  const queue = servicesOf(t.app).tasks!;
  // A process's first relay pass (as the worker runs it after a restart): every waiting row.
  expect(await queue.outbox.relayPending()).toBe(30);
  expect(await db().orm.select().from(outbox).where(isNull(outbox.relayed))).toEqual([]);
  expect(await client.llen(queue.keys.ready)).toBe(30);
  await client.del(queue.keys.ready);
});

test("the relay loop takes a row at the pass after the one that first saw it, by sequence", async () => {
  const queue = servicesOf(t.app).tasks!;
  await queue.outbox.relayPending(); // the loop's earlier pass
  await delivery(1); // committed after it: its own relay after commit is the first to try
  expect(await queue.outbox.relayPending()).toBe(0);
  expect(await queue.outbox.relayPending()).toBe(1); // the next pass takes it, whatever its time says
  await client.del(queue.keys.ready);
});

test("a prune 100 days ahead keeps every change record a pending delivery needs", async () => {
  const needed: number[] = [];
  for (let i = 0; i < 30; i++) {
    const id = await changeRecord(at(Date.now()));
    await delivery(id);
    needed.push(id);
  }
  const unneeded = await changeRecord(at(Date.now()));
  const result = await pruneExpired(
    db(),
    { changelogDays: 90, jobDays: 90 },
    { now: Date.now() + 100 * DAY },
  );
  expect(result.changes).toBe(1);
  const left = await db().orm.select({ id: objectChanges.id }).from(objectChanges);
  expect(left.map((r) => r.id).sort((a, b) => a - b)).toEqual(needed);
  expect(left.some((r) => r.id === unneeded)).toBe(false);
  // Once the deliveries finish, their records age out as usual.
  await db()
    .orm.update(jobs)
    .set({ status: "completed", completed: at(Date.now()) });
  await pruneExpired(db(), { changelogDays: 90, jobDays: 0 }, { now: Date.now() + 100 * DAY });
  expect(await db().orm.select().from(objectChanges)).toEqual([]);
});

/** How many DELETE statements the database client is sent while `fn` runs. */
async function deletesDuring(fn: () => Promise<void>): Promise<number> {
  const c = (db() as unknown as { client: Record<string, (...a: any[]) => any> }).client;
  const orig = { execute: c.execute!, batch: c.batch! };
  let n = 0;
  const count = (stmt: unknown) => {
    const text = typeof stmt === "string" ? stmt : String((stmt as { sql?: unknown })?.sql ?? "");
    if (/^\s*DELETE\b/i.test(text)) n++;
  };
  c.execute = (stmt: unknown, ...rest: unknown[]) => {
    count(stmt);
    return orig.execute.call(c, stmt, ...rest);
  };
  c.batch = (stmts: unknown[], ...rest: unknown[]) => {
    for (const s of stmts) count(s);
    return orig.batch.call(c, stmts, ...rest);
  };
  try {
    await fn();
  } finally {
    Object.assign(c, orig);
  }
  return n;
}

test("retention deletes in bounded batches and the event loop turns between them", async () => {
  const total = RETENTION_BATCH * 6 + 7;
  await db().client.execute({
    sql: `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
          INSERT INTO object_changes (time, action, changed_object_type_id, changed_object_id, object_repr)
          SELECT ?, 'create', 1, i, 'old' FROM n`,
    args: [total, at(Date.now() - 400 * DAY)],
  });
  // Counts turns of the event loop (what a waiting request needs) while the prune runs.
  let turns = 0;
  let pruning = true;
  const spin = () => {
    if (!pruning) return;
    turns++;
    setImmediate(spin);
  };
  setImmediate(spin);
  let result!: Awaited<ReturnType<typeof pruneExpired>>;
  // Only the prune's DELETEs: the app's own background work (an index sweep, a health probe)
  // may send a statement of its own meanwhile.
  const deletes = await deletesDuring(async () => {
    result = await pruneExpired(db(), { changelogDays: 90, jobDays: 0 });
  });
  pruning = false;
  expect(result.changes).toBe(total);
  const batches = Math.ceil(total / RETENTION_BATCH);
  expect(deletes).toBe(batches + 1); // one DELETE per batch of changes, one for the outbox
  expect(turns).toBeGreaterThanOrEqual(batches - 1);
  const rows = (await db().orm.all(sql`SELECT count(*) AS n FROM object_changes`)) as {
    n: number;
  }[];
  expect(rows[0]!.n).toBe(0);
});

test("the sweep finds a job Redis lost even when the clock stepped back two hours", async () => {
  const queue = servicesOf(t.app).tasks!;
  await delivery(1);
  expect(await queue.outbox.relayPending({ all: true })).toBe(1);
  await client.del(queue.keys.ready); // Redis lost it
  // Relayed two hours "in the future": the clock stepped back since.
  await db()
    .orm.update(outbox)
    .set({ relayed: at(Date.now() + 2 * 3_600_000) });
  expect(await queue.outbox.sweepLost()).toEqual({ requeued: 1, failed: 0 });
  expect(await client.llen(queue.keys.ready)).toBe(1);
  await client.del(queue.keys.ready);
});
