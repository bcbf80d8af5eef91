/**
 * A revert of a change record this process neither served nor wrote (another process or Worker
 * isolate wrote it; decision 0139): an update's revert is built from the record alone and proven
 * inside its one batch, 2 remote round trips. Its answers must be those of the path that reads
 * first: the same steps run on two apps, one reverting records it has looked at (decision 0118),
 * the other records it has forgotten, and the answers are compared. Races land between the
 * record's read and the batch: a 409, the rival's write standing, nothing half-written.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { servicesOf } from "../../src/app";
import { forgetChange, seenChange } from "../../src/core/changes/seen";
import type { TestApp } from "../helpers/app";
import { userWith } from "../helpers/grants";
import { appOn, type BackendApp } from "../helpers/remote-db";
import { waitFor } from "../helpers/wait";
import { addField, CO, create, makeCot } from "../custom-objects/fixtures";
import { settleBeforeCounting } from "../helpers/settle";

type Mode = "looked-at" | "unseen";

/**
 * A dry run's `last_updated`: the stamp its write would set (decision 0162), after the stamp of
 * the object as it is (`now`).
 */
function stampAfter(dry: { last_updated: string }, now: { last_updated: string }) {
  expect(dry.last_updated > now.last_updated).toBe(true);
  return dry.last_updated;
}
type Answer = { step: string; status: number; body: unknown };
const answers: Partial<Record<Mode, Answer[]>> = {};

/** The app's steps: objects, changes and reverts through the API, the record read or forgotten. */
function steps(mode: Mode, get: () => BackendApp) {
  const t = () => get().t;
  const proxy = () => get().proxy!;
  const seen: Answer[] = [];
  answers[mode] = seen;
  /** Each caller's username by token: a revert's settle waits for that caller's token use. */
  const usernames = new Map<string, string>();
  /** A user with `grants` (`userWith`), remembered by token. */
  const userAs = async (username: string, grants: Parameters<typeof userWith>[2]) => {
    const made = await userWith(t(), username, grants);
    usernames.set(made.token, username);
    return made;
  };
  const lastChange = async () =>
    Number(
      ((await t().deps.db.orm.all(sql`SELECT max(id) AS id FROM object_changes`)) as any[])[0].id,
    );
  /** The record as the revert finds it: looked at through the API, or never seen here. */
  const prepare = async (change: number) => {
    const services = servicesOf(t().app);
    if (mode === "looked-at")
      expect((await t().json("GET", `/api/core/object-changes/${change}/`)).status).toBe(200);
    else forgetChange(services, change);
    expect(seenChange(services, change) !== undefined).toBe(mode === "looked-at");
  };
  /** Reverts `change`; answers the answer and its remote round trips. */
  const revert = async (step: string, change: number, opts: { token?: string; query?: string }) => {
    await prepare(change);
    // earlier writes' search flush and the caller's token use run off their requests
    const token = opts.token ?? t().admin;
    await settleBeforeCounting(
      t().app,
      () => t().json("GET", "/api/status/", { token }),
      opts.token ? usernames.get(opts.token) : "admin",
    );
    proxy().reset();
    const r = await t().json(
      "POST",
      `/api/core/object-changes/${change}/revert/${opts.query ?? ""}`,
      { token: opts.token },
    );
    const trips = proxy().count;
    seen.push({ step, status: r.status, body: r.body });
    return { ...r, trips };
  };
  const patch = async (path: string, body: unknown) => {
    const r = await t().json("PATCH", path, { body });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return lastChange();
  };
  return { t, proxy, lastChange, revert, patch, userAs };
}

function suite(mode: Mode) {
  describe(`reverts of update records (${mode})`, () => {
    let on: BackendApp;
    beforeAll(async () => {
      on = await appOn("remote", `read-free-${mode}`);
    });
    afterAll(() => on.close());
    const { t, revert, patch, lastChange, userAs } = steps(mode, () => on);
    let tag: number;
    let siteId: number;
    let serial = 0;
    const site = async (extra: Record<string, unknown> = {}) => {
      const n = ++serial;
      const body = {
        name: `rf ${n}`,
        slug: `rf-${n}`,
        description: "before",
        tags: [tag],
        ...extra,
      };
      const r = await t().json("POST", "/api/dcim/sites/", { body });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      return r.body.id as number;
    };
    const thing = async (title: string) =>
      (await create(t(), "rfthing", { title, count: 1, site: siteId, tags: [tag] })).id;

    beforeAll(async () => {
      tag = (await t().json("POST", "/api/extras/tags/", { body: { name: "rf", slug: "rf" } })).body
        .id;
      siteId = await site();
      const cot = await makeCot(t(), "rfthing");
      await addField(t(), cot.id, { name: "title", type: "text", primary: true, unique: true });
      await addField(t(), cot.id, { name: "count", type: "integer" });
      await addField(t(), cot.id, {
        name: "site",
        type: "object",
        related_object_type: "dcim.site",
      });
    });

    test("a site's and a custom object's update put back: 2 round trips either way", async () => {
      const s = await site();
      const sited = await patch(`/api/dcim/sites/${s}/`, { description: "after" });
      // warm: the first write of a kind fills the caches a later one takes on trust
      await revert("site warm", sited, {});
      const again = await patch(`/api/dcim/sites/${s}/`, { description: "after again" });
      const siteBack = await revert("site", again, {});
      expect(siteBack.status, JSON.stringify(siteBack.body)).toBe(200);
      expect(siteBack.body.object.description).toBe("before");
      expect(siteBack.trips).toBe(2);
      const o = await thing("t-first");
      const titled = await patch(`${CO}/rfthing/${o}/`, { title: "t-second", count: 2 });
      const back = await revert("object", titled, {});
      expect(back.status, JSON.stringify(back.body)).toBe(200);
      expect(back.body.object).toMatchObject({ title: "t-first", count: 1, display: "t-first" });
      expect(back.trips).toBe(2);
      const now = await t().json("GET", `${CO}/rfthing/${o}/`);
      // the record written is the object as a GET reads it
      const written = await t().json("GET", `/api/core/object-changes/${back.body.change}/`);
      expect(written.body.postchange_data).toEqual(now.body);
      expect(back.body.object).toEqual(now.body);
    });

    test("a related object or a tag renamed since: the answer shows them as they are now", async () => {
      const s = await site();
      const o = (await create(t(), "rfthing", { title: "n-first", site: s, tags: [tag] })).id;
      const titled = await patch(`${CO}/rfthing/${o}/`, { title: "n-second" });
      await patch(`/api/dcim/sites/${s}/`, { name: `renamed ${s}` });
      const r = await revert("site renamed", titled, {});
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body.object.site.display).toBe(`renamed ${s}`);
      const other = await t().json("POST", "/api/extras/tags/", {
        body: { name: `rf-${s}`, slug: `rf-${s}`, color: "aa0000" },
      });
      const tagged = await site({ tags: [other.body.id] });
      const described = await patch(`/api/dcim/sites/${tagged}/`, { description: "after" });
      await patch(`/api/extras/tags/${other.body.id}/`, { color: "00aa00" });
      const back = await revert("tag recoloured", described, {});
      expect(back.status, JSON.stringify(back.body)).toBe(200);
      expect(back.body.object.tags[0].color).toBe("00aa00");
      const written = await t().json("GET", `/api/core/object-changes/${back.body.change}/`);
      expect(written.body.postchange_data.tags[0].color).toBe("00aa00");
    });

    test("a site's delete put back under its id: as it was, its tenant and tags nested; twice 409", async () => {
      const n = ++serial;
      const tenant = await t().json("POST", "/api/tenancy/tenants/", {
        body: { name: `rf tenant ${n}`, slug: `rf-tenant-${n}` },
      });
      expect(tenant.status, JSON.stringify(tenant.body)).toBe(201);
      const s = await site({ tenant: tenant.body.id, status: "planned", comments: "kept" });
      const before = await t().json("GET", `/api/dcim/sites/${s}/`);
      expect((await t().req("DELETE", `/api/dcim/sites/${s}/`)).status).toBe(204);
      const deleted = await lastChange();
      const back = await revert("site restored", deleted, {});
      expect(back.status, JSON.stringify(back.body)).toBe(200);
      expect(back.trips).toBe(2);
      const now = await t().json("GET", `/api/dcim/sites/${s}/`);
      expect(strip(now.body)).toEqual(strip(before.body));
      expect(back.body.object).toEqual(now.body);
      const written = await t().json("GET", `/api/core/object-changes/${back.body.change}/`);
      expect(written.body.postchange_data).toEqual(now.body);
      const again = await revert("site restored again", deleted, {});
      expect(again.status, JSON.stringify(again.body)).toBe(409);
      expect(again.body.conflicts[0].reason).toBe("object_exists");
    });

    test("a custom object's delete put back under its id: its site and tags nested, 2 round trips", async () => {
      const o = await thing("d-first");
      const before = await t().json("GET", `${CO}/rfthing/${o}/`);
      expect((await t().req("DELETE", `${CO}/rfthing/${o}/`)).status).toBe(204);
      const deleted = await lastChange();
      const back = await revert("object restored", deleted, {});
      expect(back.status, JSON.stringify(back.body)).toBe(200);
      expect(back.trips).toBe(2);
      const now = await t().json("GET", `${CO}/rfthing/${o}/`);
      expect(strip(now.body)).toEqual(strip(before.body));
      expect(back.body.object).toEqual(now.body);
      const written = await t().json("GET", `/api/core/object-changes/${back.body.change}/`);
      expect(written.body.postchange_data).toEqual(now.body);
      const again = await revert("object restored again", deleted, {});
      expect(again.status, JSON.stringify(again.body)).toBe(409);
      expect(again.body.conflicts[0].reason).toBe("object_exists");
      // its title taken since: the ordinary answer, nothing restored
      const p = await thing("d-taken");
      expect((await t().req("DELETE", `${CO}/rfthing/${p}/`)).status).toBe(204);
      const gone = await lastChange();
      const rival = await thing("d-taken");
      const taken = await revert("object title taken", gone, {});
      expect(taken.status, JSON.stringify(taken.body)).toBe(409);
      expect(taken.body.conflicts).toEqual([
        expect.objectContaining({ reason: "unique", field: "title" }),
      ]);
      expect((await t().json("GET", `${CO}/rfthing/${p}/`)).status).toBe(404);
      expect((await t().req("DELETE", `${CO}/rfthing/${rival}/`)).status).toBe(204);
      // its site renamed since: shown as it is now
      const s = await site();
      const q = (await create(t(), "rfthing", { title: "d-sited", site: s, tags: [tag] })).id;
      expect((await t().req("DELETE", `${CO}/rfthing/${q}/`)).status).toBe(204);
      const sited = await lastChange();
      await patch(`/api/dcim/sites/${s}/`, { name: `rf d renamed ${s}` });
      const renamed = await revert("object restored, site renamed", sited, {});
      expect(renamed.status, JSON.stringify(renamed.body)).toBe(200);
      expect(renamed.body.object.site.display).toBe(`rf d renamed ${s}`);
      // its site gone since: a conflict on the field (forced: restored without it)
      const r = (await create(t(), "rfthing", { title: "d-orphan", site: s })).id;
      expect((await t().req("DELETE", `${CO}/rfthing/${r}/`)).status).toBe(204);
      const orphan = await lastChange();
      expect((await t().req("DELETE", `/api/dcim/sites/${s}/`)).status).toBe(204);
      const refused = await revert("object's site gone", orphan, {});
      expect(refused.status, JSON.stringify(refused.body)).toBe(409);
      expect(refused.body.conflicts[0].reason).toBe("target_gone");
      const forced = await revert("object's site gone, forced", orphan, { query: "?force=true" });
      expect(forced.status, JSON.stringify(forced.body)).toBe(200);
      expect(forced.body.object.site).toBe(null);
      const adder = (
        await userAs(`rf-thing-adder-${o}`, [
          [["view"], "custom_objects.rfthing", null],
          [["view"], "dcim.site", null],
          [["view"], "extras.tag", null],
          [["add"], "custom_objects.rfthing", { title: "nothing like it" }],
          [["view"], "core.objectchange", null],
        ])
      ).token;
      expect((await t().req("DELETE", `${CO}/rfthing/${o}/`)).status).toBe(204);
      const again2 = await lastChange();
      const outside = await revert("object restore outside add", again2, { token: adder });
      expect(outside.status, JSON.stringify(outside.body)).toBe(403);
      expect((await t().json("GET", `${CO}/rfthing/${o}/`)).status).toBe(404);
    });

    test("a site's and a custom object's create put back (deleted): 2 round trips either way", async () => {
      const s = await site();
      const made = await lastChange();
      const gone = await revert("site created", made, {});
      expect(gone.status, JSON.stringify(gone.body)).toBe(200);
      expect(gone.trips).toBe(2);
      expect(gone.body).toMatchObject({ action: "delete", object: null });
      expect((await t().json("GET", `/api/dcim/sites/${s}/`)).status).toBe(404);
      const written = await t().json("GET", `/api/core/object-changes/${gone.body.change}/`);
      const created = await t().json("GET", `/api/core/object-changes/${made}/`);
      expect(written.body.prechange_data).toEqual(created.body.postchange_data);
      const again = await revert("site created again", made, {});
      expect(again.status, JSON.stringify(again.body)).toBe(409);
      expect(again.body.conflicts[0].reason).toBe("object_gone");
      const o = await thing("k-first");
      const thingMade = await lastChange();
      const back = await revert("object created", thingMade, {});
      expect(back.status, JSON.stringify(back.body)).toBe(200);
      expect(back.trips).toBe(2);
      expect((await t().json("GET", `${CO}/rfthing/${o}/`)).status).toBe(404);
      // changed since: the ordinary answer
      const p = await thing("k-second");
      const pMade = await lastChange();
      await patch(`${CO}/rfthing/${p}/`, { count: 3 });
      const later = await revert("object created, changed since", pMade, {});
      expect(later.status, JSON.stringify(later.body)).toBe(409);
      expect(later.body.conflicts[0].reason).toBe("later_change");
    });

    test("a create put back where a protected dependant links to it: 409, nothing deleted", async () => {
      const s = await site();
      const made = await lastChange();
      const cot = await makeCot(t(), "rfkeep");
      await addField(t(), cot.id, { name: "name", type: "text", primary: true });
      await addField(t(), cot.id, {
        name: "home",
        type: "object",
        related_object_type: "dcim.site",
        on_delete_behavior: "protect",
      });
      // the fields pointing at sites are kept by now (a delete learns them)
      const warm = await site();
      expect((await t().req("DELETE", `/api/dcim/sites/${warm}/`)).status).toBe(204);
      const keeper = await create(t(), cot.slug, { name: "keeper", home: s });
      const r = await revert("site created, protected", made, {});
      expect(r.status, JSON.stringify(r.body)).toBe(409);
      expect(r.body.error).toBe("protected");
      expect((await t().json("GET", `/api/dcim/sites/${s}/`)).status).toBe(200);
      expect((await t().req("DELETE", `${CO}/${cot.slug}/${keeper.id}/`)).status).toBe(204);
      const done = await revert("site created, dependant gone", made, {});
      expect(done.status, JSON.stringify(done.body)).toBe(200);
      expect(done.trips).toBe(2);
      expect((await t().json("GET", `/api/dcim/sites/${s}/`)).status).toBe(404);
      const deleter = (
        await userAs(`rf-deleter-${s}`, [
          [["view"], "dcim.site", null],
          [["delete"], "dcim.site", { description: "nothing like it" }],
          [["view"], "core.objectchange", null],
        ])
      ).token;
      const other = await site();
      const otherMade = await lastChange();
      const outside = await revert("site created, outside delete", otherMade, { token: deleter });
      expect(outside.status, JSON.stringify(outside.body)).toBe(403);
      expect((await t().json("GET", `/api/dcim/sites/${other}/`)).status).toBe(200);
    });

    test("a create put back whose object a cascade takes dependants of: they go with it", async () => {
      const cot = await makeCot(t(), "rftail");
      await addField(t(), cot.id, { name: "name", type: "text", primary: true });
      await addField(t(), cot.id, {
        name: "head",
        type: "object",
        related_object_type: "dcim.site",
        on_delete_behavior: "cascade",
      });
      // the fields pointing at sites are learned again by a delete (the first after the change)
      const warm = await site();
      expect((await t().req("DELETE", `/api/dcim/sites/${warm}/`)).status).toBe(204);
      const lone = await site();
      const loneMade = await lastChange();
      const alone = await revert("site created, nothing to cascade", loneMade, {});
      expect(alone.status, JSON.stringify(alone.body)).toBe(200);
      expect(alone.trips).toBe(2);
      expect((await t().json("GET", `/api/dcim/sites/${lone}/`)).status).toBe(404);
      const s = await site();
      const made = await lastChange();
      const tail = await create(t(), "rftail", { name: "tail", head: s });
      const r = await revert("site created, cascading", made, {});
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect((await t().json("GET", `/api/dcim/sites/${s}/`)).status).toBe(404);
      expect((await t().json("GET", `${CO}/rftail/${tail.id}/`)).status).toBe(404);
    });

    test("a delete put back after its tenant was renamed, or its slug taken: the ordinary answers", async () => {
      const n = ++serial;
      const tenant = await t().json("POST", "/api/tenancy/tenants/", {
        body: { name: `rf renamed ${n}`, slug: `rf-renamed-${n}` },
      });
      const s = await site({ tenant: tenant.body.id });
      expect((await t().req("DELETE", `/api/dcim/sites/${s}/`)).status).toBe(204);
      const deleted = await lastChange();
      await patch(`/api/tenancy/tenants/${tenant.body.id}/`, { name: `rf renamed ${n} again` });
      const back = await revert("tenant renamed", deleted, {});
      expect(back.status, JSON.stringify(back.body)).toBe(200);
      expect(back.body.object.tenant.display).toBe(`rf renamed ${n} again`);
      const taken = await site();
      const slug = (await t().json("GET", `/api/dcim/sites/${taken}/`)).body.slug as string;
      expect((await t().req("DELETE", `/api/dcim/sites/${taken}/`)).status).toBe(204);
      const gone = await lastChange();
      const rival = await t().json("POST", "/api/dcim/sites/", { body: { name: "rival", slug } });
      expect(rival.status).toBe(201);
      const refused = await revert("slug taken", gone, {});
      expect(refused.status, JSON.stringify(refused.body)).toBe(409);
      expect(refused.body.conflicts).toEqual([expect.objectContaining({ reason: "unique" })]);
      expect((await t().json("GET", `/api/dcim/sites/${taken}/`)).status).toBe(404);
      expect((await t().req("DELETE", `/api/dcim/sites/${rival.body.id}/`)).status).toBe(204);
      const adder = (
        await userAs(`rf-adder-${n}`, [
          [["view"], "dcim.site", null],
          [["add"], "dcim.site", { description: "nothing like it" }],
          [["view"], "core.objectchange", null],
          // the site's tags: one the caller may not view answers as unknown first (0153)
          [["view"], "extras.tag", null],
        ])
      ).token;
      const outside = await revert("restore outside add", gone, { token: adder });
      expect(outside.status, JSON.stringify(outside.body)).toBe(403);
      expect((await t().json("GET", `/api/dcim/sites/${taken}/`)).status).toBe(404);
    });

    test("a field the model reads to write (a choice) takes the ordinary path, same answer", async () => {
      const s = await site({ status: "planned" });
      const changed = await patch(`/api/dcim/sites/${s}/`, { status: "active" });
      const r = await revert("site status", changed, {});
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body.object.status.value).toBe("planned");
    });

    test("changed again since, gone, a unique value taken: the ordinary answers", async () => {
      const o = await thing("c-first");
      const first = await patch(`${CO}/rfthing/${o}/`, { title: "c-second" });
      await patch(`${CO}/rfthing/${o}/`, { title: "c-third" });
      const later = await revert("changed again", first, {});
      expect(later.status, JSON.stringify(later.body)).toBe(409);
      expect(later.body.conflicts[0].reason).toBe("later_change");
      // another field changed since: the revert goes through, that field kept
      const p = await thing("o-first");
      const titled = await patch(`${CO}/rfthing/${p}/`, { title: "o-second" });
      await patch(`${CO}/rfthing/${p}/`, { count: 7 });
      const other = await revert("other field changed", titled, {});
      expect(other.status, JSON.stringify(other.body)).toBe(200);
      expect(other.body.object).toMatchObject({ title: "o-first", count: 7 });
      const g = await thing("g-first");
      const gone = await patch(`${CO}/rfthing/${g}/`, { title: "g-second" });
      expect((await t().req("DELETE", `${CO}/rfthing/${g}/`)).status).toBe(204);
      const r = await revert("object gone", gone, {});
      expect(r.status, JSON.stringify(r.body)).toBe(409);
      expect(r.body.conflicts[0].reason).toBe("object_gone");
      const u = await thing("u-first");
      const renamed = await patch(`${CO}/rfthing/${u}/`, { title: "u-second" });
      await thing("u-first");
      const taken = await revert("unique taken", renamed, {});
      expect(taken.status, JSON.stringify(taken.body)).toBe(409);
      expect(taken.body.conflicts).toEqual([
        expect.objectContaining({ reason: "unique", field: "title" }),
      ]);
      expect((await t().json("GET", `${CO}/rfthing/${u}/`)).body.title).toBe("u-second");
      const dry = await revert("dry run", renamed, { query: "?dry_run=true" });
      expect(dry.status, JSON.stringify(dry.body)).toBe(200);
    });

    test("dry runs of an update's revert: one round trip, the answers of the path that reads", async () => {
      // decision 0154: a record never seen here is proven by its own read, and answered from it
      const o = await thing("y-first");
      const titled = await patch(`${CO}/rfthing/${o}/`, { title: "y-second", count: 5 });
      const dry = await revert("dry: title and count", titled, { query: "?dry_run=true" });
      expect(dry.status, JSON.stringify(dry.body)).toBe(200);
      expect(dry.trips).toBe(1);
      expect(dry.body).toMatchObject({ dry_run: true, action: "update", change: null });
      // the display of the title put back, as the revert answers it (decision 0162)
      expect(dry.body.object).toMatchObject({ title: "y-first", count: 1, display: "y-first" });
      expect(dry.body.changes).toEqual({
        title: { from: "y-second", to: "y-first" },
        count: { from: 5, to: 1 },
      });
      const now = (await t().json("GET", `${CO}/rfthing/${o}/`)).body;
      expect(dry.body.object).toEqual({
        ...now,
        title: "y-first",
        count: 1,
        display: "y-first",
        last_updated: stampAfter(dry.body.object, now),
      });
      expect(now.title).toBe("y-second"); // nothing written
      // what the record shows nested changed since: the answer shows it as it is now
      const s = await site();
      const p = (await create(t(), "rfthing", { title: "y-sited", site: s, tags: [tag] })).id;
      const sited = await patch(`${CO}/rfthing/${p}/`, { title: "y-sited-2" });
      await patch(`/api/dcim/sites/${s}/`, { name: `rf y renamed ${s}` });
      const renamed = await revert("dry: site renamed", sited, { query: "?dry_run=true" });
      expect(renamed.status, JSON.stringify(renamed.body)).toBe(200);
      expect(renamed.body.object.site.display).toBe(`rf y renamed ${s}`);
      const recoloured = await t().json("POST", "/api/extras/tags/", {
        body: { name: `rf-y-${s}`, slug: `rf-y-${s}`, color: "aa0000" },
      });
      const q = (await create(t(), "rfthing", { title: "y-tagged", tags: [recoloured.body.id] }))
        .id;
      const tagged = await patch(`${CO}/rfthing/${q}/`, { title: "y-tagged-2" });
      await patch(`/api/extras/tags/${recoloured.body.id}/`, { color: "00aa00" });
      const tagDry = await revert("dry: tag recoloured", tagged, { query: "?dry_run=true" });
      expect(tagDry.body.object.tags[0].color).toBe("00aa00");
      // the object changed again since, or gone: the ordinary answers
      const again = await patch(`${CO}/rfthing/${q}/`, { title: "y-tagged-3" });
      await patch(`${CO}/rfthing/${q}/`, { title: "y-tagged-4" });
      const later = await revert("dry: changed again", again, { query: "?dry_run=true" });
      expect(later.status, JSON.stringify(later.body)).toBe(409);
      // a host model (its choice field read the ordinary way) and a site's plain field
      const h = await site();
      const described = await patch(`/api/dcim/sites/${h}/`, { description: "after" });
      const hostDry = await revert("dry: site", described, { query: "?dry_run=true" });
      expect(hostDry.status, JSON.stringify(hostDry.body)).toBe(200);
      expect(hostDry.body.object.description).toBe("before");
      const n = ++serial;
      const tenant = await t().json("POST", "/api/tenancy/tenants/", {
        body: { name: `rf dry ${n}`, slug: `rf-dry-${n}`, description: "before", tags: [tag] },
      });
      expect(tenant.status, JSON.stringify(tenant.body)).toBe(201);
      const tenantUrl = `/api/tenancy/tenants/${tenant.body.id}/`;
      const tenantChange = await patch(tenantUrl, { description: "after" });
      const tenantDry = await revert("dry: tenant", tenantChange, { query: "?dry_run=true" });
      expect(tenantDry.status, JSON.stringify(tenantDry.body)).toBe(200);
      expect(tenantDry.trips).toBe(1);
      const tenantNow = (await t().json("GET", tenantUrl)).body;
      expect(tenantDry.body.object).toEqual({
        ...tenantNow,
        description: "before",
        last_updated: stampAfter(tenantDry.body.object, tenantNow),
      });
      // constrained callers: the write's answers (404 hidden, 403 not theirs, 403 left outside)
      const grants = (change: unknown): Parameters<typeof userWith>[2] => [
        [["view"], "custom_objects.rfthing", { title: "y-second" }],
        [["change"], "custom_objects.rfthing", change],
        [["view"], "dcim.site", null],
        [["view"], "extras.tag", null],
        [["view"], "core.objectchange", null],
      ];
      const limited = (await userAs("rf-dry-limited", grants({ title: "nothing" }))).token;
      const keeper = (await userAs("rf-dry-keeper", grants({ title: "y-second" }))).token;
      const query = "?dry_run=true";
      const hidden = await revert("dry: hidden", tagged, { token: limited, query });
      expect(hidden.status, JSON.stringify(hidden.body)).toBe(404);
      expect(JSON.stringify(hidden.body)).not.toContain("y-tagged");
      const notTheirs = await revert("dry: not theirs", titled, { token: limited, query });
      expect(notTheirs.status, JSON.stringify(notTheirs.body)).toBe(403);
      const leftOutside = await revert("dry: left outside", titled, { token: keeper, query });
      expect(leftOutside.status, JSON.stringify(leftOutside.body)).toBe(403);
    });

    test("a dry run after the type changed: renamed, a field added, retyped, no longer primary", async () => {
      const cot = await makeCot(t(), "rfdry");
      const title = await addField(t(), cot.id, { name: "title", type: "text", primary: true });
      const code = await addField(t(), cot.id, { name: "code", type: "text" });
      const o = await create(t(), cot.slug, { title: "z-0", code: "12" });
      const url = `${CO}/${cot.slug}/${o.id}/`;
      let serial = 0;
      /**
       * A record of the object, then `change` of its type: the dry run shows the object as now, its
       * title put back (and the display it gives while `primary`).
       */
      const dryAfter = async (
        name: string,
        change: () => Promise<{ status: number }>,
        primary = true,
      ) => {
        const was = (await t().json("GET", url)).body.title as string;
        const record = await patch(url, { title: `z-${++serial}` });
        const changed = (await change()) as { status: number; body?: unknown };
        expect(changed.status, `${name}: ${JSON.stringify(changed)}`).toBeLessThan(300);
        // read once since: the type's model cached again, current (its guard holds)
        const now = (await t().json("GET", url)).body;
        const r = await revert(`dry: ${name}`, record, { query: "?dry_run=true" });
        expect(r.status, JSON.stringify(r.body)).toBe(200);
        expect(r.body.object).toEqual({
          ...now,
          title: was,
          display: primary ? was : now.display,
          last_updated: stampAfter(r.body.object, now),
        });
        return now;
      };
      const field = (id: number, body: unknown) =>
        t().json("PATCH", `${CO}/custom-object-type-fields/${id}/?allow_destructive=true`, {
          body,
        });
      const renamed = await dryAfter("type renamed", () =>
        t().json("PATCH", `${CO}/custom-object-types/${cot.id}/`, { body: { name: "rfdry_two" } }),
      );
      expect(renamed.custom_object_type.name).toBe("rfdry_two");
      const added = await dryAfter("field added", async () => {
        await addField(t(), cot.id, { name: "added", type: "integer", default: 4 });
        return { status: 201 };
      });
      expect(added).toHaveProperty("added");
      expect(
        (await dryAfter("field retyped", () => field(code.id, { type: "integer" }))).code,
      ).toBe(12);
      await dryAfter("no longer primary", () => field(title.id, { primary: false }), false);
    });

    test("a revert after the type changed: renamed, no longer primary; a context field put back", async () => {
      // the record shows the type's name and the display and `_context` its fields gave: the
      // revert answers and records the object as it is now (decision 0160)
      const cot = await makeCot(t(), "rfkind");
      const title = await addField(t(), cot.id, { name: "title", type: "text", primary: true });
      await addField(t(), cot.id, { name: "code", type: "text", context: true });
      const url = (id: number) => `${CO}/${cot.slug}/${id}/`;
      const asNow = async (name: string, record: number, id: number | null) => {
        const r = await revert(name, record, {});
        expect(r.status, JSON.stringify(r.body)).toBe(200);
        const written = await t().json("GET", `/api/core/object-changes/${r.body.change}/`);
        const now = id === null ? null : (await t().json("GET", url(id))).body;
        expect(r.body.object).toEqual(now);
        expect(written.body.postchange_data).toEqual(now);
        return written.body;
      };
      const coded = await create(t(), cot.slug, { title: "k-1", code: "c1" });
      const recoded = await patch(url(coded.id), { code: "c2" });
      expect((await asNow("context field", recoded, coded.id)).postchange_data._context).toEqual({
        display: "c1",
      });
      const o = await create(t(), cot.slug, { title: "k-2", code: "c" });
      const titled = await patch(url(o.id), { title: "k-3" });
      const made = (await create(t(), cot.slug, { title: "k-4" })).id;
      const created = await lastChange();
      const renamed = await t().json("PATCH", `${CO}/custom-object-types/${cot.id}/`, {
        body: { name: "rfkind_two" },
      });
      expect(renamed.status, JSON.stringify(renamed.body)).toBe(200);
      const back = await asNow("type renamed", titled, o.id);
      expect(back.postchange_data.custom_object_type.name).toBe("rfkind_two");
      const removed = await asNow("type renamed, create put back", created, null);
      expect(removed.prechange_data.custom_object_type.name).toBe("rfkind_two");
      expect((await t().json("GET", url(made))).status).toBe(404);
      const again = await patch(url(o.id), { title: "k-5" });
      const unflagged = await t().json(
        "PATCH",
        `${CO}/custom-object-type-fields/${title.id}/?allow_destructive=true`,
        { body: { primary: false } },
      );
      expect(unflagged.status, JSON.stringify(unflagged.body)).toBe(200);
      const shown = await asNow("no longer primary", again, o.id);
      expect(shown.postchange_data.display).not.toBe("k-3");
    });

    test("constrained callers: unknown, 403, outside their change after the write, allowed", async () => {
      const hidden = await site();
      const hiddenChange = await patch(`/api/dcim/sites/${hidden}/`, { description: "after" });
      const viewed = await site();
      const viewedChange = await patch(`/api/dcim/sites/${viewed}/`, { description: "after" });
      const slugOf = async (id: number) =>
        (await t().json("GET", `/api/dcim/sites/${id}/`)).body.slug as string;
      const limited = (
        await userAs("rf-limited", [
          [["view"], "dcim.site", { slug: await slugOf(viewed) }],
          [["change"], "dcim.site", { slug: "nothing-of-theirs" }],
          [["view"], "core.objectchange", null],
        ])
      ).token;
      // may change only what says "after": the revert would leave it outside
      const keeper = (
        await userAs("rf-keeper", [
          [["view"], "dcim.site", null],
          [["change"], "dcim.site", { description: "after" }],
          [["view"], "core.objectchange", null],
        ])
      ).token;
      const before = await t().json("GET", "/api/core/object-changes/?limit=1");
      // a dry run answers as the write would (decisions 0139, 0152, 0154)
      const dry = { query: "?dry_run=true" };
      const dryHidden = await revert("dry outside view", hiddenChange, { token: limited, ...dry });
      expect(dryHidden.status, JSON.stringify(dryHidden.body)).toBe(404);
      expect(JSON.stringify(dryHidden.body)).not.toContain(await slugOf(hidden));
      const dryRefused = await revert("dry outside change", viewedChange, {
        token: limited,
        ...dry,
      });
      expect(dryRefused.status, JSON.stringify(dryRefused.body)).toBe(403);
      const dryOutside = await revert("dry left outside", viewedChange, { token: keeper, ...dry });
      expect(dryOutside.status, JSON.stringify(dryOutside.body)).toBe(403);
      const unknown = await revert("outside view", hiddenChange, { token: limited });
      expect(unknown.status, JSON.stringify(unknown.body)).toBe(404);
      expect(JSON.stringify(unknown.body)).not.toContain(await slugOf(hidden));
      const refused = await revert("outside change", viewedChange, { token: limited });
      expect(refused.status, JSON.stringify(refused.body)).toBe(403);
      const outside = await revert("left outside", viewedChange, { token: keeper });
      expect(outside.status, JSON.stringify(outside.body)).toBe(403);
      const after = await t().json("GET", "/api/core/object-changes/?limit=1");
      expect(after.body.count).toBe(before.body.count);
      const editor = (
        await userAs("rf-editor", [
          [["view", "change"], "dcim.site", { slug: await slugOf(viewed) }],
          [["view"], "core.objectchange", null],
        ])
      ).token;
      const done = await revert("allowed", viewedChange, { token: editor });
      expect(done.status, JSON.stringify(done.body)).toBe(200);
      expect((await t().json("GET", `/api/dcim/sites/${viewed}/`)).body.description).toBe("before");
    });
  });
}

suite("looked-at");
suite("unseen");

const STAMPS = new Set(["created", "last_updated"]);
const strip = (body: unknown): unknown =>
  JSON.parse(JSON.stringify(body), (k, v) => (STAMPS.has(k) ? undefined : v));

test("the same answers whether the record was looked at or never seen (read-free)", () => {
  const shape = (xs: Answer[] | undefined) =>
    (xs ?? []).map(({ step, status, body }) => ({ step, status, body: strip(body) }));
  expect(answers.unseen?.length).toBeGreaterThan(10);
  expect(shape(answers.unseen)).toEqual(shape(answers["looked-at"]));
});

/** The answer of a revert whose batch lost a race (as on the path that reads first). */
const DURING = {
  reason: "later_change",
  field: null,
  detail: "The object changed during the revert.",
};

describe("a read-free revert raced between the record's read and its batch", () => {
  let on: BackendApp;
  beforeAll(async () => {
    on = await appOn("remote", "read-free-races");
  });
  afterAll(async () => {
    on.proxy?.release();
    await on.close();
  });
  const t = (): TestApp => on.t;
  const lastChange = async () =>
    Number(
      ((await t().deps.db.orm.all(sql`SELECT max(id) AS id FROM object_changes`)) as any[])[0].id,
    );
  /** Reverts the forgotten `change`, its first batch matching `writes` held until `rival` ran. */
  async function racing(writes: RegExp, change: number, rival: () => Promise<void>) {
    forgetChange(servicesOf(t().app), change);
    let taken = false;
    on.proxy!.hold((statements) => {
      if (taken || !statements.some((s) => writes.test(s))) return false;
      taken = true;
      return true;
    });
    try {
      const reverting = t().json("POST", `/api/core/object-changes/${change}/revert/`);
      await waitFor(() => on.proxy!.held >= 1, { message: () => "the revert's batch held" });
      await rival();
      on.proxy!.release();
      return await reverting;
    } finally {
      on.proxy!.release();
    }
  }
  const sinceCount = async (type: string, id: number, change: number) =>
    (
      await t().json(
        "GET",
        `/api/core/object-changes/?changed_object_type=${type}&changed_object_id=${id}&id__gt=${change}`,
      )
    ).body.count as number;

  test("a site: a PATCH of the same field wins, the revert answers 409 and writes nothing", async () => {
    const s = await t().json("POST", "/api/dcim/sites/", {
      body: { name: "rr one", slug: "rr-one", description: "first" },
    });
    await t().json("PATCH", `/api/dcim/sites/${s.body.id}/`, { body: { description: "second" } });
    const change = await lastChange();
    const r = await racing(/^update "sites"/i, change, async () => {
      const rival = await t().json("PATCH", `/api/dcim/sites/${s.body.id}/`, {
        body: { description: "third" },
      });
      expect(rival.status).toBe(200);
    });
    expect(r.status, JSON.stringify(r.body)).toBe(409);
    expect(r.body.conflicts).toEqual([DURING]);
    expect((await t().json("GET", `/api/dcim/sites/${s.body.id}/`)).body.description).toBe("third");
    expect(await sinceCount("dcim.site", s.body.id, change)).toBe(1);
  });

  test("a site's delete put back while a create takes its slug: 409 unique, nothing half-restored", async () => {
    const tag = await t().json("POST", "/api/extras/tags/", { body: { name: "rr", slug: "rr" } });
    const s = await t().json("POST", "/api/dcim/sites/", {
      body: { name: "rr back", slug: "rr-back", tags: [tag.body.id] },
    });
    expect((await t().req("DELETE", `/api/dcim/sites/${s.body.id}/`)).status).toBe(204);
    const change = await lastChange();
    const r = await racing(/^insert into "sites"/i, change, async () => {
      const rival = await t().json("POST", "/api/dcim/sites/", {
        body: { name: "rr rival", slug: "rr-back" },
      });
      expect(rival.status).toBe(201);
    });
    expect(r.status, JSON.stringify(r.body)).toBe(409);
    expect(r.body.conflicts).toEqual([expect.objectContaining({ reason: "unique" })]);
    expect((await t().json("GET", `/api/dcim/sites/${s.body.id}/`)).status).toBe(404);
    expect((await t().json("GET", "/api/dcim/sites/?tag=rr")).body.count).toBe(0);
    expect(await sinceCount("dcim.site", s.body.id, change)).toBe(0);
  });

  test("a custom object: a PATCH of the same field wins, 409, nothing written", async () => {
    const cot = await makeCot(t(), "rrthing");
    await addField(t(), cot.id, { name: "title", type: "text", primary: true });
    await addField(t(), cot.id, { name: "note", type: "text" });
    const o = await create(t(), "rrthing", { title: "first", note: "n" });
    await t().json("PATCH", `${CO}/rrthing/${o.id}/`, { body: { title: "second" } });
    const change = await lastChange();
    const r = await racing(/^update "co_\d+"/i, change, async () => {
      const rival = await t().json("PATCH", `${CO}/rrthing/${o.id}/`, { body: { title: "third" } });
      expect(rival.status).toBe(200);
    });
    expect(r.status, JSON.stringify(r.body)).toBe(409);
    expect(r.body.conflicts).toEqual([DURING]);
    expect((await t().json("GET", `${CO}/rrthing/${o.id}/`)).body.title).toBe("third");
    expect(await sinceCount("custom_objects.rrthing", o.id, change)).toBe(1);
    // a PATCH of another field between the read and the batch: the same race lost, as when the
    // reading path's batch loses it
    await t().json("PATCH", `${CO}/rrthing/${o.id}/`, { body: { title: "fourth" } });
    const fourth = await lastChange();
    const kept = await racing(/^update "co_\d+"/i, fourth, async () => {
      const rival = await t().json("PATCH", `${CO}/rrthing/${o.id}/`, { body: { note: "m" } });
      expect(rival.status).toBe(200);
    });
    expect(kept.status, JSON.stringify(kept.body)).toBe(409);
    expect(kept.body.conflicts).toEqual([DURING]);
    const now = (await t().json("GET", `${CO}/rrthing/${o.id}/`)).body;
    expect([now.title, now.note]).toEqual(["fourth", "m"]);
    expect(await sinceCount("custom_objects.rrthing", o.id, fourth)).toBe(1);
  });
  test("a custom object's update put back while its type is renamed: the new name, not the record's", async () => {
    const cot = await makeCot(t(), "rnthing");
    await addField(t(), cot.id, { name: "title", type: "text", primary: true });
    const o = await create(t(), "rnthing", { title: "first" });
    await t().json("PATCH", `${CO}/rnthing/${o.id}/`, { body: { title: "second" } });
    const change = await lastChange();
    const r = await racing(/^update "co_\d+"/i, change, async () => {
      const rival = await t().json("PATCH", `${CO}/custom-object-types/${cot.id}/`, {
        body: { name: "rnthing_two" },
      });
      expect(rival.status, JSON.stringify(rival.body)).toBe(200);
    });
    // the batch built from the record refused (decision 0160); the reading path answers
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const now = (await t().json("GET", `${CO}/rnthing/${o.id}/`)).body;
    expect(now).toMatchObject({ title: "first", custom_object_type: { name: "rnthing_two" } });
    expect(r.body.object).toEqual(now);
    const written = await t().json("GET", `/api/core/object-changes/${r.body.change}/`);
    expect(written.body.postchange_data).toEqual(now);
    expect(await sinceCount("custom_objects.rnthing", o.id, change)).toBe(1);
  });
  test("a custom object's delete put back while its site is deleted: 409, nothing restored", async () => {
    const cot = await makeCot(t(), "rdthing");
    await addField(t(), cot.id, { name: "title", type: "text", primary: true });
    await addField(t(), cot.id, { name: "site", type: "object", related_object_type: "dcim.site" });
    const s = await t().json("POST", "/api/dcim/sites/", { body: { name: "rd", slug: "rd" } });
    const o = await create(t(), "rdthing", { title: "kept", site: s.body.id });
    expect((await t().req("DELETE", `${CO}/rdthing/${o.id}/`)).status).toBe(204);
    const change = await lastChange();
    const r = await racing(/^insert into "co_\d+"/i, change, async () => {
      expect((await t().req("DELETE", `/api/dcim/sites/${s.body.id}/`)).status).toBe(204);
    });
    expect(r.status, JSON.stringify(r.body)).toBe(409);
    expect(r.body.conflicts).toEqual([expect.objectContaining({ reason: "target_gone" })]);
    expect((await t().json("GET", `${CO}/rdthing/${o.id}/`)).status).toBe(404);
    expect(await sinceCount("custom_objects.rdthing", o.id, change)).toBe(0);
  });
  test("a create put back while a protected dependant is made, or the object changed: 409, kept", async () => {
    const cot = await makeCot(t(), "rpkeep");
    await addField(t(), cot.id, { name: "name", type: "text", primary: true });
    await addField(t(), cot.id, {
      name: "home",
      type: "object",
      related_object_type: "dcim.site",
      on_delete_behavior: "protect",
    });
    const site = async (slug: string) => {
      const r = await t().json("POST", "/api/dcim/sites/", { body: { name: slug, slug } });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      return r.body.id as number;
    };
    // a delete of a site learns the fields pointing at sites (as after the first on a process)
    expect((await t().req("DELETE", `/api/dcim/sites/${await site("rp-warm")}/`)).status).toBe(204);
    const s = await site("rp-kept");
    const made = await lastChange();
    const r = await racing(/^delete from "sites"/i, made, async () => {
      const keeper = await create(t(), "rpkeep", { name: "keeper", home: s });
      expect(keeper.id).toBeGreaterThan(0);
    });
    expect(r.status, JSON.stringify(r.body)).toBe(409);
    expect(r.body.error).toBe("protected");
    expect((await t().json("GET", `/api/dcim/sites/${s}/`)).status).toBe(200);
    expect(await sinceCount("dcim.site", s, made)).toBe(0);
    const o = await site("rp-changed");
    const oMade = await lastChange();
    const changed = await racing(/^delete from "sites"/i, oMade, async () => {
      const rival = await t().json("PATCH", `/api/dcim/sites/${o}/`, {
        body: { description: "kept" },
      });
      expect(rival.status).toBe(200);
    });
    expect(changed.status, JSON.stringify(changed.body)).toBe(409);
    expect(changed.body.conflicts[0].reason).toBe("later_change");
    expect((await t().json("GET", `/api/dcim/sites/${o}/`)).body.description).toBe("kept");
    expect(await sinceCount("dcim.site", o, oMade)).toBe(1);
  });
});
