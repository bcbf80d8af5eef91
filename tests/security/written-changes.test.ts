/**
 * Change records a process wrote are remembered for their revert like those it served (decision
 * 0133): on a remote database the revert of one starts from the copy, its row read again in the
 * write's one read as the proof. That path must answer every caller as the ordinary one does
 * (the record read first): an unknown id to one who may not view the record, whatever the flags;
 * 403 to a read-only token; the object's own 403 or 404 to a constrained caller; nothing written.
 * The same steps run on a local file (which remembers nothing it wrote: the ordinary path) and
 * remotely, and their answers are compared.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { servicesOf } from "../../src/app";
import { seenChange } from "../../src/core/changes/seen";
import type { TestApp } from "../helpers/app";
import { userWith } from "../helpers/grants";
import { appOn, type BackendApp } from "../helpers/remote-db";

type Answer = { step: string; status: number; body: unknown };
const answers: Record<string, Answer[]> = {};

function suite(backend: "local" | "remote") {
  describe(`the revert of a record this process wrote (${backend})`, () => {
    let on: BackendApp;
    let t: TestApp;
    const seen: Answer[] = [];
    answers[backend] = seen;
    beforeAll(async () => {
      on = await appOn(backend, "written-changes");
      t = on.t;
    });
    afterAll(() => on.close());

    /** A site changed by the admin, and the change's id read past the API (never served). */
    const changedSite = async (slug: string, description: string) => {
      const made = await t.json("POST", "/api/dcim/sites/", {
        body: { name: slug, slug, description: "before" },
      });
      expect(made.status).toBe(201);
      const patched = await t.json("PATCH", `/api/dcim/sites/${made.body.id}/`, {
        body: { description },
      });
      expect(patched.status).toBe(200);
      const rows = (await t.deps.db.orm.all(
        sql`SELECT max(id) AS id FROM object_changes`,
      )) as Array<{ id: number }>;
      const change = Number(rows[0]!.id);
      // the path under test: remembered remotely, not on a local file (the test can fail)
      expect(seenChange(servicesOf(t.app), change) !== undefined).toBe(backend === "remote");
      return { site: made.body.id as number, change };
    };
    const changeCount = async () =>
      Number(
        ((await t.deps.db.orm.all(sql`SELECT count(*) AS n FROM object_changes`)) as any[])[0].n,
      );
    const revert = async (step: string, change: number, query: string, token: string) => {
      const r = await t.json("POST", `/api/core/object-changes/${change}/revert/${query}`, {
        token,
      });
      seen.push({ step, status: r.status, body: r.body });
      return r;
    };
    const description = async (id: number) =>
      (await t.json("GET", `/api/dcim/sites/${id}/`)).body.description;

    test("one who may not view the record hears an unknown id, whatever the flags", async () => {
      const { site, change } = await changedSite("w-hidden", "after");
      const outsider = (
        await userWith(t, "w-outsider", [[["view", "add", "change", "delete"], "dcim.site", null]])
      ).token;
      const before = await changeCount();
      for (const query of ["", "?dry_run=1", "?dry_run=bogus", "?force=1"]) {
        const hidden = await revert(`hidden ${query}`, change, query, outsider);
        const missing = await revert(`missing ${query}`, 987654, query, outsider);
        expect(hidden.status, query).toBe(missing.status);
        expect(hidden.body, query).toEqual(missing.body);
      }
      expect(await changeCount()).toBe(before);
      expect(await description(site)).toBe("after");
    });

    test("a read-only token: 403, nothing written", async () => {
      const { site, change } = await changedSite("w-readonly", "after");
      const readOnly = (
        await userWith(
          t,
          "w-readonly",
          [
            [["view", "change"], "dcim.site", null],
            [["view"], "core.objectchange", null],
          ],
          { writeEnabled: false },
        )
      ).token;
      const before = await changeCount();
      const r = await revert("read-only", change, "", readOnly);
      expect(r.status, JSON.stringify(r.body)).toBe(403);
      expect(await changeCount()).toBe(before);
      expect(await description(site)).toBe("after");
    });

    test("a constrained caller: the object outside their view is unknown, outside their change 403", async () => {
      const unseen = await changedSite("w-unseen", "after");
      const viewed = await changedSite("w-viewed", "after");
      const limited = (
        await userWith(t, "w-limited", [
          [["view"], "dcim.site", { slug: "w-viewed" }],
          [["change"], "dcim.site", { slug: "w-mine" }],
          [["view"], "core.objectchange", null],
        ])
      ).token;
      const before = await changeCount();
      for (const query of ["", "?dry_run=1"]) {
        const hidden = await revert(`unseen object ${query}`, unseen.change, query, limited);
        expect(hidden.status, JSON.stringify(hidden.body)).toBe(404);
        expect(JSON.stringify(hidden.body)).not.toContain("w-unseen");
        const refused = await revert(`viewed object ${query}`, viewed.change, query, limited);
        expect(refused.status, JSON.stringify(refused.body)).toBe(403);
      }
      expect(await changeCount()).toBe(before);
      expect(await description(unseen.site)).toBe("after");
      expect(await description(viewed.site)).toBe("after");
    });

    test("a large record written is not held in memory; its revert still works", async () => {
      const made = await t.json("POST", "/api/dcim/sites/", {
        body: { name: "w-large", slug: "w-large", comments: "x".repeat(300_000) },
      });
      expect(made.status).toBe(201);
      const rows = (await t.deps.db.orm.all(
        sql`SELECT max(id) AS id FROM object_changes`,
      )) as Array<{ id: number }>;
      const change = Number(rows[0]!.id);
      expect(seenChange(servicesOf(t.app), change) === undefined).toBe(true);
      const undone = await revert("large", change, "", t.admin);
      expect(undone.status, JSON.stringify(undone.body).slice(0, 300)).toBe(200);
      expect((await t.json("GET", `/api/dcim/sites/${made.body.id}/`)).status).toBe(404);
    });

    test("the one who may: reverted, and a second revert of the same record is a 409", async () => {
      const { site, change } = await changedSite("w-mine", "after");
      const editor = (
        await userWith(t, "w-editor", [
          [["view", "change"], "dcim.site", { slug: "w-mine" }],
          [["view"], "core.objectchange", null],
        ])
      ).token;
      const done = await revert("mine", change, "", editor);
      expect(done.status, JSON.stringify(done.body)).toBe(200);
      expect(await description(site)).toBe("before");
      const again = await revert("mine again", change, "", editor);
      expect(again.status, JSON.stringify(again.body)).toBe(409);
    });

    test("a delete and a create this process wrote, reverted", async () => {
      const lastChange = async () =>
        Number(
          ((await t.deps.db.orm.all(sql`SELECT max(id) AS id FROM object_changes`)) as any[])[0].id,
        );
      const gone = await t.json("POST", "/api/dcim/sites/", {
        body: { name: "w-gone", slug: "w-gone", description: "kept" },
      });
      expect((await t.json("DELETE", `/api/dcim/sites/${gone.body.id}/`)).status).toBe(204);
      const deleted = await lastChange();
      expect(seenChange(servicesOf(t.app), deleted) !== undefined).toBe(backend === "remote");
      const back = await revert("delete reverted", deleted, "", t.admin);
      expect(back.status, JSON.stringify(back.body)).toBe(200);
      expect(await description(gone.body.id)).toBe("kept");
      const made = await t.json("POST", "/api/dcim/sites/", {
        body: { name: "w-made", slug: "w-made" },
      });
      const created = await lastChange();
      expect(seenChange(servicesOf(t.app), created) !== undefined).toBe(backend === "remote");
      const undone = await revert("create reverted", created, "", t.admin);
      expect(undone.status, JSON.stringify(undone.body)).toBe(200);
      expect((await t.json("GET", `/api/dcim/sites/${made.body.id}/`)).status).toBe(404);
    });
  });
}

suite("local");
suite("remote");

test("the same answers on a local file (the ordinary path) and remote (the remembered record)", () => {
  const shape = (xs: Answer[]) =>
    xs.map(({ step, status, body }) => ({
      step,
      status,
      // the stamps differ between the two databases; what is answered, and how, does not
      body: strip(body),
    }));
  expect(answers.local!.length).toBeGreaterThan(10);
  expect(shape(answers.remote!)).toEqual(shape(answers.local!));
});

const STAMPS = new Set(["created", "last_updated"]);
const strip = (body: unknown): unknown =>
  JSON.parse(JSON.stringify(body), (k, v) => (STAMPS.has(k) ? undefined : v));
