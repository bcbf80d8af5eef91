/**
 * Issue 29, point 5: `?background=true` on bulk writes (NetBox 4.7) answers 202 with the job;
 * the job runs the synchronous path as the same user. Real redis-server behind the Upstash
 * bridge, the in-process worker.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { BASE, makeTestApp } from "../helpers/app";
import { makeTasksEnv, waitFor, type TasksEnv } from "./harness";

let env: TasksEnv;
beforeAll(async () => {
  env = await makeTasksEnv();
  env.startWorker();
});
afterAll(() => env.close());

async function finished(jobId: number) {
  return waitFor("the bulk job to finish", async () => {
    const job = await env.t.json("GET", `/api/core/jobs/${jobId}/`);
    return ["completed", "errored", "failed"].includes(job.body.status.value) ? job.body : null;
  });
}

describe("?background=true on bulk writes", () => {
  test("bulk create: 202 {job: {id, url, status}}; the job creates all, its data holds {status_code: 201, data: [{id, url}]}", async () => {
    const r = await env.t.json("POST", "/api/dcim/sites/?background=true", {
      body: [
        { name: "bg-1", slug: "bg-1" },
        { name: "bg-2", slug: "bg-2" },
      ],
    });
    expect(r.status).toBe(202);
    expect(r.body.job).toEqual({
      id: expect.any(Number),
      url: `${BASE}/api/core/jobs/${r.body.job.id}/`,
      status: "pending",
    });
    const job = await finished(r.body.job.id);
    expect(job.status.value).toBe("completed");
    expect(job.user).toMatchObject({ username: "admin" });
    expect(job.data.status_code).toBe(201);
    expect(job.data.data).toHaveLength(2);
    // only references: the records are read with the reader's own permissions
    expect(Object.keys(job.data.data[0]).sort()).toEqual(["id", "url"]);
    const sites = await env.t.json("GET", "/api/dcim/sites/?slug=bg-1&slug=bg-2");
    expect(sites.body.count).toBe(2);
  });

  test("bulk update and delete run in the background too", async () => {
    const sites = (await env.t.json("GET", "/api/dcim/sites/?slug=bg-1&slug=bg-2")).body.results;
    const ids = sites.map((s: any) => ({ id: s.id }));
    const patch = await env.t.json("PATCH", "/api/dcim/sites/?background=true", {
      body: ids.map((x: any) => ({ ...x, description: "patched later" })),
    });
    expect(patch.status).toBe(202);
    expect((await finished(patch.body.job.id)).data.status_code).toBe(200);
    const read = await env.t.json("GET", `/api/dcim/sites/${ids[0].id}/`);
    expect(read.body.description).toBe("patched later");
    const del = await env.t.json("DELETE", "/api/dcim/sites/?background=true", { body: ids });
    expect(del.status).toBe(202);
    expect((await finished(del.body.job.id)).data.status_code).toBe(204);
    expect((await env.t.json("GET", `/api/dcim/sites/${ids[0].id}/`)).status).toBe(404);
  });

  test("a failing item ends the job errored with the per-item errors; nothing is written", async () => {
    const r = await env.t.json("POST", "/api/dcim/sites/?background=true", {
      body: [
        { name: "bg-ok", slug: "bg-ok" },
        { name: "bg-bad", slug: "" },
      ],
    });
    const job = await finished(r.body.job.id);
    expect(job.status.value).toBe("errored");
    expect(job.data).toEqual({
      status_code: 400,
      data: {
        detail: "1 of 2 objects failed validation.",
        errors: [{ index: 1, errors: { slug: expect.any(Array) } }],
      },
    });
    expect((await env.t.json("GET", "/api/dcim/sites/?slug=bg-ok")).body.count).toBe(0);
  });

  test("permission is checked before queueing; If-Match with background is a 400; a single object ignores background", async () => {
    const viewer = await env.t.user("bg-viewer", [[["view"], "dcim.site"]]);
    const refused = await env.t.json("POST", "/api/dcim/sites/?background=true", {
      token: viewer,
      body: [{ name: "bg-no", slug: "bg-no" }],
    });
    expect(refused.status).toBe(403);
    const conditional = await env.t.json("PATCH", "/api/dcim/sites/?background=true", {
      body: [{ id: 1, description: "x" }],
      headers: { "if-match": "*" },
    });
    expect(conditional.status).toBe(400);
    const single = await env.t.json("POST", "/api/dcim/sites/?background=true", {
      body: { name: "bg-single", slug: "bg-single" },
    });
    expect(single.status).toBe(201);
  });

  test("without a tasks Redis: 503 tasks_unavailable, nothing queued or written", async () => {
    const plain = await makeTestApp();
    try {
      const r = await plain.json("POST", "/api/dcim/sites/?background=true", {
        body: [{ name: "bg-x", slug: "bg-x" }],
      });
      expect(r.status).toBe(503);
      expect(r.body.error).toBe("tasks_unavailable");
      expect((await plain.json("GET", "/api/dcim/sites/?slug=bg-x")).body.count).toBe(0);
    } finally {
      await plain.close();
    }
  });
});
