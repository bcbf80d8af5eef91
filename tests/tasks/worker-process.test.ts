/**
 * `npm run worker` (src/task-worker.ts) as a real child process: it delivers webhooks; killed
 * with SIGKILL while the receiver holds its request, the job is delivered again by another
 * worker once the visibility timeout has passed, and completes; SIGTERM stops it cleanly.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import {
  hookAndRule,
  jobsNamed,
  LOOPBACK_ALLOWED,
  makeTasksEnv,
  startReceiver,
  waitFor,
  type TasksEnv,
} from "./harness";
import { within } from "../helpers/wait";

const ROOT = join(import.meta.dir, "..", "..");
let env: TasksEnv;
let cleanup: () => Promise<unknown> = async () => {};
beforeAll(async () => {
  env = await makeTasksEnv();
});
afterAll(() => env.close());

/** Collects a child's output as it comes. */
function collect(stream: ReadableStream<Uint8Array>) {
  const out = { text: "", done: Promise.resolve() };
  out.done = (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of stream) out.text += decoder.decode(chunk, { stream: true });
  })();
  return out;
}

function spawnWorker(extraEnv: Record<string, string> = {}) {
  return Bun.spawn([process.execPath, "run", "src/task-worker.ts"], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? "",
      DATABASE_URL: env.t.dbUrl,
      REDIS_TASKS_URL: env.stack.bridge.url,
      REDIS_TASKS_TOKEN: env.stack.bridge.token,
      TASK_VISIBILITY_TIMEOUT_MS: "1000",
      TASK_RETRY_BACKOFF_MS: "50",
      LOG_LEVEL: "info",
      ...LOOPBACK_ALLOWED,
      ...extraEnv,
    },
    stdout: "pipe",
    stderr: "pipe",
  });
}

test("a worker killed mid-delivery: the job is delivered again after the visibility timeout and completes", async () => {
  let releaseHeld!: () => void;
  const held = new Promise<void>((r) => (releaseHeld = r));
  const receiver = startReceiver(async (_d, n) => {
    if (n === 1) await held; // the first delivery hangs until the test ends
    return new Response("ok");
  });
  const child = spawnWorker();
  try {
    const { hook } = await hookAndRule(env.t, {
      url: receiver.url,
      eventTypes: ["object_created"],
      secret: "kill",
    });
    const site = await env.t.json("POST", "/api/dcim/sites/", {
      body: { name: "Killed", slug: "killed" },
    });
    expect(site.status).toBe(201);

    await waitFor("the child worker's delivery", () => receiver.received.length >= 1, 15_000);
    const [running] = (await jobsNamed(env.t, "webhook.deliver")).filter(
      (j) => j.object_id === hook.id,
    );
    expect(running).toMatchObject({ status: { value: "running" }, attempts: 1 });

    child.kill("SIGKILL");
    await child.exited;
    const killedAt = Date.now();
    // The dead worker's lease outlived it: nothing is taken back on the clock of the kill…
    expect((await env.queue.maintain(killedAt)).reclaimed).toBe(0);
    // …and once the lease has run out (a later clock given to `maintain`, not a wait) it is.
    const later = Date.now() + 2 * env.queue.visibilityTimeoutMs;
    expect((await env.queue.maintain(later)).reclaimed).toBe(1);
    const rescuer = env.startWorker();
    cleanup = () => rescuer.stop();

    await waitFor("the redelivery", () => receiver.received.length >= 2, 10_000);
    const job = await waitFor("the job to complete", async () =>
      (await jobsNamed(env.t, "webhook.deliver")).find(
        (j) => j.object_id === hook.id && j.status.value === "completed",
      ),
    );
    expect(job).toMatchObject({ attempts: 2, data: { status_code: 200 } });
    // The same delivery both times: same body, same signature.
    expect(receiver.received[1]!.body).toBe(receiver.received[0]!.body);
    expect(receiver.received[1]!.headers["x-hook-signature"]).toBe(
      receiver.received[0]!.headers["x-hook-signature"]!,
    );
    // Far past every lease and retry time, nothing is left to take back or run again.
    const end = Date.now() + 10 * env.queue.visibilityTimeoutMs;
    expect(await env.queue.maintain(end)).toEqual({ promoted: 0, reclaimed: 0 });
    expect(receiver.received.length).toBe(2);
  } finally {
    child.kill("SIGKILL");
    releaseHeld();
    receiver.stop();
    await cleanup();
  }
}, 40_000);

test("npm run worker: delivers, and stops cleanly on SIGTERM", async () => {
  const receiver = startReceiver();
  const child = spawnWorker();
  const output = collect(child.stdout);
  try {
    await waitFor("the worker to start", () => output.text.includes("task worker started"), 15_000);
    const { hook } = await hookAndRule(env.t, {
      url: receiver.url,
      objectTypes: ["tenancy.tenant"],
      eventTypes: ["object_created"],
    });
    await env.t.json("POST", "/api/tenancy/tenants/", {
      body: { name: "Worker tenant", slug: "worker-tenant" },
    });
    await waitFor("the delivery", () => receiver.received.length >= 1, 15_000);
    await waitFor("the job to complete", async () =>
      (await jobsNamed(env.t, "webhook.deliver")).some(
        (j) => j.object_id === hook.id && j.status.value === "completed",
      ),
    );
    child.kill("SIGTERM");
    expect(await within(child.exited, 10_000)).toBe(0); // a bound on a hang, not a speed check
    await output.done;
    expect(output.text).toContain("task worker stopping");
    expect(output.text).not.toContain(env.stack.bridge.token);
  } finally {
    child.kill("SIGKILL");
    receiver.stop();
  }
}, 40_000);

test("npm run worker without REDIS_TASKS_URL stops with one clear line", async () => {
  const child = spawnWorker({ REDIS_TASKS_URL: "" });
  expect(await child.exited).toBe(1);
  expect((await new Response(child.stderr).text()).trim()).toBe(
    "invalid setting REDIS_TASKS_URL: is required by the task worker",
  );
});
