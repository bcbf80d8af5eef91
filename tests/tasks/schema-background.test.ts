/**
 * `POST schema/apply/?background=true`: 202 with a job; the job's data is what the
 * synchronous call answers (`{status_code, …body}`), success or refusal.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { servicesOf } from "../../src/app";
import { startRemoteDb } from "../helpers/remote-db";
import { BASE, makeTestApp } from "../helpers/app";
import { doc, SCHEMA } from "../schema/helpers";
import { eq } from "drizzle-orm";
import { outbox } from "../../src/db/schema";
import { TIMED_OUT, within } from "../helpers/wait";
import { makeTasksEnv, waitFor, type TasksEnv } from "./harness";

let env: TasksEnv;
beforeAll(async () => {
  env = await makeTasksEnv();
  env.startWorker();
});
afterAll(() => env.close());

const widget = (fields: unknown[], removed: unknown[] = []) =>
  doc([
    {
      name: "bg_widget",
      slug: "bg_widget",
      fields,
      ...(removed.length ? { removed_fields: removed } : {}),
    },
  ]);
const CODE = { id: 1, name: "code", type: "text", primary: true };

async function applyInBackground(body: unknown, query = "") {
  const r = await env.t.json("POST", `${SCHEMA}/apply/?background=true${query}`, { body });
  expect(r.status).toBe(202);
  expect(r.body.job).toEqual({
    id: expect.any(Number),
    url: `${BASE}/api/core/jobs/${r.body.job.id}/`,
  });
  return waitFor("the apply job to finish", async () => {
    const job = await env.t.json("GET", `/api/core/jobs/${r.body.job.id}/`);
    return ["completed", "errored", "failed"].includes(job.body.status.value) ? job.body : null;
  });
}

describe("background schema apply", () => {
  test("applies like the synchronous call; data holds {status_code: 200, applied, diffs}", async () => {
    const preview = await env.t.json("POST", `${SCHEMA}/preview/`, {
      body: { schema: widget([CODE]) },
    });
    expect(preview.status).toBe(200);
    const job = await applyInBackground({ schema: widget([CODE]) });
    expect(job).toMatchObject({
      name: "schema.apply",
      status: { value: "completed" },
      attempts: 1,
      object_type: "custom_objects.customobjecttype",
      user: { username: "admin" },
    });
    expect(job.data).toEqual({
      status_code: 200,
      applied: true,
      diffs: preview.body.diffs,
      trash: [],
    });
    expect(
      (await env.t.json("GET", "/api/plugins/custom-objects/custom-object-types/?slug=bg_widget"))
        .body.count,
    ).toBe(1);
    // The synchronous call now finds nothing to change.
    const again = await env.t.json("POST", `${SCHEMA}/apply/`, {
      body: { schema: widget([CODE]) },
    });
    expect(again.status).toBe(200);
    expect(again.body.diffs.every((d: any) => !d.has_changes)).toBe(true);
  });

  test("a refusal ends the job errored with the same body and status code as the synchronous call", async () => {
    await env.t.json("POST", "/api/plugins/custom-objects/bg_widget/", { body: { code: "W-1" } });
    const destructive = widget([], [{ id: 1, name: "code", type: "text" }]);
    const sync = await env.t.json("POST", `${SCHEMA}/apply/`, { body: { schema: destructive } });
    expect(sync.status).toBe(409);
    const job = await applyInBackground({ schema: destructive });
    expect(job.status.value).toBe("errored");
    expect(job.data).toEqual({ status_code: 409, ...sync.body });
    expect(job.error).toBe(sync.body.detail);

    // allow_destructive from the query string reaches the job.
    const allowed = await applyInBackground(destructive, "&allow_destructive=true");
    expect(allowed.status.value).toBe("completed");
    expect(allowed.data.applied).toBe(true);
  });

  test("an invalid document: errored with the 400 invalid_schema body", async () => {
    const bad = { schema: { schema_version: "2", types: [] } };
    const sync = await env.t.json("POST", `${SCHEMA}/apply/`, { body: bad });
    expect(sync.status).toBe(400);
    const job = await applyInBackground(bad);
    expect(job.data).toEqual({ status_code: 400, ...sync.body });
    expect(job.data.error).toBe("invalid_schema");
  });

  test("permissions are checked before anything is queued", async () => {
    const before = (await env.t.json("GET", "/api/core/jobs/?name=schema.apply")).body.count;
    const viewer = await env.t.user("bg-viewer", [[["view"], "custom_objects.customobjecttype"]]);
    const r = await env.t.json("POST", `${SCHEMA}/apply/?background=true`, {
      token: viewer,
      body: { schema: widget([CODE]) },
    });
    expect(r.status).toBe(403);
    expect((await env.t.json("GET", "/api/core/jobs/?name=schema.apply")).body.count).toBe(before);
  });

  test("tasks Redis frozen at the hand-off after the answer: 202, the job kept pending, run once Redis is back", async () => {
    const redisPid = env.stack.redis.pid;
    process.kill(redisPid, "SIGSTOP");
    let id: number;
    try {
      // a bound on a hang: the answer never waits on Redis
      const r = await within(
        env.t.json("POST", `${SCHEMA}/apply/?background=true`, {
          body: { schema: doc([{ name: "frozen", slug: "frozen", fields: [CODE] }]) },
        }),
        15_000,
      );
      if (r === TIMED_OUT) throw new Error("the 202 waited for the frozen Redis");
      expect(r.status).toBe(202);
      id = r.body.job.id;
      // committed with its outbox row, and not handed over: Redis cannot take it while frozen
      const job = await env.t.json("GET", `/api/core/jobs/${id}/`);
      expect(job.body.status.value).toBe("pending");
      const [row] = await env.t.deps.db.orm.select().from(outbox).where(eq(outbox.jobId, id));
      expect(row?.relayed ?? null).toBeNull();
    } finally {
      process.kill(redisPid, "SIGCONT");
    }
    // the hand-off under way when Redis froze, or else the relay loop, gives it over: it runs once
    const job = await waitFor(
      "the frozen-out apply job to finish",
      async () => {
        const j = await env.t.json("GET", `/api/core/jobs/${id}/`);
        return ["completed", "errored", "failed"].includes(j.body.status.value) ? j.body : null;
      },
      30_000,
    );
    expect(job).toMatchObject({ status: { value: "completed" }, attempts: 1 });
    expect(job.data).toMatchObject({ status_code: 200, applied: true });
  }, 60_000);

  test("without a tasks Redis: 503, and the synchronous path still works", async () => {
    const plain = await makeTestApp();
    try {
      const r = await plain.json("POST", `${SCHEMA}/apply/?background=true`, {
        body: { schema: widget([CODE]) },
      });
      expect(r.status).toBe(503);
      expect(r.body.error).toBe("tasks_unavailable");
      expect(
        (await plain.json("POST", `${SCHEMA}/apply/`, { body: { schema: widget([CODE]) } })).status,
      ).toBe(200);
    } finally {
      await plain.close();
    }
  });
});

test("on a remote database the job applies as the route does: reads and one batch, no transaction (decision 0136)", async () => {
  const remote = await startRemoteDb("schema-background");
  const on = await makeTasksEnv({ DATABASE_URL: remote.url });
  try {
    on.startWorker();
    const db = servicesOf(on.t.app).db;
    const transaction = db.transaction;
    let transactions = 0;
    db.transaction = (work) => {
      transactions++;
      return transaction(work);
    };
    const r = await on.t.json("POST", `${SCHEMA}/apply/?background=true`, {
      body: { schema: widget([CODE, { id: 2, name: "size", type: "integer" }]) },
    });
    expect(r.status).toBe(202);
    const job = await waitFor("the apply job to finish", async () => {
      const j = await on.t.json("GET", `/api/core/jobs/${r.body.job.id}/`);
      return ["completed", "errored", "failed"].includes(j.body.status.value) ? j.body : null;
    });
    expect(job.status.value, JSON.stringify(job.data)).toBe("completed");
    expect(job.data).toMatchObject({ status_code: 200, applied: true });
    const made = await on.t.json("POST", "/api/plugins/custom-objects/bg_widget/", {
      body: { code: "W-9", size: 3 },
    });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    expect(transactions).toBe(0);
  } finally {
    await on.close();
    await remote.stop();
  }
});
