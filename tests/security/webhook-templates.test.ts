/**
 * Security (issue 27 rows 5, 6): an editor of one site puts header lines and JSON keys in its
 * comments; a webhook renders them into `additional_headers` and a JSON `body_template`. The
 * values must stay values: no new header, no new key, and the signature covers the real body.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createUser, issueToken } from "../../src/core/auth/provisioning";
import {
  hmacSha512,
  hookAndRule,
  jobsNamed,
  makeTasksEnv,
  startReceiver,
  waitFor,
  type TasksEnv,
} from "../tasks/harness";

let env: TasksEnv;
let editor: string;
let siteId: number;
const receivers: Array<ReturnType<typeof startReceiver>> = [];

beforeAll(async () => {
  env = await makeTasksEnv();
  env.startWorker();
  siteId = (await env.t.json("POST", "/api/dcim/sites/", { body: { name: "A", slug: "a" } })).body
    .id;
  const u = await createUser(env.t.deps.db.orm, { username: "site-editor" });
  const p = await env.t.json("POST", "/api/users/permissions/", {
    body: {
      name: "edit-a",
      actions: ["view", "change"],
      object_types: ["dcim.site"],
      users: [u.id],
      constraints: { slug: "a" },
    },
  });
  expect(p.status).toBe(201);
  editor = (await issueToken(env.t.deps.db.orm, { username: "site-editor" })).key;
});
afterAll(async () => {
  for (const r of receivers) r.stop();
  await env.close();
});

/** The editor sets the site's comments; resolves with the one delivery it causes. */
async function deliveryOf(webhook: Record<string, unknown>, comments: string) {
  const rx = startReceiver();
  receivers.push(rx);
  const { hook } = await hookAndRule(env.t, {
    url: rx.url,
    secret: "k",
    eventTypes: ["object_updated"],
    webhook,
  });
  const r = await env.t.json("PATCH", `/api/dcim/sites/${siteId}/`, {
    body: { comments },
    token: editor,
  });
  expect(r.status).toBe(200);
  await waitFor("the delivery", () => rx.received.length >= 1);
  await waitFor("the job to finish", async () =>
    (await jobsNamed(env.t, "webhook.deliver")).some(
      (j) => j.object_id === hook.id && j.status.value === "completed",
    ),
  );
  await env.t.req("DELETE", `/api/extras/event-rules/${(await rules(hook.id))[0]}/`);
  return rx.received[0]!;
}

const rules = async (hookId: number) =>
  (await env.t.json("GET", `/api/extras/event-rules/?limit=1000`)).body.results
    .filter((r: any) => r.action_object_id === hookId)
    .map((r: any) => r.id);

describe("header values", () => {
  test("CR/LF in a value cannot add headers", async () => {
    const evil = "x\r\nAuthorization: Bearer stolen\nHost: evil.example\nX-Injected: 1";
    const d = await deliveryOf({ additional_headers: "X-Comment: {{ data.comments }}" }, evil);
    expect(d.headers.authorization).toBeUndefined();
    expect(d.headers["x-injected"]).toBeUndefined();
    expect(d.headers.host).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(d.headers["x-comment"]).toBe(
      "x Authorization: Bearer stolen Host: evil.example X-Injected: 1",
    );
  });

  test("characters a header cannot carry are percent-encoded, not a failed delivery", async () => {
    const d = await deliveryOf({ additional_headers: "X-Comment: {{ data.comments }}" }, "Café ☕");
    expect(d.headers["x-comment"]).toBe("Caf%C3%A9 %E2%98%95");
  });

  test("a webhook may not set Host, Content-Length or the signature itself", async () => {
    for (const line of ["Host: evil.example", "Content-Length: 1", "X-Hook-Signature: 00"]) {
      const r = await env.t.json("POST", "/api/extras/webhooks/", {
        body: {
          name: `h-${line.length}`,
          payload_url: "http://127.0.0.1:1/",
          additional_headers: line,
        },
      });
      expect(r.status).toBe(400);
      expect(r.body).toHaveProperty("additional_headers");
    }
  });
});

describe("JSON bodies", () => {
  test("a quoted placeholder is JSON-escaped: injected keys stay inside the string", async () => {
    const evil = 'x","u":"admin","approved":true,"z":"';
    const d = await deliveryOf(
      { body_template: '{"site": "{{ data.name }}", "note": "{{ data.comments }}"}' },
      evil,
    );
    const body = JSON.parse(d.body);
    expect(Object.keys(body).sort()).toEqual(["note", "site"]);
    expect(body.note).toBe(evil);
    expect(d.headers["x-hook-signature"]).toBe(await hmacSha512("k", d.body));
  });

  test("an unquoted placeholder is written as a JSON value", async () => {
    const evil = '1, "approved": true';
    const d = await deliveryOf(
      { body_template: '{"id": {{ data.id }}, "c": {{ data.comments }}}' },
      evil,
    );
    expect(JSON.parse(d.body)).toEqual({ id: siteId, c: evil });
  });

  test("form bodies are percent-encoded", async () => {
    const d = await deliveryOf(
      {
        http_content_type: "application/x-www-form-urlencoded",
        body_template: "note={{ data.comments }}&ok=no",
      },
      "a&ok=yes",
    );
    const form = new URLSearchParams(d.body);
    expect(form.getAll("ok")).toEqual(["no"]);
    expect(form.get("note")).toBe("a&ok=yes");
  });
});
