/**
 * A revert's dry run previews the real revert (decision 0162): the same answer (the object with
 * what its fields derive — `display`, `_context`, the nested forms of what it links to — and the
 * same diff), only nothing is written. Each case dry-runs a revert, then makes the real one right
 * after and compares the two answers. Only what the write's own moment gives differs: its
 * `last_updated`, which a dry run shows as the write would stamp it then, and the change record
 * it wrote (a restore keeps its recorded `created`, decision 0171; compared in restore-created). Host models (site, tenant) and a custom
 * object with a primary field and a context field; updates, deletes put back and creates undone;
 * on a local file and a remote database; the record looked at first (the plan-reading path) or
 * never seen by this process (decision 0154's path from the record).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { servicesOf } from "../../src/app";
import { forgetChange } from "../../src/core/changes/seen";
import { appOn, type BackendApp } from "../helpers/remote-db";
import { addField, CO, create, makeCot } from "../custom-objects/fixtures";
import { settleBeforeCounting } from "../helpers/settle";

type Mode = "looked-at" | "unseen";
type Body = Record<string, any>;

/** What only the write's moment gives: its stamps, and the change record it wrote. */
function withoutMoment(body: Body) {
  const { dry_run: _d, change: _c, object, ...rest } = body;
  if (!object) return { ...rest, object };
  const { last_updated: _l, created: _k, ...kept } = object as Body;
  return { ...rest, object: kept };
}

for (const backend of ["local", "remote"] as const)
  for (const mode of ["looked-at", "unseen"] as Mode[])
    describe(`a revert's dry run answers as the revert does (${backend}, ${mode})`, () => {
      let on: BackendApp;
      const t = () => on.t;
      let serial = 0;
      let slug: string;
      let tag: number;
      beforeAll(async () => {
        on = await appOn(backend, `dry-preview-${backend}-${mode}`);
        tag = (await t().json("POST", "/api/extras/tags/", { body: { name: "dp", slug: "dp" } }))
          .body.id;
        const cot = await makeCot(t(), `dp${mode === "unseen" ? "u" : "l"}`);
        slug = cot.slug;
        await addField(t(), cot.id, { name: "title", type: "text", primary: true });
        await addField(t(), cot.id, { name: "code", type: "text", context: true });
        await addField(t(), cot.id, { name: "count", type: "integer" });
        await addField(t(), cot.id, {
          name: "site",
          type: "object",
          related_object_type: "dcim.site",
        });
      });
      afterAll(() => on.close());

      const lastChange = async () =>
        Number(
          ((await t().deps.db.orm.all(sql`SELECT max(id) AS id FROM object_changes`)) as any[])[0]
            .id,
        );
      /** The record as the revert finds it: looked at through the change log, or never seen. */
      const prepare = async (change: number) => {
        if (mode === "looked-at")
          expect((await t().json("GET", `/api/core/object-changes/${change}/`)).status).toBe(200);
        else forgetChange(servicesOf(t().app), change);
      };
      /** Reverts `change`; answers the answer and its remote round trips (0 on a local file). */
      const revert = async (change: number, query = "") => {
        await prepare(change);
        // the writes' search flush and the token's use run off their requests: not the revert's
        await settleBeforeCounting(t().app, () => t().json("GET", "/api/status/"), "admin");
        on.proxy?.reset();
        const r = await t().json("POST", `/api/core/object-changes/${change}/revert/${query}`);
        return { ...r, trips: on.proxy?.count ?? 0, sent: on.proxy?.log.map((l) => l.sql) ?? [] };
      };
      /** A write through the API; answers the change record it made. */
      const write = async (method: string, path: string, body?: unknown) => {
        const r = await t().json(method, path, { body });
        expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
        return { change: await lastChange(), body: r.body as Body };
      };

      /**
       * Dry-runs the revert of `change`, then reverts it: the two answers are one (but for the
       * write's moment), and the dry run wrote nothing. Answers the real revert's answer.
       */
      async function sameAsReal(change: number, url: string, force = false) {
        const before = await t().json("GET", url);
        const changes = await lastChange();
        const dry = await revert(change, force ? "?dry_run=true&force=true" : "?dry_run=true");
        expect(dry.status, JSON.stringify(dry.body)).toBe(200);
        expect(dry.body).toMatchObject({ dry_run: true, change: null });
        // nothing written: the object as it was, no change record
        const after = await t().json("GET", url);
        expect(after.status).toBe(before.status);
        expect(after.body).toEqual(before.body);
        expect(await lastChange()).toBe(changes);
        const real = await revert(change, force ? "?force=true" : "");
        expect(real.status, JSON.stringify(real.body)).toBe(200);
        expect(real.body.dry_run).toBe(false);
        expect(withoutMoment(dry.body)).toEqual(withoutMoment(real.body));
        expect(dry.trips, JSON.stringify({ dry: dry.sent, real: real.sent })).toBeLessThanOrEqual(
          real.trips,
        );
        // the dry run's stamp is the one its write would set: after the one it replaces
        const stamp = dry.body.object?.last_updated;
        if (!dry.body.object) expect(real.body.object).toBe(null);
        else if (before.status === 200) expect(stamp > before.body.last_updated).toBe(true);
        else expect(typeof stamp).toBe("string");
        return real.body as Body;
      }

      const site = async (name: string, extra: Body = {}) => {
        const n = ++serial;
        const body = { name: `${name} ${n}`, slug: `dp-${n}`, tags: [tag], ...extra };
        return (await write("POST", "/api/dcim/sites/", body)).body.id as number;
      };
      const tenant = async (name: string) => {
        const n = ++serial;
        const body = { name: `${name} ${n}`, slug: `dpt-${n}`, description: "before" };
        return (await write("POST", "/api/tenancy/tenants/", body)).body.id as number;
      };
      const thing = async (title: string, extra: Body = {}) =>
        (await create(t(), slug, { title, code: `${title}-c`, count: 1, tags: [tag], ...extra }))
          .id;

      test("a custom object's update: the display and _context of the values put back", async () => {
        const o = await thing("p-first");
        const url = `${CO}/${slug}/${o}/`;
        const { change } = await write("PATCH", url, { title: "p-second", code: "p-c2", count: 2 });
        const real = await sameAsReal(change, url);
        expect(real.object).toMatchObject({ title: "p-first", display: "p-first", count: 1 });
        expect(real.object._context).toEqual({ display: "p-first-c" });
        expect((await t().json("GET", url)).body).toEqual(real.object);
      });

      test("a custom object's delete put back: its links as they are now", async () => {
        const s = await site("dp linked");
        const o = await thing("d-first", { site: s });
        const url = `${CO}/${slug}/${o}/`;
        const { change } = await write("DELETE", url);
        await write("PATCH", `/api/dcim/sites/${s}/`, { name: `dp renamed ${s}` });
        const real = await sameAsReal(change, url);
        expect(real.object).toMatchObject({ title: "d-first", display: "d-first" });
        expect(real.object._context).toEqual({ display: "d-first-c" });
        expect(real.object.site.display).toBe(`dp renamed ${s}`);
      });

      test("a forced restore whose link's target is gone: the write of the plan, previewed", async () => {
        const s = await site("dp doomed");
        const o = await thing("f-first", { site: s });
        const url = `${CO}/${slug}/${o}/`;
        const { change } = await write("DELETE", url);
        await write("DELETE", `/api/dcim/sites/${s}/`);
        const real = await sameAsReal(change, url, true);
        expect(real.skipped).toEqual([expect.objectContaining({ reason: "target_gone" })]);
        expect(real.object).toMatchObject({ title: "f-first", site: null });
        expect(real.object._context).toEqual({ display: "f-first-c" });
      });

      test("a custom object's create undone", async () => {
        const o = await thing("c-first");
        const change = await lastChange();
        const real = await sameAsReal(change, `${CO}/${slug}/${o}/`);
        expect(real.object).toBe(null);
      });

      test("a site's update: the display of the name put back", async () => {
        const s = await site("dp site", { description: "before" });
        const url = `/api/dcim/sites/${s}/`;
        const was = (await t().json("GET", url)).body.name;
        const { change } = await write("PATCH", url, { name: `dp moved ${s}`, description: "x" });
        const real = await sameAsReal(change, url);
        expect(real.object).toMatchObject({ name: was, display: was, description: "before" });
      });

      test("a site's delete put back: its tenant as it is now", async () => {
        const te = await tenant("dp owner");
        const s = await site("dp gone", { tenant: te });
        const url = `/api/dcim/sites/${s}/`;
        const { change } = await write("DELETE", url);
        await write("PATCH", `/api/tenancy/tenants/${te}/`, { name: `dp owner renamed ${te}` });
        const real = await sameAsReal(change, url);
        expect(real.object.tenant.display).toBe(`dp owner renamed ${te}`);
      });

      test("a site's create undone", async () => {
        const s = await site("dp new");
        const real = await sameAsReal(await lastChange(), `/api/dcim/sites/${s}/`);
        expect(real.object).toBe(null);
      });

      test("a tenant's update, delete put back and create undone", async () => {
        const te = await tenant("dp tenant");
        const url = `/api/tenancy/tenants/${te}/`;
        const was = (await t().json("GET", url)).body.name;
        const renamed = await write("PATCH", url, { name: `dp tenant moved ${te}` });
        const back = await sameAsReal(renamed.change, url);
        expect(back.object).toMatchObject({ name: was, display: was });
        const deleted = await write("DELETE", url);
        expect((await sameAsReal(deleted.change, url)).object).toMatchObject({ display: was });
        const made = await tenant("dp fresh");
        const undone = await sameAsReal(await lastChange(), `/api/tenancy/tenants/${made}/`);
        expect(undone.object).toBe(null);
      });
    });
