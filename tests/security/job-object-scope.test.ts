/**
 * A job's `object` is hidden as a hidden relation is: a job's owner who may not (or no longer)
 * view the object it names sees only the id the job stores, never its name, URL or display; an
 * object they may view, and a superuser's answer, are shown whole (on a local file and a remote
 * database).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { servicesOf } from "../../src/app";
import { jobs } from "../../src/db/schema";
import { userWith } from "../helpers/grants";
import { appOn, type BackendApp } from "../helpers/remote-db";

for (const backend of ["local", "remote"] as const)
  describe(`${backend}: a job's object`, () => {
    let app: BackendApp;
    const t = () => app.t;
    let owner: string;
    const job: Record<"open" | "hidden", number> = { open: 0, hidden: 0 };
    beforeAll(async () => {
      app = await appOn(backend, `job-object-${backend}`);
      const site = async (slug: string) =>
        (await t().json("POST", "/api/dcim/sites/", { body: { name: `JOBSITE ${slug}`, slug } }))
          .body.id as number;
      const open = await site("job-open");
      const hidden = await site("job-hidden");
      const user = await userWith(t(), "job-owner", [
        [["view"], "core.job", null],
        [["view"], "dcim.site", { slug: "job-open" }],
      ]);
      owner = user.token;
      // a job as the task queue records one: its owner's, naming a site
      const type = await servicesOf(t().app).objectTypes.ensure("dcim", "site");
      for (const [key, objectId] of [
        ["open", open],
        ["hidden", hidden],
      ] as const) {
        const [row] = await t()
          .deps.db.orm.insert(jobs)
          .values({
            name: "test.job",
            status: "completed",
            userId: user.id,
            objectTypeId: type.id,
            objectId,
            attempts: 1,
          })
          .returning();
        job[key] = row!.id;
      }
    });
    afterAll(() => app.close());

    test("a hidden object keeps only its id; a visible one, and a superuser's, stay whole", async () => {
      const hidden = await t().json("GET", `/api/core/jobs/${job.hidden}/`, { token: owner });
      expect(hidden.status, JSON.stringify(hidden.body)).toBe(200);
      expect(hidden.body.object).toEqual({ id: expect.any(Number) });
      expect(JSON.stringify(hidden.body)).not.toContain("job-hidden");
      const list = await t().json("GET", "/api/core/jobs/", { token: owner });
      expect(list.body.count).toBe(2);
      expect(JSON.stringify(list.body)).not.toContain("job-hidden");
      const open = await t().json("GET", `/api/core/jobs/${job.open}/`, { token: owner });
      expect(open.body.object.display).toBe("JOBSITE job-open");
      const admin = await t().json("GET", `/api/core/jobs/${job.hidden}/`);
      expect(admin.body.object.display).toBe("JOBSITE job-hidden");
    });
  });
