/**
 * Issue 29, point 5: NetBox 4.7's snapshot conditions on event rules (`changed`, `unchanged`,
 * `snapshots.prechange.<attr>`, docs/reference/conditions.md) and the webhook `timeout` field.
 * API writes → change records → delivery jobs on a real redis-server → a receiver on 127.0.0.1.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import {
  hookAndRule,
  jobsNamed,
  makeTasksEnv,
  startReceiver,
  waitFor,
  type TasksEnv,
} from "./harness";

let env: TasksEnv;
beforeAll(async () => {
  env = await makeTasksEnv();
  env.startWorker();
});
afterAll(() => env.close());

async function settled() {
  await waitFor("webhook jobs to settle", async () =>
    (await jobsNamed(env.t, "webhook.deliver")).every((j) =>
      ["completed", "failed", "errored"].includes(j.status.value),
    ),
  );
}

let n = 0;
const newSite = async (extra: Record<string, unknown> = {}) => {
  const i = ++n;
  const r = await env.t.json("POST", "/api/dcim/sites/", {
    body: { name: `Snap ${i}`, slug: `snap-${i}`, ...extra },
  });
  expect(r.status).toBe(201);
  return r.body;
};

describe("snapshot conditions (NetBox 4.7)", () => {
  test("status changed to active: {and: [status.value = active, status changed]}", async () => {
    const receiver = startReceiver();
    const { rule, hook } = await hookAndRule(env.t, {
      url: receiver.url,
      conditions: {
        and: [
          { attr: "status.value", value: "active" },
          { attr: "status", op: "changed" },
        ],
      },
    });
    const site = await newSite({ status: "planned" }); // created planned: status.value fails
    await env.t.json("PATCH", `/api/dcim/sites/${site.id}/`, { body: { status: "active" } }); // fires
    await env.t.json("PATCH", `/api/dcim/sites/${site.id}/`, { body: { description: "x" } }); // unchanged
    const born = await newSite({ status: "active" }); // create: every present attribute "changed"
    await settled();
    // two workers may deliver out of order: compare in id order
    const got = receiver.received.map((d) => JSON.parse(d.body));
    got.sort((a, b) => a.data.id - b.data.id);
    expect(got.map((b) => [b.event, b.data.id])).toEqual([
      ["updated", site.id],
      ["created", born.id],
    ]);
    receiver.stop();
    await env.t.req("DELETE", `/api/extras/event-rules/${rule.id}/`);
    await env.t.req("DELETE", `/api/extras/webhooks/${hook.id}/`);
  });

  test("unchanged; a misspelt attribute fails closed even negated; snapshots.prechange.<attr>", async () => {
    const receiver = startReceiver();
    const { rule, hook } = await hookAndRule(env.t, {
      url: receiver.url,
      eventTypes: ["object_updated", "object_created"],
      conditions: {
        or: [
          {
            and: [
              { attr: "name", op: "unchanged" },
              { attr: "description", value: "keep" },
            ],
          },
          { attr: "no_such_attr", op: "changed", negate: true },
          { attr: "snapshots.prechange.description", value: "was-old" },
        ],
      },
    });
    const site = await newSite({ description: "old" }); // create: unchanged is false, no match
    await env.t.json("PATCH", `/api/dcim/sites/${site.id}/`, { body: { description: "keep" } });
    await env.t.json("PATCH", `/api/dcim/sites/${site.id}/`, { body: { name: "Renamed" } });
    const other = await newSite({ description: "was-old" });
    await env.t.json("PATCH", `/api/dcim/sites/${other.id}/`, { body: { description: "new" } });
    await settled();
    const got = receiver.received.map((d) => JSON.parse(d.body));
    got.sort((a, b) => a.data.id - b.data.id);
    expect(got.map((b) => [b.data.id, b.data.name, b.data.description])).toEqual([
      [site.id, site.name, "keep"],
      [other.id, other.name, "new"],
    ]);
    receiver.stop();
    await env.t.req("DELETE", `/api/extras/event-rules/${rule.id}/`);
    await env.t.req("DELETE", `/api/extras/webhooks/${hook.id}/`);
  });

  test("changed/unchanged take no value and a bare attribute: 400 otherwise", async () => {
    const hook = await env.t.json("POST", "/api/extras/webhooks/", {
      body: { name: "snap-check", payload_url: "http://127.0.0.1:9/" },
    });
    for (const conditions of [
      { attr: "status", op: "changed", value: "active" },
      { attr: "snapshots.prechange.status", op: "unchanged" },
    ]) {
      const r = await env.t.json("POST", "/api/extras/event-rules/", {
        body: {
          name: `bad-${JSON.stringify(conditions).length}`,
          object_types: ["dcim.site"],
          event_types: ["object_updated"],
          conditions,
          action_type: "webhook",
          action_object_type: "extras.webhook",
          action_object_id: hook.body.id,
        },
      });
      expect(r.status).toBe(400);
      expect(r.body.conditions).toBeDefined();
    }
  });
});

describe("webhook timeout (NetBox 4.7)", () => {
  test("1-3600 seconds or null; a receiver slower than it fails the delivery with the webhook's own bound", async () => {
    for (const bad of [0, 3601, "ten"]) {
      const r = await env.t.json("POST", "/api/extras/webhooks/", {
        body: { name: `to-${bad}`, payload_url: "http://127.0.0.1:9/", timeout: bad },
      });
      expect(r.status).toBe(400);
      expect(Object.keys(r.body)).toEqual(["timeout"]);
    }
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const receiver = startReceiver(async () => {
      await held;
      return new Response("late");
    });
    // One attempt: the bound is the point here, not the retries (each would wait the bound again).
    const once = await makeTasksEnv({}, { maxAttempts: 1 });
    once.startWorker();
    try {
      const { hook } = await hookAndRule(once.t, {
        url: receiver.url,
        eventTypes: ["object_created"],
        webhook: { timeout: 1 },
      });
      expect(hook.timeout).toBe(1);
      const site = await once.t.json("POST", "/api/dcim/sites/", {
        body: { name: "Slow receiver", slug: "slow-receiver" },
      });
      expect(site.status).toBe(201);
      const job = await waitFor(
        "the delivery to fail",
        async () => {
          const jobs = await jobsNamed(once.t, "webhook.deliver");
          return jobs.find((j) => j.status.value === "failed");
        },
        20_000,
      );
      expect(job.error).toContain("no answer within 1000 ms");
    } finally {
      release();
      receiver.stop();
      await once.close();
    }
  });
});
