/**
 * Issue 27 row 12: webhooks to a slow receiver must not starve other work. A background schema
 * apply has its own `internal` lane, and one receiver gets at most `perTarget` of the default
 * slots, so deliveries to other receivers go on.
 */
import { afterAll, expect, test } from "bun:test";
import { startWorker, type TaskWorker } from "../../src/services/tasks/worker";
import { doc, SCHEMA } from "../schema/helpers";
import {
  hookAndRule,
  jobsNamed,
  makeTasksEnv,
  startReceiver,
  waitFor,
  type TasksEnv,
} from "./harness";

let release: () => void = () => {};
const held = new Promise<void>((resolve) => (release = resolve));
/** Answers only when the test ends. */
const slow = startReceiver(async () => {
  await held;
  return new Response("ok");
});
const envs: TasksEnv[] = [];
const workers: TaskWorker[] = [];
afterAll(async () => {
  release();
  await Promise.all(workers.map((w) => w.stop(5_000)));
  for (const env of envs) await env.close();
  slow.stop();
});

async function env(tasks: Parameters<typeof makeTasksEnv>[1]) {
  const e = await makeTasksEnv({}, tasks);
  envs.push(e);
  return e;
}

const webhookJobs = async (e: TasksEnv, hookIds: number[]) =>
  (await jobsNamed(e.t, "webhook.deliver")).filter((j) => hookIds.includes(j.object_id));

test("a schema apply finishes while every webhook slot waits on a slow receiver", async () => {
  // No per-target limit here: the harness worker's two default slots both hold the slow receiver.
  const e = await env({ webhookPerTarget: 100 });
  e.startWorker();
  const hooks: number[] = [];
  for (let i = 0; i < 4; i++)
    hooks.push((await hookAndRule(e.t, { url: slow.url, eventTypes: ["object_created"] })).hook.id);
  const site = await e.t.json("POST", "/api/dcim/sites/", { body: { name: "S", slug: "s" } });
  expect(site.status).toBe(201);
  await waitFor(
    "both default slots held",
    async () =>
      (await webhookJobs(e, hooks)).filter((j) => j.status.value === "running").length === 2,
  );

  const code = { id: 1, name: "code", type: "text", primary: true };
  const r = await e.t.json("POST", `${SCHEMA}/apply/?background=true`, {
    body: { schema: doc([{ name: "lane_w", slug: "lane_w", fields: [code] }]) },
  });
  expect(r.status).toBe(202);
  const job = await waitFor("the apply job to finish", async () => {
    const j = await e.t.json("GET", `/api/core/jobs/${r.body.job.id}/`);
    return ["completed", "errored", "failed"].includes(j.body.status.value) ? j.body : null;
  });
  expect(job.status.value).toBe("completed");
  // The slow deliveries still hold their slots: none timed out or finished before the apply did.
  const jobs = await webhookJobs(e, hooks);
  expect(jobs.filter((j) => j.status.value === "running").length).toBe(2);
  expect(jobs.every((j) => j.attempts <= 1 && j.error === "")).toBe(true);
});

test("one slow receiver takes at most its share of slots: another receiver still gets its delivery", async () => {
  const e = await env({}); // the default limit: 3 deliveries per receiver
  workers.push(startWorker(e.queue, { idleMs: 20, maintainEveryMs: 50, concurrency: 4 }));
  const hooks: number[] = [];
  for (let i = 0; i < 4; i++)
    hooks.push((await hookAndRule(e.t, { url: slow.url, eventTypes: ["object_created"] })).hook.id);
  const fast = startReceiver();
  await hookAndRule(e.t, { url: fast.url, eventTypes: ["object_created"] });
  try {
    const site = await e.t.json("POST", "/api/dcim/sites/", { body: { name: "F", slug: "f" } });
    expect(site.status).toBe(201);
    await waitFor("the other receiver's delivery", () => fast.received.length === 1);
    const jobs = await webhookJobs(e, hooks);
    expect(jobs.filter((j) => j.status.value === "running").length).toBe(3);
    expect(jobs.every((j) => j.error === "")).toBe(true);
  } finally {
    fast.stop();
  }
});
