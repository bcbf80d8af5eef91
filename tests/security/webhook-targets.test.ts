/**
 * Security (issue 27 row 7): webhooks as a port scanner and a metadata reader. Every spelling
 * of loopback, link-local, private and metadata addresses is refused, names are resolved and
 * checked at delivery, redirects are not followed, and every failure reads the same.
 * `WEBHOOK_ALLOWED_NETWORKS` lets named networks through.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { hostname } from "node:os";
import { eq } from "drizzle-orm";
import { ConfigError, loadConfig } from "../../src/config";
import { webhooks } from "../../src/db/schema";
import {
  hookAndRule,
  jobsNamed,
  makeTasksEnv,
  startReceiver,
  waitFor,
  type TasksEnv,
} from "../tasks/harness";

/** No networks allowed: the default. */
let strict: TasksEnv;
/** Loopback allowed, as the test receivers need. */
let open: TasksEnv;
const receivers: Array<ReturnType<typeof startReceiver>> = [];
const receiver = (respond?: Parameters<typeof startReceiver>[0]) => {
  const r = startReceiver(respond);
  receivers.push(r);
  return r;
};

beforeAll(async () => {
  strict = await makeTasksEnv({ WEBHOOK_ALLOWED_NETWORKS: "" });
  strict.startWorker();
  open = await makeTasksEnv({ WEBHOOK_ALLOWED_NETWORKS: "127.0.0.0/8,::1/128" });
  open.startWorker();
});
afterAll(async () => {
  for (const r of receivers) r.stop();
  await strict.close();
  await open.close();
});

let n = 0;
const newSite = (env: TasksEnv) =>
  env.t.json("POST", "/api/dcim/sites/", { body: { name: `T ${++n}`, slug: `t-${n}` } });

/** The finished delivery job of this webhook. */
const finished = (env: TasksEnv, hookId: number) =>
  waitFor("the delivery job to finish", async () =>
    (await jobsNamed(env.t, "webhook.deliver")).find(
      (j) => j.object_id === hookId && ["completed", "errored", "failed"].includes(j.status.value),
    ),
  );

describe("payload URLs refused when written", () => {
  test.each([
    "http://169.254.169.254/latest/meta-data/",
    "http://[::1]:8000/",
    "http://0x7f000001:8000/",
    "http://2130706433:8000/",
    "http://127.1:8000/",
    "http://0177.0.0.1/",
    "http://127.0.0.1.:8000/",
    "http://localhost:8000/",
    "http://LOCALHOST./",
    "http://app.localhost/",
    "http://0.0.0.0/",
    "http://0/",
    "http://[::]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:a9fe:a9fe]/",
    "http://[64:ff9b::7f00:1]/",
    "http://[2002:7f00:1::]/",
    "http://10.0.0.1/",
    "http://172.16.5.4/",
    "http://192.168.1.1/",
    "http://100.100.100.200/",
    "http://[fd00:ec2::254]/",
    "http://[fe80::1]/",
    "https://192.0.0.192/",
    "http://224.0.0.1/",
  ])("%s → 400 on payload_url", async (url) => {
    const r = await strict.t.json("POST", "/api/extras/webhooks/", {
      body: { name: `bad-${++n}`, payload_url: url },
    });
    expect(r.status).toBe(400);
    expect(r.body.payload_url[0]).toContain("not allowed");
  });

  test("a change of URL is checked too; public addresses and names pass", async () => {
    const r = await strict.t.json("POST", "/api/extras/webhooks/", {
      body: { name: "public", payload_url: "https://93.184.215.14/hook" },
    });
    expect(r.status).toBe(201);
    const named = await strict.t.json("PATCH", `/api/extras/webhooks/${r.body.id}/`, {
      body: { payload_url: "https://hooks.example.invalid/x" },
    });
    expect(named.status).toBe(200);
    const bad = await strict.t.json("PATCH", `/api/extras/webhooks/${r.body.id}/`, {
      body: { payload_url: "http://[::ffff:7f00:1]:6379/" },
    });
    expect(bad.status).toBe(400);
  });
});

describe("at delivery", () => {
  test("a name resolving to loopback is refused after DNS; nothing reaches the receiver", async () => {
    const name = hostname();
    const resolved = await Bun.dns.lookup(name, {});
    expect(resolved.some((a) => a.address.startsWith("127."))).toBe(true);
    const rx = receiver();
    const url = rx.url.replace("127.0.0.1", name);
    const { hook } = await hookAndRule(strict.t, { url, eventTypes: ["object_created"] });
    expect((await newSite(strict)).status).toBe(201);
    const job = await finished(strict, hook.id);
    expect(job.status.value).toBe("errored");
    expect(job.error).toBe("delivery refused: the target address is not allowed");
    expect(rx.received.length).toBe(0);
  });

  test("a loopback URL stored before the rule (or allowed then) is refused at delivery", async () => {
    const rx = receiver();
    const { hook } = await hookAndRule(strict.t, {
      url: "https://93.184.215.14/x",
      eventTypes: ["object_created"],
    });
    await strict.t.deps.db.orm
      .update(webhooks)
      .set({ payloadUrl: rx.url })
      .where(eq(webhooks.id, hook.id));
    expect((await newSite(strict)).status).toBe(201);
    const job = await finished(strict, hook.id);
    expect(job.error).toBe("delivery refused: the target address is not allowed");
    expect(rx.received.length).toBe(0);
  });

  test("WEBHOOK_ALLOWED_NETWORKS lets loopback receivers through", async () => {
    const rx = receiver();
    const { hook } = await hookAndRule(open.t, { url: rx.url, eventTypes: ["object_created"] });
    expect((await newSite(open)).status).toBe(201);
    const job = await finished(open, hook.id);
    expect(job.status.value).toBe("completed");
    expect(rx.received.length).toBe(1);
  });

  test("redirects are not followed, to another port or to a data: URL", async () => {
    const other = receiver();
    for (const location of [other.url, "data:text/plain,hello"]) {
      const rx = receiver(() => new Response(null, { status: 302, headers: { location } }));
      const { hook } = await hookAndRule(open.t, { url: rx.url, eventTypes: ["object_created"] });
      expect((await newSite(open)).status).toBe(201);
      const job = await waitFor("a failed attempt", async () =>
        (await jobsNamed(open.t, "webhook.deliver")).find(
          (j) => j.object_id === hook.id && j.error,
        ),
      );
      expect(job.error).toBe("delivery failed: HTTP 302");
      // later retries go nowhere
      await open.t.json("PATCH", `/api/extras/webhooks/${hook.id}/`, {
        body: { payload_url: "http://127.0.0.1:1/" },
      });
    }
    expect(other.received.length).toBe(0);
  });

  test("a closed port and a Redis port fail with the same error", async () => {
    const gone = startReceiver();
    const closedUrl = gone.url;
    gone.stop();
    const redisPort = new URL(open.stack.redis.url).port;
    const errors: string[] = [];
    for (const url of [closedUrl, `http://127.0.0.1:${redisPort}/`]) {
      const { hook } = await hookAndRule(open.t, { url, eventTypes: ["object_created"] });
      expect((await newSite(open)).status).toBe(201);
      const job = await waitFor("a failed attempt", async () =>
        (await jobsNamed(open.t, "webhook.deliver")).find(
          (j) => j.object_id === hook.id && j.error,
        ),
      );
      errors.push(job.error);
      // later retries go nowhere
      await open.t.json("PATCH", `/api/extras/webhooks/${hook.id}/`, {
        body: { payload_url: "http://127.0.0.1:1/" },
      });
    }
    expect(errors).toEqual([
      "delivery failed: connection error",
      "delivery failed: connection error",
    ]);
  });
});

describe("the setting", () => {
  test("addresses and CIDR ranges are accepted; anything else names the setting", () => {
    const ok = loadConfig({ WEBHOOK_ALLOWED_NETWORKS: "127.0.0.0/8, ::1/128,10.1.2.3" });
    expect(ok.webhookAllowedNetworks.length).toBe(3);
    for (const bad of ["127.0.0.0/33", "localhost", "10.0.0.0/8/1", "::1/129", "10.0.0.0/x"]) {
      expect(() => loadConfig({ WEBHOOK_ALLOWED_NETWORKS: bad })).toThrow(ConfigError);
      expect(() => loadConfig({ WEBHOOK_ALLOWED_NETWORKS: bad })).toThrow(
        /WEBHOOK_ALLOWED_NETWORKS/,
      );
    }
  });
});
