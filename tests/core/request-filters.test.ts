/**
 * NetBox's `created_by_request`, `updated_by_request` and `modified_by_request` filters (its
 * `ChangeLoggedModelFilterSet`) over Host's change log, on host models and custom objects, on a
 * local file and a remote database (decision 0215): the objects a request created, updated, or
 * either; a value that is no UUID is NetBox's 400; a caller sees only what they may view.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { requestFilters } from "../../src/core/changes/request-filters";
import { sites as sitesTable } from "../../src/db/schema";
import { CO, addField } from "../custom-objects/fixtures";
import type { TestApp } from "../helpers/app";
import { userWith } from "../helpers/grants";
import { appOn, type BackendApp } from "../helpers/remote-db";

const R1 = "0c6e4a52-3f7b-4b57-9d43-1f0a7c2e9a01";
const R2 = "0c6e4a52-3f7b-4b57-9d43-1f0a7c2e9a02";
const NOBODY = "0c6e4a52-3f7b-4b57-9d43-1f0a7c2e9aff";

for (const backend of ["local", "remote"] as const)
  describe(`request filters (${backend})`, () => {
    let b: BackendApp;
    let t: TestApp;
    /** Site ids by name; the request a site was created in without an `X-Request-Id` header. */
    const sites: Record<string, number> = {};
    let generated = "";
    const as = (id: string) => ({ headers: { "x-request-id": id } });
    const names = async (path: string, query: string, token?: string) => {
      const r = await t.json("GET", `${path}?${query}&ordering=id`, { token });
      expect({ query, status: r.status, body: r.status === 200 ? "" : r.body }).toEqual({
        query,
        status: 200,
        body: "",
      });
      expect(r.body.count).toBe(r.body.results.length);
      return r.body.results.map((o: { name: string }) => o.name);
    };

    beforeAll(async () => {
      b = await appOn(backend, `request-filters-${backend}`);
      t = b.t;
      // R1 creates two sites (one planned) and a tenant; R2 updates one and creates another
      const made = await t.json("POST", "/api/dcim/sites/", {
        body: [
          { name: "rf one", slug: "rf-one", status: "active" },
          { name: "rf two", slug: "rf-two", status: "planned" },
        ],
        ...as(R1),
      });
      expect(made.status).toBe(201);
      for (const s of made.body) sites[s.name] = s.id;
      expect(
        (
          await t.json("POST", "/api/tenancy/tenants/", {
            body: { name: "rf t", slug: "rf-t" },
            ...as(R1),
          })
        ).status,
      ).toBe(201);
      const patched = await t.json("PATCH", `/api/dcim/sites/${sites["rf one"]}/`, {
        body: { description: "moved" },
        ...as(R2),
      });
      expect(patched.status).toBe(200);
      const three = await t.json("POST", "/api/dcim/sites/", {
        body: { name: "rf three", slug: "rf-three", status: "active" },
        ...as(R2),
      });
      expect(three.status).toBe(201);
      sites["rf three"] = three.body.id;
      const four = await t.json("POST", "/api/dcim/sites/", {
        body: { name: "rf four", slug: "rf-four" },
      });
      generated = four.res.headers.get("x-request-id")!;
      expect(generated).toMatch(/^[0-9a-f-]{36}$/);
    });
    afterAll(() => b.close());

    test("created, updated or either: the objects of the list's type that request changed", async () => {
      const list = "/api/dcim/sites/";
      expect(await names(list, `created_by_request=${R1}`)).toEqual(["rf one", "rf two"]);
      expect(await names(list, `updated_by_request=${R1}`)).toEqual([]);
      expect(await names(list, `modified_by_request=${R1}`)).toEqual(["rf one", "rf two"]);
      expect(await names(list, `created_by_request=${R2}`)).toEqual(["rf three"]);
      expect(await names(list, `updated_by_request=${R2}`)).toEqual(["rf one"]);
      expect(await names(list, `modified_by_request=${R2}`)).toEqual(["rf one", "rf three"]);
      expect(await names(list, `created_by_request=${generated}`)).toEqual(["rf four"]);
      expect(await names(list, `created_by_request=${NOBODY}`)).toEqual([]);
      // the tenant R1 created is a tenant's, not a site's
      expect(await names("/api/tenancy/tenants/", `created_by_request=${R1}`)).toEqual(["rf t"]);
      expect(await names("/api/tenancy/tenants/", `created_by_request=${R2}`)).toEqual([]);
      // with other filters, and the same UUID in the spellings Django's UUIDField takes
      expect(await names(list, `modified_by_request=${R2}&status=active&q=three`)).toEqual([
        "rf three",
      ]);
      for (const spelled of [
        R1.toUpperCase(),
        `{${R1}}`,
        `urn:uuid:${R1}`,
        R1.replaceAll("-", ""),
        ` ${R1} `,
      ])
        expect(await names(list, `created_by_request=${encodeURIComponent(spelled)}`)).toEqual([
          "rf one",
          "rf two",
        ]);
      // an empty value filters nothing, as django-filter skips it
      expect(await names(list, "created_by_request=&slug__isw=rf-")).toHaveLength(4);
    });

    test("a request id sent in upper case is found by its UUID in any case", async () => {
      const upper = "0C6E4A52-3F7B-4B57-9D43-1F0A7C2E9B03";
      const made = await t.json("POST", "/api/tenancy/tenants/", {
        body: { name: "rf upper", slug: "rf-upper" },
        ...as(upper),
      });
      expect(made.status).toBe(201);
      for (const v of [upper, upper.toLowerCase()])
        expect(await names("/api/tenancy/tenants/", `created_by_request=${v}`)).toEqual([
          "rf upper",
        ]);
    });

    test("custom objects, custom object types and other host lists take them too", async () => {
      const cot = await t.json("POST", `${CO}/custom-object-types/`, {
        body: { name: "rfbox", slug: "rfbox" },
        ...as(R1),
      });
      expect(cot.status).toBe(201);
      await addField(t, cot.body.id, { name: "name", type: "text", primary: true });
      const boxes = await t.json("POST", `${CO}/rfbox/`, {
        body: [{ name: "b1" }, { name: "b2" }],
        ...as(R1),
      });
      expect(boxes.status).toBe(201);
      expect(
        (
          await t.json("PATCH", `${CO}/rfbox/${boxes.body[1].id}/`, {
            body: { name: "b2x" },
            ...as(R2),
          })
        ).status,
      ).toBe(200);
      expect(await names(`${CO}/rfbox/`, `created_by_request=${R1}`)).toEqual(["b1", "b2x"]);
      expect(await names(`${CO}/rfbox/`, `updated_by_request=${R2}`)).toEqual(["b2x"]);
      expect(await names(`${CO}/rfbox/`, `modified_by_request=${R2}`)).toEqual(["b2x"]);
      expect(await names(`${CO}/custom-object-types/`, `created_by_request=${R1}`)).toEqual([
        "rfbox",
      ]);
      expect(await names(`${CO}/custom-object-types/`, `created_by_request=${R2}`)).toEqual([]);
      const tags = await t.json("POST", "/api/extras/tags/", {
        body: { name: "rf tag", slug: "rf-tag" },
        ...as(R2),
      });
      expect(tags.status).toBe(201);
      expect(await names("/api/extras/tags/", `created_by_request=${R2}`)).toEqual(["rf tag"]);
    });

    test("a value that is no UUID, a second value or a lookup: 400 naming the parameter", async () => {
      for (const list of ["/api/dcim/sites/", "/api/extras/tags/", `${CO}/rfbox/`])
        for (const [query, key, message] of [
          ["created_by_request=nope", "created_by_request", "Enter a valid UUID."],
          [`updated_by_request=${R1}x`, "updated_by_request", "Enter a valid UUID."],
          ["modified_by_request=12345", "modified_by_request", "Enter a valid UUID."],
          [
            `created_by_request=${R1}&created_by_request=${R2}`,
            "created_by_request",
            "This filter takes one value.",
          ],
          [
            `created_by_request__n=${R1}`,
            "created_by_request__n",
            'Lookup "n" is not supported for created_by_request.',
          ],
        ] as const) {
          const r = await t.json("GET", `${list}?${query}`);
          expect({ list, query, status: r.status, body: r.body }).toEqual({
            list,
            query,
            status: 400,
            body: { [key]: [message] },
          });
        }
      // a lookup no filter has at all is refused too on a custom object list (0206), naming it
      const regex = await t.json("GET", `${CO}/rfbox/?created_by_request__regex=x`);
      expect(regex.status).toBe(400);
      expect(regex.body.created_by_request__regex[0]).toContain('Lookup "regex"');
    });

    test("a constrained caller sees only the objects they may view, counted as such", async () => {
      const viewer = (
        await userWith(t, `rf-viewer-${backend}`, [
          [["view"], "dcim.site", { status: "active" }],
          [["view"], "custom_objects.rfbox", { name: "b1" }],
        ])
      ).token;
      // R1 created an active and a planned site: the planned one is neither listed nor counted
      expect(await names("/api/dcim/sites/", `created_by_request=${R1}`, viewer)).toEqual([
        "rf one",
      ]);
      expect(await names("/api/dcim/sites/", `modified_by_request=${R2}`, viewer)).toEqual([
        "rf one",
        "rf three",
      ]);
      expect(await names(`${CO}/rfbox/`, `created_by_request=${R1}`, viewer)).toEqual(["b1"]);
      expect(await names(`${CO}/rfbox/`, `updated_by_request=${R2}`, viewer)).toEqual([]);
      // a list the caller may not view stays refused, with or without the filter
      const tenants = await t.json("GET", `/api/tenancy/tenants/?created_by_request=${R1}`, {
        token: viewer,
      });
      expect(tenants.status).toBe(403);
      // GraphQL's filter (OR, NOT) never reaches past the caller's view either
      const query = `{ site_list(filters: {OR: [{created_by_request: {exact: "${R1}"}}, {NOT: {created_by_request: {exact: "${R1}"}}}]}) { name } }`;
      const gql = await t.json("POST", "/graphql/", { body: { query }, token: viewer });
      expect(gql.body.errors).toBeUndefined();
      // every active site, the one no filtered request made too; never the planned one
      expect(gql.body.data.site_list.map((s: { name: string }) => s.name).sort()).toEqual([
        "rf four",
        "rf one",
        "rf three",
      ]);
      const only = `{ site_list(filters: {created_by_request: {exact: "${R1}"}}) { name } }`;
      const onlyR1 = await t.json("POST", "/graphql/", { body: { query: only }, token: viewer });
      expect(onlyR1.body).toEqual({ data: { site_list: [{ name: "rf one" }] } });
    });

    test("GraphQL: a value that is no UUID matches nothing, as any value a filter cannot read", async () => {
      const query = `{ site_list(filters: {created_by_request: {exact: "nope"}}) { name } }`;
      const r = await t.json("POST", "/graphql/", { body: { query } });
      expect(r.body).toEqual({ data: { site_list: [] } });
    });

    test("the change log is searched through its request index, the list's rows by id", async () => {
      const condition = requestFilters(sitesTable.id, { appLabel: "dcim", model: "site" })
        .modified_by_request.build!("exact", [R1])!;
      const plan = await t.deps.db.orm.all<{ detail: string }>(
        sql`EXPLAIN QUERY PLAN SELECT ${sitesTable.id} FROM ${sitesTable} WHERE ${condition}`,
      );
      const details = plan.map((p) => p.detail).join("\n");
      expect(details).toContain("object_changes_request_idx");
      expect(details).not.toContain("object_changes_object_idx");
      expect(details).not.toMatch(/SCAN (sites|oc)\b/);
    });
  });
