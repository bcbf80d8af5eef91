/**
 * Outside probe (decision 0191): the change log named the users behind its records to callers
 * who may not view them. The nested `user` kept its id alone, but `user_name`, `display` ("… by
 * admin"), the `user_name` filter, `?q=` and `?ordering=user_name` told the name, a character
 * at a time. NetBox shows every record's user name; we are stricter. On a local file and a
 * remote database (their list reads differ).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { userWith } from "../helpers/grants";
import { appOn, type BackendApp } from "../helpers/remote-db";

const CHANGES = "/api/core/object-changes/?changed_object_type=dcim.site";

for (const backend of ["local", "remote"] as const)
  describe(`${backend}: the change log's user names`, () => {
    let app: BackendApp;
    const t = () => app.t;
    let blind = "";
    let partial = "";
    let seer = "";
    beforeAll(async () => {
      app = await appOn(backend, `change-user-names-${backend}`);
      const writer = (
        await userWith(t(), "zed-writer", [[["add", "view", "change"], "dcim.site", null]])
      ).token;
      const seen = (await userWith(t(), "seen-writer", [[["add", "view"], "dcim.site", null]]))
        .token;
      for (const [token, slug] of [
        [t().admin, "s-one"],
        [writer, "s-two"],
        [seen, "s-three"],
      ] as const) {
        const r = await t().json("POST", "/api/dcim/sites/", {
          token,
          body: { name: slug, slug },
        });
        expect(r.status, JSON.stringify(r.body)).toBe(201);
      }
      const base: Array<[string[], string, unknown]> = [
        [["view"], "core.objectchange", null],
        [["view"], "dcim.site", null],
      ];
      blind = (await userWith(t(), "blind", base)).token;
      partial = (
        await userWith(t(), "partial", [
          ...base,
          [["view"], "users.user", { username: "seen-writer" }],
        ])
      ).token;
      seer = (await userWith(t(), "seer", [...base, [["view"], "users.user", null]])).token;
    });
    afterAll(() => app.close());

    const list = async (query: string, token: string) => {
      const r = await t().json("GET", `${CHANGES}${query}&ordering=id`, { token });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      return r.body as { count: number; results: any[] };
    };
    const names = (records: any[]) =>
      records.map((r) => [r.user_name, r.display, r.user?.username ?? null]);

    test("records show the name only of a user the caller may view", async () => {
      expect(names((await list("", blind)).results)).toEqual([
        ["", "s-one created", null],
        ["", "s-two created", null],
        ["", "s-three created", null],
      ]);
      expect(names((await list("", partial)).results)).toEqual([
        ["", "s-one created", null],
        ["", "s-two created", null],
        ["seen-writer", "s-three created by seen-writer", "seen-writer"],
      ]);
      const one = (await list("", partial)).results[0];
      const detail = await t().json("GET", `/api/core/object-changes/${one.id}/`, {
        token: partial,
      });
      expect(detail.body.user_name).toBe("");
      expect(detail.body.display).toBe("s-one created");
      for (const token of [seer, t().admin])
        expect(names((await list("", token)).results)).toEqual([
          ["admin", "s-one created by admin", "admin"],
          ["zed-writer", "s-two created by zed-writer", "zed-writer"],
          ["seen-writer", "s-three created by seen-writer", "seen-writer"],
        ]);
    });

    test("a deleted user's name shows only to a caller who may view every user", async () => {
      const gone = await userWith(t(), "gone-writer", [[["add", "view"], "dcim.site", null]]);
      const site = await t().json("POST", "/api/dcim/sites/", {
        token: gone.token,
        body: { name: "s-gone", slug: "s-gone" },
      });
      expect(site.status).toBe(201);
      expect((await t().req("DELETE", `/api/users/users/${gone.id}/`)).status).toBe(204);
      const of = async (token: string) =>
        names((await list(`&changed_object_id=${site.body.id}`, token)).results);
      for (const token of [blind, partial])
        expect(await of(token)).toEqual([["", "s-gone created", null]]);
      expect(await of(seer)).toEqual([["gone-writer", "s-gone created by gone-writer", null]]);
    });

    test("a filter, a search or an ordering by a hidden name answers as one naming nothing", async () => {
      for (const token of [blind, partial]) {
        const probes: Array<[string, string]> = [
          ["&user_name=admin", "&user_name=nobody"],
          ["&user_name__isw=a", "&user_name__isw=q"],
          ["&user_name__ic=writer&user_name__n=seen-writer", "&user_name=nobody"],
          ["&q=admin", "&q=nobody"],
          ["&q=zed", "&q=nobody"],
        ];
        for (const [guess, miss] of probes)
          expect(await list(guess, token), guess).toEqual(await list(miss, token));
        // hidden names sort as one: their records keep their id order either way
        const order = async (by: string) => {
          const r = await t().json("GET", `${CHANGES}&ordering=${by},id`, { token });
          return (r.body.results as any[]).filter((x) => !x.user?.username).map((x) => x.id);
        };
        expect(await order("user_name")).toEqual(await order("-user_name"));
      }
      expect((await list("&user_name=seen-writer", partial)).count).toBe(1);
      expect((await list("&user_name=admin", seer)).count).toBe(1);
      expect((await list("&q=zed", t().admin)).count).toBe(1);
    });
  });
