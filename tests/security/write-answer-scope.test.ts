/**
 * A caller whose view is constrained writes objects pointing at things it may and may not view
 * (decision 0167): each answer hides, as of after the write, what it may not view — a relation
 * the write moved from a hidden object to a visible one shows the visible one in full, one it
 * kept on a hidden object shows its id only, a hidden tag is left out — on a local file and on a remote database, where
 * that judgement rides in the write batch (2 round trips).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { addField, CO, create, makeCot } from "../custom-objects/fixtures";
import { userWith } from "../helpers/grants";
import { appOn, type BackendApp } from "../helpers/remote-db";
import { settleBeforeCounting } from "../helpers/settle";

const SITES = "/api/dcim/sites/";
const WIDGETS = `${CO}/widgets/`;

for (const backend of ["local", "remote"] as const)
  describe(backend, () => {
    let app: BackendApp;
    const t = () => app.t;
    let writer: string;
    const tenant: Record<string, number> = {};
    const tag: Record<string, number> = {};
    const site: Record<string, number> = {};
    beforeAll(async () => {
      app = await appOn(backend, `write-answer-scope-${backend}`);
      for (const slug of ["seen", "unseen"]) {
        tenant[slug] = (
          await t().json("POST", "/api/tenancy/tenants/", { body: { name: slug, slug } })
        ).body.id;
        tag[slug] = (
          await t().json("POST", "/api/extras/tags/", { body: { name: slug, slug } })
        ).body.id;
        site[slug] = (
          await t().json("POST", SITES, {
            body: { name: slug, slug, status: slug === "seen" ? "active" : "planned" },
          })
        ).body.id;
      }
      const cot = await makeCot(t(), "widgets");
      await addField(t(), cot.id, { name: "title", type: "text", primary: true });
      await addField(t(), cot.id, {
        name: "site",
        type: "object",
        related_object_type: "dcim.site",
      });
      writer = (
        await userWith(t(), "writer", [
          [["add", "change", "view"], "dcim.site", { name__isw: "w" }],
          [["view"], "dcim.site", { status: "active" }],
          [["view"], "tenancy.tenant", { slug: "seen" }],
          [["view"], "extras.tag", { slug: "seen" }],
          [["add", "change", "view"], "custom_objects.widgets", null],
        ])
      ).token;
    });
    afterAll(() => app.close());

    /** A write as the constrained caller, with its round trips on the remote database. */
    async function write(method: string, path: string, body: unknown) {
      // earlier writes' search flush and the token's use run off the request: not the write's
      await settleBeforeCounting(
        t().app,
        () => t().json("GET", "/api/status/", { token: writer }),
        "writer",
      );
      app.proxy?.reset();
      const r = await t().json(method, path, { token: writer, body });
      expect(r.status, JSON.stringify(r.body)).toBe(method === "POST" ? 201 : 200);
      return { body: r.body, trips: app.proxy?.count ?? 0 };
    }
    const hidden = (id: number | undefined) => ({ id });

    test("a PATCH moving a site off a hidden tenant answers the visible one; a hidden tag left out", async () => {
      const made = await t().json("POST", SITES, {
        body: { name: "w1", slug: "w1", tenant: tenant.unseen, tags: [tag.unseen] },
      });
      // warm caches, then the measured write
      await write("PATCH", `${SITES}${made.body.id}/`, { description: "warm" });
      const { body, trips } = await write("PATCH", `${SITES}${made.body.id}/`, {
        tenant: tenant.seen,
        tags: [tag.seen, tag.unseen],
      });
      expect(body.tenant).toMatchObject({ id: tenant.seen, slug: "seen" });
      // a tag the caller may not view is left out of the answer (decision 0153), as a GET does
      expect((body.tags as Array<{ slug: string }>).map((x) => x.slug)).toEqual(["seen"]);
      expect(JSON.stringify(body)).not.toContain('"unseen"');
      if (backend === "remote") expect(trips).toBeLessThanOrEqual(2);
      // and the next PATCH, moving it back onto the hidden tenant (set by someone who may), hides it
      await t().json("PATCH", `${SITES}${made.body.id}/`, { body: { tenant: tenant.unseen } });
      const again = await write("PATCH", `${SITES}${made.body.id}/`, { description: "again" });
      expect(again.body.tenant).toEqual(hidden(tenant.unseen));
    });

    test("creates of custom objects pointing at a visible and a hidden site: each answer as a GET answers", async () => {
      const one = await create(t(), "widgets", { title: "warm", site: site.seen });
      expect(one.site.id).toBe(site.seen);
      // the superuser points one at the hidden site; the caller re-titles it and makes another
      const other = await create(t(), "widgets", { title: "theirs", site: site.unseen });
      await write("PATCH", `${WIDGETS}${other.id}/`, { title: "warm 2" });
      const patched = await write("PATCH", `${WIDGETS}${other.id}/`, { title: "mine now" });
      expect(patched.body.site).toEqual(hidden(site.unseen));
      const created = await write("POST", WIDGETS, [
        { title: "a", site: site.seen },
        { title: "b", site: null },
      ]);
      expect(created.body[0].site).toMatchObject({ id: site.seen, name: "seen" });
      for (const w of [patched.body, ...created.body]) {
        const got = await t().json("GET", `${WIDGETS}${w.id}/`, { token: writer });
        expect(w).toEqual(got.body);
      }
      if (backend === "remote")
        expect(Math.max(patched.trips, created.trips)).toBeLessThanOrEqual(2);
    });
  });
