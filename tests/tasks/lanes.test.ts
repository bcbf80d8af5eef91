/**
 * Issue 27 row 12: webhooks to a slow receiver take every default slot of the worker; a
 * background schema apply must not wait behind them (its own `internal` lane).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { doc, SCHEMA } from "../schema/helpers";
import {
  hookAndRule,
  jobsNamed,
  makeTasksEnv,
  startReceiver,
  waitFor,
  type TasksEnv,
} from "./harness";

let env: TasksEnv;
let release: () => void = () => {};
const held = new Promise<void>((resolve) => (release = resolve));
const slow = startReceiver(async () => {
  await held;
  return new Response("ok");
});
beforeAll(async () => {
  env = await makeTasksEnv();
  env.startWorker(); // two default slots (harness)
});
afterAll(async () => {
  release();
  slow.stop();
  await env.close();
});

test("a schema apply finishes while every webhook slot waits on a slow receiver", async () => {
  for (let i = 0; i < 4; i++)
    await hookAndRule(env.t, { url: slow.url, eventTypes: ["object_created"] });
  const site = await env.t.json("POST", "/api/dcim/sites/", { body: { name: "S", slug: "s" } });
  expect(site.status).toBe(201);
  await waitFor("both default slots held by the slow receiver", () => slow.received.length >= 2);

  const r = await env.t.json("POST", `${SCHEMA}/apply/?background=true`, {
    body: {
      schema: doc([
        {
          name: "lane_w",
          slug: "lane_w",
          fields: [{ id: 1, name: "code", type: "text", primary: true }],
        },
      ]),
    },
  });
  expect(r.status).toBe(202);
  const job = await waitFor("the apply job to finish", async () => {
    const j = await env.t.json("GET", `/api/core/jobs/${r.body.job.id}/`);
    return ["completed", "errored", "failed"].includes(j.body.status.value) ? j.body : null;
  });
  expect(job.status.value).toBe("completed");
  // Every delivery is still held: none timed out or finished before the apply did.
  const hooks = await jobsNamed(env.t, "webhook.deliver");
  expect(hooks.filter((j) => j.status.value === "running").length).toBe(2);
  expect(hooks.every((j) => j.attempts <= 1 && j.error === "")).toBe(true);
});
