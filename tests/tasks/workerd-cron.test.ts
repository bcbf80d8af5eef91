/**
 * On Workers the job queue is drained by the cron trigger: src/worker.ts in real workerd
 * (Miniflare) over the Hrana server and the Redis bridge; a write queues a webhook delivery and a
 * `scheduled` event delivers it, signed with WebCrypto inside workerd.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { eq } from "drizzle-orm";
import { jobs, objectChanges, outbox } from "../../src/db/schema";
import { startRedisStack, type RedisStack } from "../helpers/redis-bridge";
import {
  startRemoteDatabase,
  startWorker,
  type RemoteDatabase,
  type RunningWorker,
} from "../helpers/worker";
import { hmacSha512, LOOPBACK_ALLOWED, startReceiver, waitFor } from "./harness";

setDefaultTimeout(60_000);

let db: RemoteDatabase;
let stack: RedisStack;
let worker: RunningWorker;
let token: string;
beforeAll(async () => {
  db = await startRemoteDatabase();
  stack = await startRedisStack();
  worker = await startWorker({
    bindings: {
      DATABASE_URL: db.url,
      CACHE_BACKEND: "kv",
      REDIS_TASKS_URL: stack.bridge.url,
      REDIS_TASKS_TOKEN: stack.bridge.token,
      ...LOOPBACK_ALLOWED,
    },
  });
  token = await db.superuserToken();
});
afterAll(async () => {
  await worker?.stop();
  await stack?.stop();
  await db?.stop();
});

const call = async (method: string, path: string, body?: unknown) => {
  const res = await worker.fetch(path, {
    method,
    headers: { authorization: `Token ${token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: res.status === 204 ? null : await res.json() };
};

test("a change made through the Worker is delivered by the next cron run", async () => {
  const receiver = startReceiver();
  try {
    const hook = await call("POST", "/api/extras/webhooks/", {
      name: "edge-hook",
      payload_url: receiver.url,
      secret: "edge-secret",
    });
    expect(hook.status).toBe(201);
    const rule = await call("POST", "/api/extras/event-rules/", {
      name: "edge-rule",
      object_types: ["dcim.site"],
      event_types: ["object_created"],
      action_object_type: "extras.webhook",
      action_object_id: hook.body.id,
    });
    expect(rule.status).toBe(201);
    const site = await call("POST", "/api/dcim/sites/", { name: "Edge", slug: "edge" });
    expect(site.status).toBe(201);

    const [queued] = await db.db.orm.select().from(jobs).where(eq(jobs.name, "webhook.deliver"));
    expect(queued).toMatchObject({ status: "pending" });
    expect(receiver.received).toEqual([]);
    // Written with the change (outbox), handed to the tasks Redis by the request's waitUntil.
    await waitFor(
      "the waitUntil relay",
      async () =>
        (await db.db.orm.select().from(outbox).where(eq(outbox.jobId, queued!.id)))[0]?.relayed,
      10_000,
    );

    // Retention runs in the cron too: a change record past CHANGELOG_RETENTION_DAYS (90) goes.
    await db.db.orm.insert(objectChanges).values({
      time: new Date(Date.now() - 91 * 86_400_000).toISOString(),
      action: "create",
      changedObjectTypeId: 1,
      changedObjectId: 1,
      objectRepr: "ancient",
    });
    const host = await worker.mf.getWorker("host");
    const result = await host.scheduled({ cron: "* * * * *" });
    expect(result.outcome).toBe("ok");

    expect(receiver.received.length).toBe(1);
    const [d] = receiver.received;
    expect(JSON.parse(d!.body)).toMatchObject({
      event: "created",
      model: "site",
      username: "admin",
      data: { id: site.body.id, name: "Edge" },
    });
    expect(d!.headers["x-hook-signature"]).toBe(await hmacSha512("edge-secret", d!.body));
    expect(d!.headers["idempotency-key"]).toBe(
      (await db.db.orm.select().from(outbox).where(eq(outbox.jobId, queued!.id)))[0]!.key,
    );
    const [done] = await db.db.orm.select().from(jobs).where(eq(jobs.id, queued!.id));
    expect(done).toMatchObject({ status: "completed", attempts: 1, data: { status_code: 200 } });

    const changes = await call("GET", "/api/core/object-changes/?changed_object_type=dcim.site");
    expect(changes.body.results.map((r: any) => r.action.value)).toEqual(["create"]);
    await waitFor(
      "the cron's prune",
      async () =>
        (
          await db.db.orm
            .select()
            .from(objectChanges)
            .where(eq(objectChanges.objectRepr, "ancient"))
        ).length === 0,
    );
  } finally {
    receiver.stop();
  }
});

test("a background schema apply through the Worker: 202, handed to Redis by the request's waitUntil, run by the cron", async () => {
  const type = {
    name: "edge_widget",
    slug: "edge_widget",
    fields: [{ id: 1, name: "code", type: "text", primary: true }],
  };
  const queued = await call("POST", "/api/plugins/custom-objects/schema/apply/?background=true", {
    schema: { schema_version: "1", types: [type] },
  });
  expect(queued.status).toBe(202);
  const id = queued.body.job.id as number;
  expect(queued.body).toEqual({
    job: { id, url: expect.stringMatching(new RegExp(`/api/core/jobs/${id}/$`)) },
    status: "pending",
    detail: "The schema apply runs in the background; its job holds the outcome.",
  });
  // the outbox row is marked by the relay after the answer, no cron run needed for the hand-off
  await waitFor(
    "the waitUntil relay",
    async () => (await db.db.orm.select().from(outbox).where(eq(outbox.jobId, id)))[0]?.relayed,
    10_000,
  );
  const host = await worker.mf.getWorker("host");
  expect((await host.scheduled({ cron: "* * * * *" })).outcome).toBe("ok");
  const [done] = await db.db.orm.select().from(jobs).where(eq(jobs.id, id));
  expect(done).toMatchObject({ status: "completed", attempts: 1 });
  expect(done!.data).toMatchObject({ status_code: 200, applied: true });
  const listed = await call(
    "GET",
    "/api/plugins/custom-objects/custom-object-types/?slug=edge_widget",
  );
  expect(listed.body.count).toBe(1);
});
