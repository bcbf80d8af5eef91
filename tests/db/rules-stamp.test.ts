/**
 * The event rules' print is their stamp (decision 0197): every write's guard and read phase
 * carried all enabled rules as one text (200 rules of 16 KB conditions: ~3.3 MB, past what D1
 * binds), now 16 characters, moved by triggers on every write to the rules or their object types,
 * so a change made anywhere (raw SQL, a cascade) still reaches the next write's matching.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";

const RULES = 5;
let t: TestApp;
let hook: number;

beforeAll(async () => {
  t = await makeTestApp({ WEBHOOK_ALLOWED_NETWORKS: "127.0.0.0/8" });
  const made = await t.json("POST", "/api/extras/webhooks/", {
    body: { name: "h", payload_url: "http://127.0.0.1:9/h" },
  });
  hook = made.body.id;
  // conditions near their bound (16,384 characters) that every site passes
  const conditions = {
    and: Array.from({ length: 40 }, (_, i) => ({
      attr: "name",
      value: `never-${String(i).padStart(3, "0")}-${"x".repeat(340)}`,
      op: "neq",
    })),
  };
  expect(JSON.stringify(conditions).length).toBeGreaterThan(15_000);
  expect(JSON.stringify(conditions).length).toBeLessThan(16_384);
  const rules = await t.json("POST", "/api/extras/event-rules/", {
    body: Array.from({ length: RULES }, (_, i) => ({
      name: `r${i}`,
      object_types: ["dcim.site"],
      event_types: ["object_created"],
      action_object_type: "extras.webhook",
      action_object_id: hook,
      conditions,
    })),
  });
  expect(rules.status).toBe(201);
});
afterAll(() => t.close());

/** The characters of SQL text and bound text values `work` sends to the database's client. */
async function sentCharacters(work: () => Promise<unknown>): Promise<number> {
  const client = (t.deps.db as unknown as { client: any }).client;
  const { execute, batch } = client;
  let n = 0;
  const count = (stmt: unknown) => {
    const s = typeof stmt === "string" ? { sql: stmt, args: [] } : (stmt as any);
    n += String(s.sql).length;
    const args = Array.isArray(s.args) ? s.args : Object.values(s.args ?? {});
    for (const a of args) if (typeof a === "string") n += a.length;
  };
  client.execute = (...a: unknown[]) => (count(a[0]), execute.apply(client, a));
  client.batch = (stmts: unknown[], mode?: unknown) => (
    stmts.forEach(count), batch.call(client, stmts, mode)
  );
  try {
    await work();
  } finally {
    Object.assign(client, { execute, batch });
  }
  return n;
}

const outboxRows = async () =>
  Number(
    (await t.deps.db.execute({ sql: "SELECT count(*) AS n FROM outbox", args: [] })).rows[0]!.n,
  );

test("a write's guard of the rules does not carry their text", async () => {
  // warm: the rules read and kept
  expect(
    (await t.json("POST", "/api/dcim/sites/", { body: { name: "w", slug: "w" } })).status,
  ).toBe(201);
  const sent = await sentCharacters(async () => {
    const r = await t.json("POST", "/api/dcim/sites/", { body: { name: "s", slug: "s" } });
    expect(r.status).toBe(201);
  });
  // the rules' conditions are 5 × 15,000+ characters: they went with every write
  expect(sent).toBeLessThan(15_000);
});

test("rules changed by raw SQL, or a link deleted, reach the next write at once", async () => {
  const before = await outboxRows();
  expect(
    (await t.json("POST", "/api/dcim/sites/", { body: { name: "a", slug: "a" } })).status,
  ).toBe(201);
  expect(await outboxRows()).toBe(before + 1);
  // every rule's link to sites deleted behind the app's back: no delivery
  await t.deps.db.execute({ sql: "DELETE FROM event_rule_object_types", args: [] });
  expect(
    (await t.json("POST", "/api/dcim/sites/", { body: { name: "b", slug: "b" } })).status,
  ).toBe(201);
  expect(await outboxRows()).toBe(before + 1);
  // one link back, but its rule disabled in the same way: still none
  await t.deps.db.execute({
    sql: "INSERT INTO event_rule_object_types (event_rule_id, object_type_id) SELECT min(id), (SELECT id FROM object_types WHERE app_label = 'dcim' AND model = 'site') FROM event_rules",
    args: [],
  });
  await t.deps.db.execute({ sql: "UPDATE event_rules SET enabled = 0", args: [] });
  expect(
    (await t.json("POST", "/api/dcim/sites/", { body: { name: "c", slug: "c" } })).status,
  ).toBe(201);
  expect(await outboxRows()).toBe(before + 1);
  // enabled again: a delivery
  await t.deps.db.execute({ sql: "UPDATE event_rules SET enabled = 1", args: [] });
  expect(
    (await t.json("POST", "/api/dcim/sites/", { body: { name: "d", slug: "d" } })).status,
  ).toBe(201);
  expect(await outboxRows()).toBe(before + 2);
});

test("a stamp row lost behind the app's back comes back with the next rule write, which the next write sees", async () => {
  const before = await outboxRows();
  await t.deps.db.execute({ sql: "DELETE FROM event_rules_stamp", args: [] });
  expect(
    (await t.json("POST", "/api/dcim/sites/", { body: { name: "e", slug: "e" } })).status,
  ).toBe(201);
  expect(await outboxRows()).toBe(before + 1);
  // every rule disabled behind the app's back: the stamp row is written again, so no delivery
  await t.deps.db.execute({ sql: "UPDATE event_rules SET enabled = 0", args: [] });
  const [row] = (await t.deps.db.execute({ sql: "SELECT stamp FROM event_rules_stamp", args: [] }))
    .rows as unknown as { stamp: string }[];
  expect(row?.stamp).toMatch(/^[0-9a-f]{16}$/);
  expect(
    (await t.json("POST", "/api/dcim/sites/", { body: { name: "f", slug: "f" } })).status,
  ).toBe(201);
  expect(await outboxRows()).toBe(before + 1);
});
