/**
 * Event rules and webhooks end to end: API writes → change records → delivery jobs on the
 * tasks Redis (real redis-server behind the bridge) → the in-process worker → a receiver on
 * 127.0.0.1. Each test uses its own receiver, webhook and rule, and removes the rule after.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import {
  hmacSha512,
  hookAndRule,
  jobsNamed,
  makeTasksEnv,
  startReceiver,
  waitFor,
  type TasksEnv,
} from "./harness";
import { addField, CO, create, makeCot } from "../custom-objects/fixtures";

let env: TasksEnv;
const cleanups: Array<() => Promise<unknown> | unknown> = [];
beforeAll(async () => {
  env = await makeTasksEnv();
  env.startWorker();
});
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});
afterAll(() => env.close());

/** A receiver plus a webhook and rule that call it; all removed after the test. */
async function subscribe(
  opts: Omit<Parameters<typeof hookAndRule>[1], "url"> = {},
  respond?: Parameters<typeof startReceiver>[0],
) {
  const receiver = startReceiver(respond);
  const { hook, rule } = await hookAndRule(env.t, { ...opts, url: receiver.url });
  cleanups.push(
    () => receiver.stop(),
    async () => {
      await env.t.req("DELETE", `/api/extras/event-rules/${rule.id}/`);
      await env.t.req("DELETE", `/api/extras/webhooks/${hook.id}/`);
    },
  );
  return { receiver, hook, rule };
}

/** Waits until every webhook job has finished (no pending or running job is left). */
async function settled() {
  await waitFor("webhook jobs to settle", async () =>
    (await jobsNamed(env.t, "webhook.deliver")).every((j) =>
      ["completed", "failed", "errored"].includes(j.status.value),
    ),
  );
}

/**
 * Far past every lease and retry time (on the clock `maintain` is given, not by waiting), the
 * queue has nothing to take back or to run again: nothing can be redelivered.
 */
async function nothingLeftToRedeliver() {
  const later = Date.now() + 10 * env.queue.visibilityTimeoutMs;
  expect(await env.queue.maintain(later)).toEqual({ promoted: 0, reclaimed: 0 });
  expect(await env.queue.depth()).toMatchObject({ ready: 0, processing: 0, delayed: 0 });
}

let siteN = 0;
const newSite = async (
  extra: Record<string, unknown> = {},
  headers: Record<string, string> = {},
) => {
  const n = ++siteN;
  const r = await env.t.json("POST", "/api/dcim/sites/", {
    body: { name: `Hooked ${n}`, slug: `hooked-${n}`, ...extra },
    headers,
  });
  expect(r.status).toBe(201);
  return r.body;
};

describe("delivery", () => {
  test("one signed delivery per matching change, with the §7 body", async () => {
    const { receiver, hook } = await subscribe({
      secret: "s3cr3t",
      webhook: { additional_headers: "X-Team: netops\nX-Event: {{ event }}" },
    });
    const site = await newSite({}, { "x-request-id": "req-hook-1" });
    await env.t.json("PATCH", `/api/dcim/sites/${site.id}/`, { body: { description: "changed" } });
    await env.t.req("DELETE", `/api/dcim/sites/${site.id}/`);
    await waitFor("three deliveries", () => receiver.received.length >= 3);
    await settled();

    expect(receiver.received.length).toBe(3);
    // Workers run jobs concurrently: deliveries may arrive in any order (receivers order by timestamp).
    const order = ["created", "updated", "deleted"];
    const bodies = receiver.received
      .map((d) => JSON.parse(d.body))
      .sort((a, b) => order.indexOf(a.event) - order.indexOf(b.event));
    expect(bodies.map((b) => b.event)).toEqual(order);
    expect(bodies.map((b) => b.timestamp)).toEqual([...bodies.map((b) => b.timestamp)].sort());
    const [created, updated, deleted] = bodies;
    expect(Object.keys(created).sort()).toEqual([
      "data",
      "event",
      "model",
      "request_id",
      "snapshots",
      "timestamp",
      "username",
    ]);
    expect(created).toMatchObject({
      model: "site",
      username: "admin",
      request_id: "req-hook-1",
      data: { id: site.id, name: site.name },
    });
    expect(created.snapshots).toEqual({ prechange: null, postchange: created.data });
    expect(Date.parse(created.timestamp)).toBeGreaterThan(0);
    expect(updated.snapshots.prechange.description).toBe("");
    expect(updated.snapshots.postchange.description).toBe("changed");
    expect(updated.data).toEqual(updated.snapshots.postchange);
    expect(deleted.data).toEqual(deleted.snapshots.prechange);
    expect(deleted.snapshots.postchange).toBeNull();

    for (const d of receiver.received) {
      expect(d.method).toBe("POST");
      expect(d.headers["content-type"]).toBe("application/json");
      expect(d.headers["x-hook-signature"]).toBe(await hmacSha512("s3cr3t", d.body));
      expect(d.headers["x-team"]).toBe("netops");
    }
    expect(receiver.received.map((d) => d.headers["x-event"]).sort()).toEqual([
      "created",
      "deleted",
      "updated",
    ]);

    const jobs = (await jobsNamed(env.t, "webhook.deliver")).filter((j) => j.object_id === hook.id);
    expect(jobs.length).toBe(3);
    for (const j of jobs) {
      expect(j).toMatchObject({
        status: { value: "completed", label: "Completed" },
        attempts: 1,
        data: { status_code: 200 },
        error: "",
        object_type: "extras.webhook",
      });
      // a delivery is nobody's job but a superuser's, not its writer's (decision 0191)
      expect(j.user).toBeNull();
      expect(j.object).toMatchObject({ id: hook.id, display: hook.name });
      for (const key of [
        "id",
        "url",
        "name",
        "object_type",
        "object_id",
        "status",
        "created",
        "started",
        "completed",
        "user",
        "data",
        "error",
      ])
        expect(j).toHaveProperty(key);
    }
  });

  test("no secret: no signature header; content type, method and body template per webhook", async () => {
    const { receiver } = await subscribe({
      eventTypes: ["object_created"],
      webhook: {
        http_method: "PUT",
        http_content_type: "text/plain",
        body_template:
          "{{ event }} {{ model }} {{ data.name }} by {{ username }} {{ data.missing }}|{{ snapshots.prechange }}",
      },
    });
    const site = await newSite();
    await waitFor("a delivery", () => receiver.received.length >= 1);
    await settled();
    const [d] = receiver.received;
    expect(d!.method).toBe("PUT");
    expect(d!.headers["content-type"]).toBe("text/plain");
    expect(d!.headers).not.toHaveProperty("x-hook-signature");
    expect(d!.body).toBe(`created site ${site.name} by admin |`);
  });

  test("only the configured event types deliver", async () => {
    const { receiver } = await subscribe({ eventTypes: ["object_deleted"] });
    const site = await newSite();
    await env.t.json("PATCH", `/api/dcim/sites/${site.id}/`, { body: { description: "x" } });
    await settled();
    expect(receiver.received).toEqual([]);
    await env.t.req("DELETE", `/api/dcim/sites/${site.id}/`);
    await waitFor("the delete delivery", () => receiver.received.length >= 1);
    await settled();
    expect(receiver.received.map((d) => JSON.parse(d.body).event)).toEqual(["deleted"]);
  });

  test("only the configured object types deliver", async () => {
    const { receiver } = await subscribe({ objectTypes: ["tenancy.tenant"] });
    await newSite();
    await env.t.json("POST", "/api/tenancy/tenants/", {
      body: { name: "Hooked tenant", slug: "hooked-tenant" },
    });
    await waitFor("the tenant delivery", () => receiver.received.length >= 1);
    await settled();
    expect(receiver.received.map((d) => JSON.parse(d.body).model)).toEqual(["tenant"]);
  });

  test("conditions filter changes", async () => {
    const { receiver } = await subscribe({
      conditions: {
        and: [
          { attr: "status.value", value: "active" },
          {
            or: [
              { attr: "description", value: "core", op: "contains" },
              { attr: "tags.slug", value: "vip", op: "contains" },
            ],
          },
          { attr: "name", value: ["Skip me"], op: "in", negate: true },
        ],
      },
    });
    await env.t.json("POST", "/api/extras/tags/", { body: { name: "VIP", slug: "vip" } });
    const planned = await newSite({ status: "planned", description: "core site" }); // status fails
    const edge = await newSite({ status: "active", description: "edge" }); // or-group fails
    const core = await newSite({ status: "active", description: "a core site" }); // matches
    const tagged = await newSite({ status: "active", tags: [{ slug: "vip" }] }); // matches via tags
    await newSite({ status: "active", description: "core", name: "Skip me" }); // negated "in" fails
    await settled();
    const names = receiver.received.map((d) => JSON.parse(d.body).data.name).sort();
    expect(names).toEqual([core.name, tagged.name].sort());
    expect([planned.name, edge.name].some((n) => names.includes(n))).toBe(false);
  });

  test("a condition on the prechange snapshot (status changed away from planned)", async () => {
    const { receiver } = await subscribe({
      eventTypes: ["object_updated"],
      conditions: {
        and: [
          { attr: "status.value", value: "planned", snapshot: "prechange" },
          { attr: "status.value", value: "planned", op: "neq" },
        ],
      },
    });
    const site = await newSite({ status: "planned" });
    await env.t.json("PATCH", `/api/dcim/sites/${site.id}/`, {
      body: { description: "still planned" },
    });
    await env.t.json("PATCH", `/api/dcim/sites/${site.id}/`, { body: { status: "active" } });
    await env.t.json("PATCH", `/api/dcim/sites/${site.id}/`, {
      body: { description: "active now" },
    });
    await settled();
    expect(receiver.received.map((d) => JSON.parse(d.body).data.status.value)).toEqual(["active"]);
  });

  test("disabled rules do not deliver", async () => {
    const { receiver, rule } = await subscribe();
    await env.t.json("PATCH", `/api/extras/event-rules/${rule.id}/`, { body: { enabled: false } });
    await newSite();
    await settled();
    expect(receiver.received).toEqual([]);
  });

  test("a rolled-back request delivers nothing", async () => {
    const { receiver } = await subscribe();
    const r = await env.t.json("POST", "/api/dcim/sites/", {
      body: [
        { name: "RB ok", slug: "rb-ok" },
        { name: "RB bad", slug: "rb bad" },
      ],
    });
    expect(r.status).toBe(400);
    await newSite(); // a committed change after it: its delivery proves the worker ran
    await waitFor("the committed delivery", () => receiver.received.length >= 1);
    await settled();
    expect(receiver.received.map((d) => JSON.parse(d.body).data.name)).toEqual([`Hooked ${siteN}`]);
  });

  test("two rules on one webhook: one delivery per change; two webhooks: one each", async () => {
    const { receiver, hook } = await subscribe({ eventTypes: ["object_created"] });
    const second = await env.t.json("POST", "/api/extras/event-rules/", {
      body: {
        name: `dup-${hook.id}`,
        object_types: ["dcim.site"],
        event_types: ["object_created"],
        action_object_type: "extras.webhook",
        action_object_id: hook.id,
      },
    });
    expect(second.status).toBe(201);
    cleanups.push(() => env.t.req("DELETE", `/api/extras/event-rules/${second.body.id}/`));
    const other = await subscribe({ eventTypes: ["object_created"] });
    await newSite();
    await waitFor(
      "both deliveries",
      () => receiver.received.length >= 1 && other.receiver.received.length >= 1,
    );
    await settled();
    expect(receiver.received.length).toBe(1);
    expect(other.receiver.received.length).toBe(1);
  });

  test("bulk writes: one delivery per object, none duplicated in a normal run", async () => {
    const { receiver } = await subscribe({ eventTypes: ["object_created"] });
    const body = Array.from({ length: 12 }, (_, i) => ({
      name: `Bulk hook ${i}`,
      slug: `bulk-hook-${i}`,
    }));
    expect((await env.t.json("POST", "/api/dcim/sites/", { body })).status).toBe(201);
    await waitFor("12 deliveries", () => receiver.received.length >= 12);
    await settled();
    await nothingLeftToRedeliver();
    const names = receiver.received.map((d) => JSON.parse(d.body).data.name);
    expect(names.length).toBe(12);
    expect(new Set(names).size).toBe(12);
  });

  test("custom objects deliver with their COT slug as the model", async () => {
    const cot = await makeCot(env.t, "hooked_circuit");
    await addField(env.t, cot.id, { name: "cid", type: "text", primary: true });
    const { receiver } = await subscribe({
      objectTypes: ["custom-objects.hooked_circuit"],
      eventTypes: ["object_created"],
      conditions: { attr: "cid", value: "C-", op: "contains" },
    });
    await create(env.t, "hooked_circuit", { cid: "X-1" });
    const obj = await create(env.t, "hooked_circuit", { cid: "C-1" });
    await waitFor("a delivery", () => receiver.received.length >= 1);
    await settled();
    const bodies = receiver.received.map((d) => JSON.parse(d.body));
    expect(bodies.length).toBe(1);
    expect(bodies[0]).toMatchObject({
      model: "hooked_circuit",
      data: { id: obj.id, cid: "C-1", url: expect.stringContaining(`${CO}/hooked_circuit/`) },
    });
  });
});

describe("retries", () => {
  test("a receiver that fails twice then succeeds: delivered on the third attempt, job completed", async () => {
    const { receiver, hook } = await subscribe(
      { eventTypes: ["object_created"], secret: "k" },
      (_d, n) => new Response("nope", { status: n <= 2 ? 503 : 204 }),
    );
    await newSite();
    await waitFor("three attempts", () => receiver.received.length >= 3);
    await settled();
    expect(receiver.received.length).toBe(3);
    expect(new Set(receiver.received.map((d) => d.body)).size).toBe(1); // the same body each time
    for (const d of receiver.received)
      expect(d.headers["x-hook-signature"]).toBe(await hmacSha512("k", d.body));
    const [job] = (await jobsNamed(env.t, "webhook.deliver")).filter(
      (j) => j.object_id === hook.id,
    );
    expect(job).toMatchObject({
      status: { value: "completed" },
      attempts: 3,
      data: { status_code: 204 },
    });
    await nothingLeftToRedeliver();
    expect(receiver.received.length).toBe(3);
  });

  test("a receiver that never succeeds: failed after the last attempt, dead-lettered", async () => {
    const { receiver, hook } = await subscribe(
      { eventTypes: ["object_created"] },
      () => new Response("down", { status: 500 }),
    );
    await newSite();
    await waitFor("the job to fail", async () =>
      (await jobsNamed(env.t, "webhook.deliver")).some(
        (j) => j.object_id === hook.id && j.status.value === "failed",
      ),
    );
    expect(receiver.received.length).toBe(4); // TEST_TASKS.maxAttempts
    const [job] = (await jobsNamed(env.t, "webhook.deliver")).filter(
      (j) => j.object_id === hook.id,
    );
    expect(job).toMatchObject({ attempts: 4, error: "delivery failed: HTTP 500" });
    expect(job.completed).not.toBeNull();
    const dead = await env.queue.deadLetters();
    expect(dead.some((m) => m.id === job.id && m.error === "delivery failed: HTTP 500")).toBe(true);
  });

  test("an unreachable receiver (connection refused) is retried like an error answer", async () => {
    const gone = startReceiver();
    const url = gone.url;
    gone.stop();
    const { hook, rule } = await hookAndRule(env.t, { url, eventTypes: ["object_created"] });
    cleanups.push(async () => {
      await env.t.req("DELETE", `/api/extras/event-rules/${rule.id}/`);
      await env.t.req("DELETE", `/api/extras/webhooks/${hook.id}/`);
    });
    await newSite();
    const job = await waitFor("the job to fail", async () =>
      (await jobsNamed(env.t, "webhook.deliver")).find(
        (j) => j.object_id === hook.id && j.status.value === "failed",
      ),
    );
    expect(job.attempts).toBe(4);
    expect(job.error).toBe("delivery failed: connection error");
  });
});

describe("webhook and event rule API", () => {
  test("secret is write-only; records carry the §7 fields", async () => {
    const hook = await env.t.json("POST", "/api/extras/webhooks/", {
      body: { name: "api-hook", payload_url: "https://example.invalid/x", secret: "hidden-value" },
    });
    expect(hook.status).toBe(201);
    cleanups.push(() => env.t.req("DELETE", `/api/extras/webhooks/${hook.body.id}/`));
    expect(hook.body).toMatchObject({
      name: "api-hook",
      payload_url: "https://example.invalid/x",
      http_method: "POST",
      http_content_type: "application/json",
      additional_headers: "",
      body_template: "",
      ssl_verification: true,
    });
    expect(hook.body).not.toHaveProperty("secret");
    expect(
      JSON.stringify(await env.t.json("GET", `/api/extras/webhooks/${hook.body.id}/`)),
    ).not.toContain("hidden-value");

    const rule = await env.t.json("POST", "/api/extras/event-rules/", {
      body: {
        name: "api-rule",
        object_types: ["dcim.site", "custom-objects.customobjecttype"],
        event_types: ["object_created"],
        conditions: { attr: "name", value: "x" },
        action_type: "webhook",
        action_object_type: "extras.webhook",
        action_object_id: hook.body.id,
      },
    });
    expect(rule.status).toBe(201);
    cleanups.push(() => env.t.req("DELETE", `/api/extras/event-rules/${rule.body.id}/`));
    expect(rule.body).toMatchObject({
      name: "api-rule",
      enabled: true,
      object_types: ["custom_objects.customobjecttype", "dcim.site"],
      event_types: ["object_created"],
      conditions: { attr: "name", value: "x" },
      action_type: { value: "webhook", label: "Webhook" },
      action_object_type: "extras.webhook",
      action_object_id: hook.body.id,
      action_object: { id: hook.body.id, display: "api-hook" },
    });

    // A webhook an event rule calls cannot be deleted.
    const del = await env.t.json("DELETE", `/api/extras/webhooks/${hook.body.id}/`);
    expect(del.status).toBe(409);
    expect(del.body.error).toBe("protected");
  });

  test.each([
    [{ payload_url: "ftp://x" }, "payload_url"],
    [{ payload_url: "not a url" }, "payload_url"],
    [{ http_method: "TRACE" }, "http_method"],
    [{ additional_headers: "no colon here" }, "additional_headers"],
    [{ http_content_type: "" }, "http_content_type"],
  ])("webhook validation %j → 400 on %s", async (extra, field) => {
    const r = await env.t.json("POST", "/api/extras/webhooks/", {
      body: { name: `bad-${field}`, payload_url: "http://127.0.0.1:1/", ...extra },
    });
    expect(r.status).toBe(400);
    expect(r.body).toHaveProperty(field);
  });

  test.each([
    [{ event_types: ["object_exploded"] }, "event_types"],
    [{ event_types: [] }, "event_types"],
    [{ object_types: [] }, "object_types"],
    [{ object_types: ["dcim.nothing"] }, "object_types"],
    [{ conditions: { attr: "x" } }, "conditions"],
    [{ conditions: { attr: "x", value: 1, op: "like" } }, "conditions"],
    [{ conditions: { and: [] } }, "conditions"],
    [{ conditions: { attr: "x", value: 1, op: "in" } }, "conditions"],
    [{ conditions: { attr: "x", value: 1, extra: true } }, "conditions"],
    [{ action_object_type: "dcim.site" }, "action_object_type"],
    [{ action_object_id: 999999 }, "action_object_id"],
    [{ action_type: "script" }, "action_type"],
  ])("event rule validation %j → 400 on %s", async (extra, field) => {
    const hook = await env.t.json("POST", "/api/extras/webhooks/", {
      body: { name: `for-${field}-${crypto.randomUUID()}`, payload_url: "http://127.0.0.1:1/" },
    });
    cleanups.push(() => env.t.req("DELETE", `/api/extras/webhooks/${hook.body.id}/`));
    const r = await env.t.json("POST", "/api/extras/event-rules/", {
      body: {
        name: `bad-${field}`,
        object_types: ["dcim.site"],
        event_types: ["object_created"],
        action_object_type: "extras.webhook",
        action_object_id: hook.body.id,
        ...extra,
      },
    });
    expect(r.status).toBe(400);
    expect(r.body).toHaveProperty(field);
  });

  test("jobs endpoint: read-only, filters, permission", async () => {
    expect((await env.t.req("POST", "/api/core/jobs/", { body: {} })).status).toBe(405);
    const all = await env.t.json("GET", "/api/core/jobs/?limit=1000");
    expect(all.body.count).toBeGreaterThan(0);
    const completed = await env.t.json(
      "GET",
      "/api/core/jobs/?status=completed&object_type=extras.webhook&limit=1000",
    );
    expect(
      completed.body.results.every(
        (j: any) => j.status.value === "completed" && j.object_type === "extras.webhook",
      ),
    ).toBe(true);
    const failed = await env.t.json("GET", "/api/core/jobs/?status=failed");
    expect(failed.body.results.every((j: any) => j.status.value === "failed")).toBe(true);
    expect((await env.t.json("GET", "/api/core/jobs/?name=nothing")).body.count).toBe(0);
    const nobody = await env.t.user("no-jobs");
    expect((await env.t.req("GET", "/api/core/jobs/", { token: nobody })).status).toBe(403);
    const viewer = await env.t.user("job-viewer", [[["view"], "core.job"]]);
    expect((await env.t.req("GET", "/api/core/jobs/", { token: viewer })).status).toBe(200);
  });
});
