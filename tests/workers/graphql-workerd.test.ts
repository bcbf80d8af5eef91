/**
 * GraphQL in real workerd (Miniflare) over a Hrana database: the Worker bundle carries
 * graphql-yoga and the schema follows custom object changes across isolates.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { requestInit } from "../helpers/contract";
import {
  startRemoteDatabase,
  startWorker,
  type RemoteDatabase,
  type RunningWorker,
} from "../helpers/worker";

setDefaultTimeout(30_000);

const CO = "/api/plugins/custom-objects";
let db: RemoteDatabase;
let worker: RunningWorker;
let token: string;

const call = async (isolate: string, method: string, path: string, body?: unknown) => {
  const res = await worker.fetchVia(
    isolate,
    path,
    requestInit(method, { token, body, headers: { accept: "application/json" } }),
  );
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
};
const gql = (isolate: string, query: string) => call(isolate, "POST", "/graphql/", { query });

beforeAll(async () => {
  db = await startRemoteDatabase();
  token = await db.superuserToken("gql-admin");
  worker = await startWorker({
    name: "graphql-workerd",
    bindings: { DATABASE_URL: db.url },
    extraWorkers: ["second"],
  });
});
afterAll(async () => {
  await worker?.stop();
  await db?.stop();
});

describe("GraphQL on Workers", () => {
  test("host models and custom objects, relations resolved, in the next request of another isolate", async () => {
    const site = await call("host", "POST", "/api/dcim/sites/", { name: "Edge", slug: "edge" });
    expect(site.status).toBe(201);
    const cot = await call("host", "POST", `${CO}/custom-object-types/`, {
      name: "edge_box",
      slug: "edge-box",
    });
    expect(cot.status).toBe(201);
    for (const field of [
      { name: "label", type: "text", primary: true },
      { name: "site", type: "object", related_object_type: "dcim.site" },
    ])
      expect(
        (
          await call("host", "POST", `${CO}/custom-object-type-fields/`, {
            custom_object_type: cot.body.id,
            ...field,
          })
        ).status,
      ).toBe(201);
    expect(
      (await call("host", "POST", `${CO}/edge-box/`, { label: "b1", site: site.body.id })).status,
    ).toBe(201);

    const r = await gql(
      "second",
      `{ site_list { slug } custom_objects_edge_box_list { label display site { name slug } } }`,
    );
    expect(r.status).toBe(200);
    expect(r.body.errors).toBeUndefined();
    expect(r.body.data).toEqual({
      site_list: [{ slug: "edge" }],
      custom_objects_edge_box_list: [
        { label: "b1", display: "b1", site: { name: "Edge", slug: "edge" } },
      ],
    });

    // a field added through one isolate is queryable through the other at once
    expect(
      (
        await call("second", "POST", `${CO}/custom-object-type-fields/`, {
          custom_object_type: cot.body.id,
          name: "rack",
          type: "integer",
        })
      ).status,
    ).toBe(201);
    const after = await gql("host", `{ custom_objects_edge_box_list { label rack } }`);
    expect(after.body.data.custom_objects_edge_box_list).toEqual([{ label: "b1", rack: null }]);
  });

  test("limits and anonymous callers behave as on Bun", async () => {
    const res = await worker.fetch(
      "/graphql/",
      requestInit("POST", { body: { query: "{ site_list { id } }" } }),
    );
    expect(res.status).toBe(403);
    const deep = await gql(
      "host",
      `{ site_list { ${"tenant { ".repeat(15)}id${" }".repeat(15)} } }`,
    );
    expect(deep.status).toBeLessThan(500);
    expect(deep.body.errors?.length).toBeGreaterThan(0);
  });
});
