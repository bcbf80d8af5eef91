/**
 * Security (issue 27, row 9): a background job is its owner's. Another user who holds view on
 * jobs sees neither the job nor its data (a hidden type's description and field names), in the
 * list, its filters and counts, or by id; superusers see every job (decision 0064).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTasksEnv, waitFor, type TasksEnv } from "../tasks/harness";
import { doc, SCHEMA } from "../schema/helpers";
import { userWith } from "../helpers/grants";

let env: TasksEnv;
let jobId: number;
beforeAll(async () => {
  env = await makeTasksEnv();
  env.startWorker();
  const hidden = doc([
    {
      name: "payroll",
      slug: "payroll",
      description: "Salaries HIDDEN-DESC",
      fields: [{ id: 1, name: "salary_hidden_field", type: "integer", primary: false }],
    },
  ]);
  const r = await env.t.json("POST", `${SCHEMA}/apply/?background=true`, { body: hidden });
  expect(r.status).toBe(202);
  jobId = r.body.job.id;
  await waitFor("the apply job to finish", async () => {
    const job = await env.t.json("GET", `/api/core/jobs/${jobId}/`);
    return job.body.status.value === "completed" ? job.body : null;
  });
});
afterAll(() => env.close());

const leaks = (body: unknown) =>
  /HIDDEN-DESC|salary_hidden_field|payroll/.test(JSON.stringify(body));

describe("row 9: jobs are visible to their owner only", () => {
  test("another user with view on jobs cannot read the admin's schema apply result", async () => {
    const { token: mallory } = await userWith(env.t, "mallory", [[["view"], "core.job", null]]);
    const list = await env.t.json("GET", "/api/core/jobs/?limit=1000", { token: mallory });
    expect(list.status).toBe(200);
    expect(list.body.count).toBe(0);
    expect(leaks(list.body)).toBe(false);
    for (const q of ["name=schema.apply", `id=${jobId}`, "q=schema"]) {
      const r = await env.t.json("GET", `/api/core/jobs/?${q}`, { token: mallory });
      expect(r.body.count).toBe(0);
    }
    const one = await env.t.json("GET", `/api/core/jobs/${jobId}/`, { token: mallory });
    const none = await env.t.json("GET", "/api/core/jobs/999999/", { token: mallory });
    expect(one.status).toBe(404);
    expect(one.body).toEqual(none.body);
    // the owner (here a superuser) still reads it
    const own = await env.t.json("GET", `/api/core/jobs/${jobId}/`);
    expect(leaks(own.body)).toBe(true);
  });

  test("a user sees their own jobs", async () => {
    const { token: owner } = await userWith(env.t, "owner", [
      [["view"], "core.job", null],
      [["view", "add", "change"], "custom_objects.customobjecttype", null],
    ]);
    const r = await env.t.json("POST", `${SCHEMA}/apply/?background=true`, {
      token: owner,
      body: doc([{ name: "mine", slug: "mine", fields: [] }]),
    });
    expect(r.status).toBe(202);
    const list = await env.t.json("GET", "/api/core/jobs/", { token: owner });
    expect(list.body.count).toBe(1);
    expect(list.body.results[0].id).toBe(r.body.job.id);
    expect((await env.t.json("GET", `/api/core/jobs/${jobId}/`, { token: owner })).status).toBe(
      404,
    );
  });
});
