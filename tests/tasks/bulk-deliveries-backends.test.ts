/**
 * A bulk write's set-based deliveries (decision 0197) on a local file, a remote database and
 * Cloudflare D1 (miniflare's): the same jobs and outbox rows, in the same order, as one statement
 * pair per delivery wrote; on a remote database the bulk write stays within its two round trips.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { settleBeforeCounting } from "../helpers/settle";
import {
  type Json,
  jsonOf,
  startThreeBackends,
  type ThreeBackends,
} from "../helpers/three-backends";

// wrangler's migration run takes 10–30 s on a busy machine
setDefaultTimeout(180_000);

/** Enough sites that the deliveries pass what a batch returns (100): their ids are a range. */
const SITES = 60;
let apps: ThreeBackends;

beforeAll(async () => {
  apps = await startThreeBackends("bulk-deliveries");
});
afterAll(() => apps?.stop());

type Query = <T>(text: string) => Promise<T[]>;

/** Two webhooks; rules: both on every site, a second for the first, one on "even" slugs. */
async function scenario(json: Json, query: Query) {
  const hooks = await json("POST", "/api/extras/webhooks/", [
    { name: "a", payload_url: "https://hooks.example.com/a" },
    { name: "b", payload_url: "https://hooks.example.com/b" },
  ]);
  expect(hooks.status).toBe(201);
  const [a, b] = (hooks.body as Array<{ id: number }>).map((h) => h.id);
  const rule = (name: string, webhook: number, conditions: unknown = null) => ({
    name,
    object_types: ["dcim.site"],
    event_types: ["object_created", "object_deleted"],
    action_object_type: "extras.webhook",
    action_object_id: webhook,
    conditions,
  });
  const made = await json("POST", "/api/extras/event-rules/", [
    rule("b", b!, { attr: "slug", value: "even", op: "contains" }),
    rule("a", a!),
    rule("a again", a!),
  ]);
  expect(made.status).toBe(201);
  const rules = (made.body as Array<{ id: number; name: string; action_object_id: number }>)
    .map((r) => ({ id: r.id, webhook: r.action_object_id, evenOnly: r.name === "b" }))
    .sort((x, y) => x.id - y.id);
  const created = await json(
    "POST",
    "/api/dcim/sites/",
    Array.from({ length: SITES }, (_, i) => ({
      name: `s${i}`,
      slug: `s${i}-${i % 2 ? "odd" : "even"}`,
    })),
  );
  expect(created.status).toBe(201);
  const ids = (created.body as Array<{ id: number }>).map((s) => ({ id: s.id }));
  expect((await json("DELETE", "/api/dcim/sites/", ids)).status).toBe(204);

  const changes = await query<{ id: number; slug: string }>(
    `SELECT id, json_extract(coalesce(postchange_data, prechange_data), '$.slug') AS slug FROM object_changes WHERE changed_object_type_id = (SELECT id FROM object_types WHERE model = 'site') ORDER BY id`,
  );
  expect(changes).toHaveLength(2 * SITES);
  const expected = changes.flatMap((c) => {
    const seen = new Set<number>();
    return rules.flatMap((r) => {
      if (seen.has(r.webhook) || (r.evenOnly && !c.slug.endsWith("even"))) return [];
      seen.add(r.webhook);
      return [{ webhook: r.webhook, change: c.id, event_rule: r.id, model: "site" }];
    });
  });
  const written = await query<{ payload: string; object_id: number; key: string }>(
    "SELECT o.payload, j.object_id, o.key FROM outbox o JOIN jobs j ON j.id = o.job_id ORDER BY o.id",
  );
  expect(written.map((w) => JSON.parse(w.payload))).toEqual(expected);
  expect(written.map((w) => Number(w.object_id))).toEqual(expected.map((e) => e.webhook));
  expect(new Set(written.map((w) => w.key)).size).toBe(expected.length);
  // the payload's text as before: its keys in `WebhookTaskPayload`'s order, ids as integers
  expect(written[0]!.payload).toBe(JSON.stringify(expected[0]));
  return { deliveries: expected.length, payloads: written.map((w) => w.payload) };
}

test("the same deliveries locally, remotely and on D1, the remote bulk in two round trips", async () => {
  const { local, remote, d1, db } = apps;
  const on =
    (t: typeof local): Query =>
    async (text) =>
      (await t.deps.db.execute({ sql: text, args: [] })).rows as never;
  const onLocal = await scenario(jsonOf(local), on(local));
  // 60 created, 60 deleted: both webhooks for the even half, the first for the odd half
  expect(onLocal.deliveries).toBe(2 * (SITES / 2) * 3);
  expect(await scenario(jsonOf(remote), on(remote))).toEqual(onLocal);
  const onD1 = await scenario(
    (m, p, b) => d1.json(m, p, b),
    async (text) => (await d1.binding.prepare(text).bind().all()).results as never,
  );
  expect(onD1).toEqual(onLocal);

  // a bulk write with its hundred-odd deliveries: its read, its batch
  await settleBeforeCounting(remote.app, () => remote.json("GET", "/api/status/"));
  const body = Array.from({ length: SITES }, (_, i) => ({ name: `t${i}`, slug: `t${i}-even` }));
  await remote.json("POST", "/api/dcim/sites/", { body: body.slice(0, 1) });
  await settleBeforeCounting(remote.app, () => remote.json("GET", "/api/status/"));
  db.proxy.reset();
  expect((await remote.json("POST", "/api/dcim/sites/", { body: body.slice(1) })).status).toBe(201);
  expect(db.proxy.count).toBeLessThanOrEqual(2);
});
