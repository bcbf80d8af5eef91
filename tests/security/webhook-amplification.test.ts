/**
 * Outside probe (decision 0190): an ordinary account may define webhooks and event rules. A body
 * template of 65,536 characters repeating `{{ data.comments }}` multiplies a site's comments
 * (up to 1 MiB) thousands of times: the delivery built a string of gigabytes in the server's own
 * process (the inline task worker), and header values were percent-encoded for half a minute.
 * A rendered body or header value past its limit refuses the delivery; nothing is sent.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { userWith } from "../helpers/grants";
import { MAX_RENDERED_BODY_CHARS, MAX_RENDERED_HEADER_CHARS } from "../../src/core/events/render";
import { jobsNamed, makeTasksEnv, startReceiver, waitFor, type TasksEnv } from "../tasks/harness";

let env: TasksEnv;
let eve: string;
const receiver = startReceiver();

beforeAll(async () => {
  env = await makeTasksEnv();
  env.startWorker();
  eve = (
    await userWith(env.t, "eve", [
      [["view", "add", "change"], "dcim.site", null],
      [["view", "add"], "extras.webhook", null],
      [["view", "add"], "extras.eventrule", null],
    ])
  ).token;
});
afterAll(async () => {
  receiver.stop();
  await env.close();
});

/** Eve's webhook and rule on site creation; resolves with the job her new site causes. */
async function jobOf(webhook: Record<string, unknown>, comments: string, slug: string) {
  const hook = await env.t.json("POST", "/api/extras/webhooks/", {
    token: eve,
    body: { name: slug, payload_url: receiver.url, ...webhook },
  });
  expect(hook.status).toBe(201);
  const rule = await env.t.json("POST", "/api/extras/event-rules/", {
    token: eve,
    body: {
      name: slug,
      object_types: ["dcim.site"],
      event_types: ["object_created"],
      conditions: { attr: "slug", value: slug },
      action_type: "webhook",
      action_object_type: "extras.webhook",
      action_object_id: hook.body.id,
    },
  });
  expect(rule.status).toBe(201);
  const site = await env.t.json("POST", "/api/dcim/sites/", {
    token: eve,
    body: { name: slug, slug, comments },
  });
  expect(site.status).toBe(201);
  const done = (j: any) => j.object_id === hook.body.id && j.status.value !== "pending";
  const finished = (j: any) => done(j) && j.status.value !== "running";
  await waitFor("the delivery job to finish", async () =>
    (await jobsNamed(env.t, "webhook.deliver")).some(finished),
  );
  return (await jobsNamed(env.t, "webhook.deliver")).find(finished);
}

describe("a template that repeats a value", () => {
  test("a body past the limit is refused, nothing sent", async () => {
    // 3,400 copies of 10,000 characters: 34 MB (of 1 MiB comments, 3.5 GB)
    const template = "{{ data.comments }}".repeat(3_400);
    const before = receiver.received.length;
    const job = await jobOf({ body_template: template }, "c".repeat(10_000), "body");
    expect(job.status.value).toBe("errored");
    expect(job.error).toBe(
      `delivery refused: the body template renders more than ${MAX_RENDERED_BODY_CHARS} characters`,
    );
    expect(receiver.received.length).toBe(before);
  });

  test("a header value past the limit is refused, nothing sent", async () => {
    const headers = `X-Comments: ${"{{ data.comments }}".repeat(200)}`;
    const before = receiver.received.length;
    const job = await jobOf({ additional_headers: headers }, "é".repeat(10_000), "header");
    expect(job.status.value).toBe("errored");
    expect(job.error).toBe(
      `delivery refused: the header X-Comments renders more than ${MAX_RENDERED_HEADER_CHARS} characters`,
    );
    expect(receiver.received.length).toBe(before);
  });

  test("a template within the limits is delivered", async () => {
    const before = receiver.received.length;
    const job = await jobOf(
      {
        body_template: '{"c": "{{ data.comments }}"}',
        additional_headers: "X-Slug: {{ data.slug }}",
      },
      "ok",
      "fine",
    );
    expect(job.status.value).toBe("completed");
    expect(receiver.received.length).toBe(before + 1);
  });
});
