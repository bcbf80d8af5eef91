/**
 * A bulk write's event deliveries go as a few statements, not two per (change, webhook) (decision
 * 0197): one account's rules and webhooks times anyone's bulk of hundreds of sites made thousands
 * of statements in the write's batch (50 × 1,000: ~100,000 statements, ~250 MB). The same jobs
 * and outbox rows as before, in the same order, handed to the tasks Redis after the commit. These
 * tests count statements and rows, never milliseconds.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Database } from "../../src/db/client";
import { userWith } from "../helpers/grants";
import { waitFor } from "../helpers/wait";
import { makeTasksEnv, type TasksEnv } from "./harness";

const SITES = 300;
const WEBHOOKS = 5;
const SITE_GRANTS: Array<[string[], string, unknown]> = [
  [["view", "add", "change", "delete"], "extras.webhook", null],
  [["view", "add", "change", "delete"], "extras.eventrule", null],
  [["view"], "dcim.site", null],
];

let env: TasksEnv;
let eve: string;
/** The rules in id order: their webhook, and whether only "even" slugs match. */
const rules: Array<{ id: number; webhook: number; evenOnly: boolean }> = [];

beforeAll(async () => {
  env = await makeTasksEnv();
  eve = (await userWith(env.t, "eve", SITE_GRANTS)).token;
}, 60_000);
afterAll(() => env?.close());

/** The statements of the database writes (atomic batches) that `work` sends. */
async function writeStatements(db: Database, work: () => Promise<unknown>): Promise<number> {
  const write = db.write;
  let n = 0;
  db.write = ((queries: Parameters<typeof write>[0]) => {
    n += queries.length;
    return write(queries);
  }) as unknown as typeof write;
  try {
    await work();
  } finally {
    db.write = write;
  }
  return n;
}

const sites = (tag: string) =>
  Array.from({ length: SITES }, (_, i) => ({
    name: `${tag} ${i}`,
    slug: `${tag}-${i}-${i % 2 ? "odd" : "even"}`,
  }));

/** Bulk creates then bulk deletes `SITES` sites: each batch's statements. */
async function createAndDelete(tag: string) {
  const { t } = env;
  let ids: number[] = [];
  const created = await writeStatements(t.deps.db, async () => {
    const r = await t.json("POST", "/api/dcim/sites/", { body: sites(tag) });
    expect(r.status).toBe(201);
    ids = (r.body as Array<{ id: number }>).map((s) => s.id);
  });
  await allRelayed();
  const deleted = await writeStatements(t.deps.db, async () => {
    const r = await t.req("DELETE", "/api/dcim/sites/", { body: ids.map((id) => ({ id })) });
    expect(r.status).toBe(204);
  });
  await allRelayed();
  return { created, deleted, ids };
}

/**
 * Every outbox row handed to the tasks Redis after its commit (a page at a time past a few; no
 * relay loop runs here).
 */
const allRelayed = () =>
  waitFor(
    async () =>
      Number(
        (await rows<{ n: number }>("SELECT count(*) AS n FROM outbox WHERE relayed IS NULL"))[0]?.n,
      ) === 0,
    { message: "every delivery relayed after its commit", timeoutMs: 30_000 },
  );

async function rows<T>(sql: string): Promise<T[]> {
  return (await env.t.deps.db.execute({ sql, args: [] })).rows as unknown as T[];
}

/** The deliveries the rules give, in order: per change (id order), per rule, once per webhook. */
function expectedDeliveries(changes: Array<{ id: number; slug: string }>) {
  const out: Array<{ webhook: number; change: number; event_rule: number; model: string }> = [];
  for (const c of changes) {
    const seen = new Set<number>();
    for (const r of rules) {
      if (seen.has(r.webhook) || (r.evenOnly && !c.slug.endsWith("even"))) continue;
      seen.add(r.webhook);
      out.push({ webhook: r.webhook, change: c.id, event_rule: r.id, model: "site" });
    }
  }
  return out;
}

describe("a bulk write's deliveries", () => {
  test("cost a few statements however many changes and webhooks, with the same rows", async () => {
    const { t } = env;
    const without = await createAndDelete("plain");
    const hooks = await t.json("POST", "/api/extras/webhooks/", {
      token: eve,
      body: Array.from({ length: WEBHOOKS }, (_, i) => ({
        name: `h${i}`,
        payload_url: `http://127.0.0.1:9/${i}`,
      })),
    });
    expect(hooks.status).toBe(201);
    const hookIds = (hooks.body as Array<{ id: number }>).map((h) => h.id);
    const rule = (webhook: number, name: string, conditions: unknown = null) => ({
      name,
      object_types: ["dcim.site"],
      event_types: ["object_created", "object_deleted"],
      action_object_type: "extras.webhook",
      action_object_id: webhook,
      conditions,
    });
    // one rule per webhook, a second one for the first webhook (one delivery per webhook), and
    // one matching even slugs only
    const even = { attr: "slug", value: "even", op: "contains" };
    const made = await t.json("POST", "/api/extras/event-rules/", {
      token: eve,
      body: [
        rule(hookIds[0]!, "again"),
        ...hookIds.slice(1).map((h, i) => rule(h, `r${i}`)),
        rule(hookIds[0]!, "first"),
        rule(hookIds[4]!, "even", even),
      ],
    });
    expect(made.status).toBe(201);
    for (const r of made.body as Array<{ id: number; action_object_id: number; name: string }>)
      rules.push({ id: r.id, webhook: r.action_object_id, evenOnly: r.name === "even" });
    rules.sort((a, b) => a.id - b.id);

    const before = (await rows<{ n: number }>("SELECT max(id) AS n FROM outbox"))[0]?.n ?? 0;
    const watched = await createAndDelete("watched");
    // a document of deliveries is two statements, and one reads the outbox's last id: the
    // 1,500 + 1,500 deliveries were 6,000 statements
    expect(watched.created - without.created).toBeLessThanOrEqual(5);
    expect(watched.deleted - without.deleted).toBeLessThanOrEqual(5);

    const changes = await rows<{ id: number; action: string; slug: string }>(
      `SELECT id, action, json_extract(coalesce(postchange_data, prechange_data), '$.slug') AS slug FROM object_changes WHERE changed_object_id IN (${watched.ids.join(",")}) AND action IN ('create', 'delete') ORDER BY id`,
    );
    expect(changes).toHaveLength(2 * SITES);
    const written = await rows<{
      id: number;
      payload: string;
      key: string;
      name: string;
      max_attempts: number;
      user_id: number | null;
      job_name: string;
      status: string;
      object_type_id: number;
      object_id: number;
      job_user: number | null;
    }>(
      `SELECT o.id, o.payload, o.key, o.name, o.max_attempts, o.user_id, j.name AS job_name, j.status, j.object_type_id, j.object_id, j.user_id AS job_user FROM outbox o JOIN jobs j ON j.id = o.job_id WHERE o.id > ${before} ORDER BY o.id`,
    );
    const expected = expectedDeliveries(changes);
    expect(expected).toHaveLength(2 * (SITES * WEBHOOKS));
    expect(written.map((w) => JSON.parse(w.payload))).toEqual(expected);
    // the payload's text as `stageOutbox` wrote it: its keys in that order
    expect(written[0]!.payload).toBe(JSON.stringify(expected[0]));
    const webhookType = (
      await rows<{ id: number }>(
        "SELECT id FROM object_types WHERE app_label = 'extras' AND model = 'webhook'",
      )
    )[0]!.id;
    for (const [k, w] of written.entries()) {
      expect(w).toMatchObject({
        name: "webhook.deliver",
        job_name: "webhook.deliver",
        status: "pending",
        user_id: null,
        job_user: null,
        object_type_id: webhookType,
        object_id: expected[k]!.webhook,
        max_attempts: env.queue.maxAttempts,
      });
      expect(w.key).toMatch(
        /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
      );
    }
    expect(new Set(written.map((w) => w.key)).size).toBe(written.length);
    // every job has its one outbox row
    const [jobs] = await rows<{ n: number }>(
      `SELECT count(*) AS n FROM jobs WHERE id IN (SELECT job_id FROM outbox WHERE id > ${before})`,
    );
    expect(Number(jobs!.n)).toBe(written.length);

    const queued = await env.redis.llen(env.queue.readyKey("webhook.deliver"));
    expect(queued).toBe(written.length);
  }, 120_000);
});
