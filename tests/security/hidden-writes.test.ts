/**
 * An attacker whose delete and change permissions are unrestricted but whose view is constrained
 * (decision 0152): a DELETE, PATCH, PUT or bulk write of an object they may not view answers
 * byte for byte as one of a missing id and writes nothing, as does a revert (read-free or not)
 * of its create or update; on sites and custom objects, on a local file and a remote database.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { servicesOf } from "../../src/app";
import { forgetChange } from "../../src/core/changes/seen";
import { addField, CO, create, makeCot } from "../custom-objects/fixtures";
import { userWith } from "../helpers/grants";
import { appOn, type BackendApp } from "../helpers/remote-db";
import { settleBeforeCounting } from "../helpers/settle";

const SITES = "/api/dcim/sites";
const ITEMS = `${CO}/items`;
/** An id no object has: the answers for a hidden object must equal its answers. */
const MISSING = 900_000;

for (const backend of ["local", "remote"] as const)
  describe(backend, () => {
    let app: BackendApp;
    const t = () => app.t;
    let attacker: string;
    let serial = 0;
    beforeAll(async () => {
      app = await appOn(backend, `hidden-writes-${backend}`);
      const cot = await makeCot(t(), "items");
      await addField(t(), cot.id, { name: "name", type: "text", primary: true });
      await addField(t(), cot.id, { name: "owner", type: "text" });
      attacker = (
        await userWith(t(), "attacker", [
          [["view"], "dcim.site", { description: "mine" }],
          [["change", "delete"], "dcim.site", null],
          [["view"], "custom_objects.items", { owner: "me" }],
          [["change", "delete"], "custom_objects.items", null],
          [["view"], "core.objectchange", null],
        ])
      ).token;
    });
    afterAll(() => app.close());

    const kinds = {
      site: {
        path: SITES,
        make: async (visible: boolean) => {
          const n = ++serial;
          const body = { name: `s-${n}`, slug: `s-${n}`, description: visible ? "mine" : "x" };
          const r = await t().json("POST", `${SITES}/`, { body });
          expect(r.status, JSON.stringify(r.body)).toBe(201);
          return r.body.id as number;
        },
        change: { description: "x", comments: "changed" },
        put: (id: number) => ({ name: `s-put-${id}`, slug: `s-put-${id}`, description: "x" }),
        field: "comments",
      },
      item: {
        path: ITEMS,
        make: async (visible: boolean) =>
          (await create(t(), "items", { name: `i-${++serial}`, owner: visible ? "me" : "x" })).id,
        change: { owner: "x", name: "changed" },
        put: (id: number) => ({ name: `i-put-${id}`, owner: "x" }),
        field: "name",
      },
    };

    /** The answer's status and bytes, the id named in it replaced by MISSING's. */
    const answer = async (method: string, path: string, body: unknown, id: number) => {
      const r = await t().req(method, path, { token: attacker, body });
      // the id where the answer names it (not inside a count such as "1 of 1")
      const named = new RegExp(`(?<=":|ID |id )${id}(?!\\d)`, "g");
      const text = (await r.text()).replace(named, String(MISSING));
      return { status: r.status, text, type: r.headers.get("content-type") };
    };
    const asAdmin = async (path: string) => (await t().json("GET", path)).body;

    for (const [kind, k] of Object.entries(kinds)) {
      const writes = (id: number) =>
        [
          ["DELETE", `${k.path}/${id}/`, undefined],
          ["PATCH", `${k.path}/${id}/`, k.change],
          ["PUT", `${k.path}/${id}/`, k.put(id)],
          ["DELETE", `${k.path}/`, [{ id }]],
          ["PATCH", `${k.path}/`, [{ id, ...k.change }]],
        ] as const;

      test(`${kind}: every write of a hidden object answers as a missing id, writes nothing`, async () => {
        const hidden = await k.make(false);
        const before = await asAdmin(`${k.path}/${hidden}/`);
        const missing = writes(MISSING);
        for (const [i, [method, path, body]] of writes(hidden).entries()) {
          const got = await answer(method, path, body, hidden);
          const want = await answer(missing[i]![0], missing[i]![1], missing[i]![2], MISSING);
          expect(got, `${method} ${path}`).toEqual(want);
          // one object's path: 404; a list: NetBox 4.7's 400 naming the id (decision 0200)
          expect(want.status).toBe(Array.isArray(body) ? 400 : 404);
          expect(await asAdmin(`${k.path}/${hidden}/`)).toEqual(before);
        }
      });

      test(`${kind}: a visible object is still changed and deleted`, async () => {
        const visible = await k.make(true);
        const r = await t().json("PATCH", `${k.path}/${visible}/`, {
          token: attacker,
          body: { [k.field]: "still-mine" },
        });
        expect(r.status, JSON.stringify(r.body)).toBe(200);
        const gone = await t().req("DELETE", `${k.path}/${visible}/`, { token: attacker });
        expect(gone.status).toBe(204);
        expect((await t().json("GET", `${k.path}/${visible}/`)).status).toBe(404);
      });

      test(`${kind}: the view guard costs a constrained viewer no round trip of its own`, async () => {
        if (!app.proxy) return; // counted on the remote database only
        const proxy = app.proxy;
        const label = kind === "site" ? "dcim.site" : "custom_objects.items";
        const whole = (
          await userWith(t(), `whole-${kind}`, [[["view", "change", "delete"], label, null]])
        ).token;
        /** The DELETE's own round trips, the background work earlier requests left settled first. */
        const trips = async (token: string, username: string) => {
          const warm = await k.make(true);
          const id = await k.make(true);
          // the caller's last request before the count: a write warming the caches it takes
          const patched = await t().json("PATCH", `${k.path}/${warm}/`, {
            token,
            body: { [k.field]: "warm" },
          });
          expect(patched.status, JSON.stringify(patched.body)).toBe(200);
          // a token's first use records it off the request, and the full-text index's flush (its
          // start-up sweep, the custom objects written above) runs on a timer: neither is the
          // DELETE's, and either would land in its count
          await settleBeforeCounting(
            t().app,
            () => t().json("GET", "/api/status/", { token }),
            username,
          );
          proxy.reset();
          expect((await t().req("DELETE", `${k.path}/${id}/`, { token })).status).toBe(204);
          return { count: proxy.count, log: proxy.log.map((l) => l.sql) };
        };
        const constrained = await trips(attacker, "attacker");
        const unconstrained = await trips(whole, `whole-${kind}`);
        expect(constrained.count, JSON.stringify(constrained.log)).toBe(unconstrained.count);
        expect(unconstrained.count, JSON.stringify(unconstrained.log)).toBe(2);
      });

      for (const mode of ["remembered", "forgotten"] as const)
        test(`${kind}: a revert (record ${mode}) of a hidden object's create or update writes nothing`, async () => {
          const hidden = await k.make(false);
          const created = await lastChange();
          const p = await t().json("PATCH", `${k.path}/${hidden}/`, { body: { [k.field]: "v2" } });
          expect(p.status, JSON.stringify(p.body)).toBe(200);
          const updated = await lastChange();
          const before = await asAdmin(`${k.path}/${hidden}/`);
          for (const change of [updated, created]) {
            if (mode === "forgotten") forgetChange(servicesOf(t().app), change);
            else await t().json("GET", `/api/core/object-changes/${change}/`);
            const r = await t().json("POST", `/api/core/object-changes/${change}/revert/`, {
              token: attacker,
            });
            expect(r.status, JSON.stringify(r.body)).toBe(404);
            expect(await asAdmin(`${k.path}/${hidden}/`)).toEqual(before);
          }
        });
    }

    const lastChange = async () =>
      (await t().json("GET", "/api/core/object-changes/?ordering=-id&limit=1")).body.results[0]
        .id as number;
  });
