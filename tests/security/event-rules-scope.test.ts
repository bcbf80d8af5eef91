/**
 * Security (issue 27 row 2): a user who may manage webhooks and event rules tries to have
 * their own receiver sent what they may not view — user records, tokens, permissions, a
 * hidden custom object type, sites outside their constraint — and to hijack another user's
 * rule by pointing its webhook at themselves. Real redis-server, real worker, real receivers
 * on 127.0.0.1 (allowed through WEBHOOK_ALLOWED_NETWORKS).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { createUser, issueToken } from "../../src/core/auth/provisioning";
import { eventRules } from "../../src/db/schema";
import { addField, create, makeCot } from "../custom-objects/fixtures";
import { jobsNamed, makeTasksEnv, startReceiver, waitFor, type TasksEnv } from "../tasks/harness";

let env: TasksEnv;
let hooker: { token: string; id: number };
const permissionIds: number[] = [];
const receivers: Array<ReturnType<typeof startReceiver>> = [];

beforeAll(async () => {
  env = await makeTasksEnv();
  env.startWorker();
  const cot = await makeCot(env.t, "vault");
  await addField(env.t, cot.id, { name: "name", type: "text", primary: true });
  await addField(env.t, cot.id, { name: "password", type: "text" });
  await create(env.t, "vault", { name: "vpn", password: "VPN-PSK-123" });
  const u = await createUser(env.t.deps.db.orm, { username: "hooker" });
  const grants: Array<[string[], string[], unknown]> = [
    [["view", "add", "change", "delete"], ["extras.webhook", "extras.eventrule"], null],
    [["view"], ["dcim.site"], { description: "mine" }],
  ];
  for (const [i, [actions, object_types, constraints]] of grants.entries()) {
    const r = await env.t.json("POST", "/api/users/permissions/", {
      body: { name: `hooker-${i}`, actions, object_types, users: [u.id], constraints },
    });
    expect(r.status).toBe(201);
    permissionIds.push(r.body.id);
  }
  hooker = { token: (await issueToken(env.t.deps.db.orm, { username: "hooker" })).key, id: u.id };
});
afterAll(async () => {
  for (const r of receivers) r.stop();
  await env.close();
});

const as = (token?: string) => (token ? { token } : {});

async function webhook(url: string, token?: string) {
  const r = await env.t.json("POST", "/api/extras/webhooks/", {
    body: { name: `hook-${crypto.randomUUID().slice(0, 8)}`, payload_url: url },
    ...as(token),
  });
  expect(r.status).toBe(201);
  return r.body;
}

function rule(hookId: number, objectTypes: string[], token?: string) {
  return env.t.json("POST", "/api/extras/event-rules/", {
    body: {
      name: `rule-${crypto.randomUUID().slice(0, 8)}`,
      object_types: objectTypes,
      event_types: ["object_created", "object_updated", "object_deleted"],
      action_object_type: "extras.webhook",
      action_object_id: hookId,
    },
    ...as(token),
  });
}

function receiver() {
  const r = startReceiver();
  receivers.push(r);
  return r;
}

/** Every webhook job of this webhook once none is pending or running. */
const settledJobs = (hookId: number, count: number) =>
  waitFor(`${count} finished deliveries of webhook ${hookId}`, async () => {
    const mine = (await jobsNamed(env.t, "webhook.deliver")).filter((j) => j.object_id === hookId);
    const done = mine.filter((j) => ["completed", "errored", "failed"].includes(j.status.value));
    return mine.length >= count && done.length === mine.length ? mine : null;
  }) as Promise<any[]>;

let n = 0;
async function site(slug: string, extra: Record<string, unknown> = {}) {
  const r = await env.t.json("POST", "/api/dcim/sites/", {
    body: { name: `${slug} ${++n}`, slug: `${slug}-${n}`, ...extra },
  });
  expect(r.status).toBe(201);
  return r.body;
}

describe("object types a rule may watch", () => {
  test.each([
    "users.user",
    "users.token",
    "users.objectpermission",
    "users.group",
    "custom_objects.vault",
    "dcim.device",
  ])("a rule on %s, which its author may not view, is refused with 400 naming it", async (type) => {
    const hook = await webhook(receiver().url, hooker.token);
    const r = await rule(hook.id, ["dcim.site", type], hooker.token);
    expect(r.status).toBe(400);
    expect(r.body.object_types[0]).toContain(type);
  });

  test("a hidden custom object type answers exactly as one that does not exist", async () => {
    const hook = await webhook(receiver().url, hooker.token);
    const hidden = await rule(hook.id, ["custom_objects.vault"], hooker.token);
    const missing = await rule(hook.id, ["custom_objects.vault_nope"], hooker.token);
    expect(hidden.status).toBe(400);
    expect(missing.status).toBe(400);
    expect(hidden.body.object_types[0].replace("vault", "vault_nope")).toBe(
      missing.body.object_types[0],
    );
  });

  test("changing an existing rule to such a type is refused too", async () => {
    const hook = await webhook(receiver().url, hooker.token);
    const made = await rule(hook.id, ["dcim.site"], hooker.token);
    expect(made.status).toBe(201);
    const r = await env.t.json("PATCH", `/api/extras/event-rules/${made.body.id}/`, {
      body: { object_types: ["users.token"] },
      token: hooker.token,
    });
    expect(r.status).toBe(400);
    expect(r.body.object_types[0]).toContain("users.token");
  });

  test("a rule records its author as owner; a superuser may watch user records", async () => {
    const hook = await webhook(receiver().url, hooker.token);
    const mine = await rule(hook.id, ["dcim.site"], hooker.token);
    expect(mine.body.user).toMatchObject({ id: hooker.id });
    const admins = await rule(hook.id, ["users.user"]);
    expect(admins.status).toBe(201);
    expect(admins.body.user).toMatchObject({ username: "admin" });
  });
});

describe("what a rule delivers", () => {
  test("only objects inside the owner's constraints: others are skipped with no data", async () => {
    const rx = receiver();
    const hook = await webhook(rx.url, hooker.token);
    expect((await rule(hook.id, ["dcim.site"], hooker.token)).status).toBe(201);
    const mine = await site("mine", { description: "mine" });
    await env.t.json("PATCH", `/api/dcim/sites/${mine.id}/`, { body: { comments: "seen" } });
    await site("hidden", { comments: '"password": "VPN-PSK-123"' });
    const jobs = await settledJobs(hook.id, 3);
    expect(rx.received.length).toBe(2);
    for (const d of rx.received) expect(JSON.parse(d.body).data.id).toBe(mine.id);
    const skipped = jobs.filter((j) => j.data?.skipped);
    expect(skipped.length).toBe(1);
    for (const j of skipped) expect(JSON.stringify(j.data)).not.toContain("VPN-PSK-123");
    for (const d of rx.received) expect(d.body).not.toContain("VPN-PSK-123");
  });

  test("nested objects the owner may not view arrive as ids only", async () => {
    const rx = receiver();
    const hook = await webhook(rx.url, hooker.token);
    expect((await rule(hook.id, ["dcim.site"], hooker.token)).status).toBe(201);
    const tenant = await env.t.json("POST", "/api/tenancy/tenants/", {
      body: { name: "Secret tenant", slug: "secret-tenant" },
    });
    expect(tenant.status).toBe(201);
    await site("mine", { description: "mine", tenant: tenant.body.id });
    await settledJobs(hook.id, 1);
    expect(rx.received.length).toBe(1);
    expect(JSON.parse(rx.received[0]!.body).data.tenant).toEqual({ id: tenant.body.id });
    expect(rx.received[0]!.body).not.toContain("Secret tenant");
  });

  test("an owner who lost the permission gets nothing at delivery time", async () => {
    const rx = receiver();
    const hook = await webhook(rx.url, hooker.token);
    expect((await rule(hook.id, ["dcim.site"], hooker.token)).status).toBe(201);
    const off = await env.t.json("PATCH", `/api/users/permissions/${permissionIds[1]}/`, {
      body: { enabled: false },
    });
    expect(off.status).toBe(200);
    try {
      const s = await site("mine", { description: "mine" });
      await env.t.json("PATCH", `/api/dcim/sites/${s.id}/`, { body: { comments: "again" } });
      const jobs = await settledJobs(hook.id, 2);
      expect(jobs.every((j) => j.data?.skipped)).toBe(true);
      expect(rx.received.length).toBe(0);
    } finally {
      await env.t.json("PATCH", `/api/users/permissions/${permissionIds[1]}/`, {
        body: { enabled: true },
      });
    }
  });

  test("pointing an admin's webhook at one's own receiver makes its deliveries one's own", async () => {
    const adminRx = receiver();
    const hook = await webhook(adminRx.url);
    expect((await rule(hook.id, ["dcim.site"])).status).toBe(201);
    const stolen = receiver();
    const r = await env.t.json("PATCH", `/api/extras/webhooks/${hook.id}/`, {
      body: { payload_url: stolen.url },
      token: hooker.token,
    });
    expect(r.status).toBe(200);
    expect(r.body.user).toMatchObject({ id: hooker.id });
    await site("hidden", { comments: "VPN-PSK-123" });
    const [job] = await settledJobs(hook.id, 1);
    expect(job.data).toEqual({ skipped: expect.any(String) });
    expect(stolen.received.length).toBe(0);
    expect(adminRx.received.length).toBe(0);
  });

  test("a rule without owner (made before owners existed) delivers nothing", async () => {
    const rx = receiver();
    const hook = await webhook(rx.url);
    const made = await rule(hook.id, ["dcim.site"]);
    await env.t.deps.db.orm
      .update(eventRules)
      .set({ userId: null })
      .where(eq(eventRules.id, made.body.id));
    await site("ownerless");
    const [job] = await settledJobs(hook.id, 1);
    expect(job.data).toEqual({ skipped: expect.any(String) });
    expect(rx.received.length).toBe(0);
  });

  test("a deleted object reaches an owner with a constrained view not at all", async () => {
    const rx = receiver();
    const hook = await webhook(rx.url, hooker.token);
    const made = await env.t.json("POST", "/api/extras/event-rules/", {
      body: {
        name: `rule-${crypto.randomUUID().slice(0, 8)}`,
        object_types: ["dcim.site"],
        event_types: ["object_deleted"],
        action_object_type: "extras.webhook",
        action_object_id: hook.id,
      },
      token: hooker.token,
    });
    expect(made.status).toBe(201);
    const s = await site("mine", { description: "mine", comments: "VPN-PSK-123" });
    expect((await env.t.req("DELETE", `/api/dcim/sites/${s.id}/`)).status).toBe(204);
    const [job] = await settledJobs(hook.id, 1);
    expect(job.data).toEqual({ skipped: expect.any(String) });
    expect(rx.received.length).toBe(0);
  });

  test("custom objects: a superuser-owned rule still delivers", async () => {
    const rx = receiver();
    const hook = await webhook(rx.url);
    expect((await rule(hook.id, ["custom_objects.vault"])).status).toBe(201);
    await create(env.t, "vault", { name: "wifi", password: "x" });
    await settledJobs(hook.id, 1);
    expect(rx.received.length).toBe(1);
    expect(JSON.parse(rx.received[0]!.body).data.name).toBe("wifi");
  });
});

describe("migration 0008", () => {
  test("rules and webhooks without owner get the user who last changed them, from the change log", async () => {
    const hook = await webhook(receiver().url, hooker.token);
    const made = await rule(hook.id, ["dcim.site"], hooker.token);
    const db = env.t.deps.db.client;
    await db.execute("UPDATE event_rules SET user_id = NULL");
    await db.execute("UPDATE webhooks SET user_id = NULL");
    const sql = await Bun.file("migrations/0008_event_owners.sql").text();
    for (const statement of sql.split("--> statement-breakpoint").slice(2))
      await db.execute(statement);
    const owner = async (table: string, id: number) =>
      (await db.execute({ sql: `SELECT user_id FROM ${table} WHERE id = ?`, args: [id] })).rows[0]!
        .user_id;
    expect(await owner("event_rules", made.body.id)).toBe(hooker.id);
    expect(await owner("webhooks", hook.id)).toBe(hooker.id);
  });
});
