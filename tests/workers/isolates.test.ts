/**
 * One database, many app instances: a change made through one isolate is seen by the next
 * request in any other — two Worker isolates (one Miniflare, shared KV like production) and a
 * Bun app, all on one Hrana database. Custom object shapes are re-checked per request.
 */
import { afterAll, beforeAll, describe, expect, test, setDefaultTimeout } from "bun:test";
import { BASE, makeTestApp, type TestApp } from "../helpers/app";
import { requestInit, type ContractRequestOptions } from "../helpers/contract";
import {
  startRemoteDatabase,
  startWorker,
  type RemoteDatabase,
  type RunningWorker,
} from "../helpers/worker";

// Real workerd, wrangler and redis-server processes: more room than bun's 5 s default
// (this bun does not apply bunfig's [test] timeout).
setDefaultTimeout(30_000);

const CO = "/api/plugins/custom-objects";

let db: RemoteDatabase;
let worker: RunningWorker;
let bun: TestApp;
let token: string;

type Via = (
  method: string,
  path: string,
  opts?: ContractRequestOptions,
) => Promise<{ status: number; body: any }>;
const decode = async (res: Response) => {
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
};
const isolate =
  (name: string): Via =>
  async (method, path, opts = {}) =>
    decode(await worker.fetchVia(name, path, requestInit(method, { token, ...opts })));
const viaBun: Via = async (method, path, opts = {}) =>
  decode(await bun.app.request(BASE + path, requestInit(method, { token, ...opts })));
const a = isolate("host");
const b = isolate("second");

beforeAll(async () => {
  db = await startRemoteDatabase();
  token = await db.superuserToken("edge-admin");
  worker = await startWorker({
    name: "isolates",
    bindings: { DATABASE_URL: db.url },
    extraWorkers: ["second"],
  });
  bun = await makeTestApp({ DATABASE_URL: db.url });
});
afterAll(async () => {
  await bun?.close();
  await worker?.stop();
  await db?.stop();
});

describe("isolates on one database", () => {
  test("the two workers are separate isolates: each built its own app", async () => {
    const [sa, sb] = [await a("GET", "/api/status/"), await b("GET", "/api/status/")];
    expect(sa.body.runtime).toBe("workerd");
    expect(sb.body.runtime).toBe("workerd");
    // Built lazily by their first requests, one after the other: different start times.
    expect(sa.body["started-at"]).not.toBe(sb.body["started-at"]);
    expect((await viaBun("GET", "/api/status/")).body.runtime).toStartWith("bun");
    expect(bun.deps.db.kind).toBe("remote");
  });

  test("custom object schema changes through one isolate are seen by the next request in the others", async () => {
    const cot = await a("POST", `${CO}/custom-object-types/`, {
      body: { name: "widget", slug: "widget" },
    });
    expect(cot.status).toBe(201);
    expect(
      (
        await a("POST", `${CO}/custom-object-type-fields/`, {
          body: { custom_object_type: cot.body.id, name: "name", type: "text", primary: true },
        })
      ).status,
    ).toBe(201);
    const first = await a("POST", `${CO}/widget/`, { body: { name: "w1" } });
    expect(first.status).toBe(201);

    // Warm every other instance's model registry with the one-field shape.
    expect(Object.keys((await b("GET", `${CO}/widget/${first.body.id}/`)).body)).not.toContain(
      "size",
    );
    expect(Object.keys((await viaBun("GET", `${CO}/widget/${first.body.id}/`)).body)).not.toContain(
      "size",
    );

    // Add a field through isolate A: B and Bun must write and read it on their next request.
    const size = await a("POST", `${CO}/custom-object-type-fields/`, {
      body: { custom_object_type: cot.body.id, name: "size", type: "integer" },
    });
    expect(size.status).toBe(201);
    const viaB = await b("POST", `${CO}/widget/`, { body: { name: "w2", size: 5 } });
    expect(viaB.status).toBe(201);
    expect(viaB.body.size).toBe(5);
    expect((await viaBun("GET", `${CO}/widget/${viaB.body.id}/`)).body.size).toBe(5);

    // Remove it through Bun: both isolates stop accepting it at once.
    expect(
      (await viaBun("DELETE", `${CO}/custom-object-type-fields/${size.body.id}/`)).status,
    ).toBe(204);
    for (const via of [a, b]) {
      expect(Object.keys((await via("GET", `${CO}/widget/${viaB.body.id}/`)).body)).not.toContain(
        "size",
      );
      const refused = await via("POST", `${CO}/widget/`, {
        body: { name: `w-${Math.random()}`, size: 1 },
      });
      expect(refused.status).toBe(400);
      expect(refused.body.size).toBeDefined();
    }

    // Delete the type through B: A answers 404 for its endpoint on the next request.
    expect((await b("DELETE", `${CO}/custom-object-types/${cot.body.id}/`)).status).toBe(204);
    expect((await a("GET", `${CO}/widget/`)).status).toBe(404);
    expect((await viaBun("GET", `${CO}/widget/`)).status).toBe(404);
  });

  test("host data written through one instance is read by the others", async () => {
    const site = await a("POST", "/api/dcim/sites/", { body: { name: "Shared", slug: "shared" } });
    expect(site.status).toBe(201);
    expect((await b("GET", `/api/dcim/sites/${site.body.id}/`)).body.name).toBe("Shared");
    expect(
      (
        await viaBun("PATCH", `/api/dcim/sites/${site.body.id}/`, {
          body: { description: "from bun" },
        })
      ).status,
    ).toBe(200);
    expect((await a("GET", `/api/dcim/sites/${site.body.id}/`)).body.description).toBe("from bun");
    expect((await b("DELETE", `/api/dcim/sites/${site.body.id}/`)).status).toBe(204);
    expect((await a("GET", `/api/dcim/sites/${site.body.id}/`)).status).toBe(404);
  });

  test("a token revoked through one isolate is refused by the other at once (shared KV cache)", async () => {
    const me = await a("GET", "/api/users/users/?username=edge-admin");
    const made = await a("POST", "/api/users/tokens/", { body: { user: me.body.results[0].id } });
    expect(made.status).toBe(201);
    const credential = `nbt_${made.body.key}.${made.body.token}`;
    // Both isolates cache the lookup in KV.
    expect((await a("GET", "/api/status/", { token: credential })).status).toBe(200);
    expect((await b("GET", "/api/status/", { token: credential })).status).toBe(200);
    expect((await b("DELETE", `/api/users/tokens/${made.body.id}/`)).status).toBe(204);
    expect((await a("GET", "/api/status/", { token: credential })).status).toBe(403);
  });
});
