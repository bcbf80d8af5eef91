/**
 * What a remote GET by id sends and gets back (decision 0214): its one statement binds no
 * nested form's keys (they are literals of its text) and names every expression it selects, so
 * the answer's column names are short; the answers are those of a local file. Also: the pieces
 * that statement is built with refuse what they must not write, the request's origin follows
 * each request's own host, and an `Authorization` value kept parsed answers as parsed anew.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { InStatement, ResultSet } from "@libsql/client";
import { sql } from "drizzle-orm";
import { integer, sqliteTable } from "drizzle-orm/sqlite-core";
import { credentialFromHeader } from "../../src/core/auth/tokens";
import { jsonKey } from "../../src/db/json-key";
import { namedExpressions } from "../../src/db/wide-select";
import { makeTestApp, type TestApp } from "../helpers/app";
import { type RemoteDb, startRemoteDb } from "../helpers/remote-db";
import { addField, CO, create, makeCot } from "../custom-objects/fixtures";
import { settleBeforeCounting } from "../helpers/settle";

let remote: RemoteDb;
let t: TestApp;
let local: TestApp;
const paths: string[] = [];

/** The same data on both apps: a site with a tenant, a custom object pointing at the site. */
async function seed(app: TestApp) {
  const tenant = (
    await app.json("POST", "/api/tenancy/tenants/", { body: { name: "T", slug: "t" } })
  ).body.id;
  const site = (
    await app.json("POST", "/api/dcim/sites/", { body: { name: "S", slug: "s", tenant } })
  ).body.id;
  const cot = await makeCot(app, "thing");
  await addField(app, cot.id, { name: "title", type: "text", primary: true });
  await addField(app, cot.id, { name: "site", type: "object", related_object_type: "dcim.site" });
  const object = (await create(app, "thing", { title: "alpha", site })).id;
  return [`/api/dcim/sites/${site}/`, `${CO}/thing/${object}/`];
}

beforeAll(async () => {
  remote = await startRemoteDb("get-statement");
  t = await makeTestApp({ DATABASE_URL: remote.url });
  local = await makeTestApp();
  paths.push(...(await seed(t)));
  expect(await seed(local)).toEqual(paths);
});
afterAll(async () => {
  await t.close();
  await local.close();
  await remote.stop();
});

/** The statements the app's remote client executes during `run`, with their answers' columns. */
async function executed(run: () => Promise<unknown>) {
  const client = t.deps.db.client;
  const real = client.execute.bind(client);
  const seen: Array<{ statement: InStatement; columns: string[] }> = [];
  client.execute = (async (statement: InStatement) => {
    const result: ResultSet = await real(statement);
    seen.push({ statement, columns: result.columns });
    return result;
  }) as typeof client.execute;
  try {
    await run();
  } finally {
    client.execute = real as typeof client.execute;
  }
  return seen;
}

const timeless = (body: unknown) =>
  JSON.stringify(body).replace(/"\d{4}-\d\d-\d\dT[\d:.]+Z"/g, '"T"');

test("a remote GET by id: one statement, no bound JSON keys, every column named; the answer a file's", async () => {
  for (const path of paths) {
    await t.json("GET", path);
    await settleBeforeCounting(t.app, () => t.json("GET", "/api/status/"), "admin");
    let answer!: { status: number; body: unknown };
    const seen = await executed(async () => {
      answer = await t.json("GET", path);
    });
    expect(answer.status).toBe(200);
    expect(seen.length).toBe(1);
    const [{ statement, columns }] = seen as [(typeof seen)[number]];
    const args = (statement as { args: unknown[] }).args;
    // a nested form's keys (a site's: `naturalName`, `lastUpdated`, …) are in the text
    for (const key of ["id", "name", "naturalName", "lastUpdated", "tenantId"])
      expect(args).not.toContain(key);
    expect((statement as { sql: string }).sql).toContain("'lastUpdated', ");
    // no column named by an expression's text: the tags, the nested forms are named
    for (const name of columns) expect(name).toMatch(/^[A-Za-z_][A-Za-z0-9_]*$/);
    expect(columns).toContain("__tags");
    // the answer a local file gives for the same data
    const same = await local.json("GET", path);
    expect(timeless(answer.body)).toBe(timeless(same.body));
  }
});

test("jsonKey writes a name of letters, digits and underscores as a literal, refuses anything else", () => {
  expect(jsonKey("lastUpdated").queryChunks).toHaveLength(1);
  for (const bad of ["a'b", "", "1st", "a b", 'x"', "é"])
    expect(() => jsonKey(bad)).toThrow(/unsafe JSON key/);
});

test("namedExpressions names SQL expressions by a plain key; columns and other keys as they were", () => {
  const table = sqliteTable("named_probe", { id: integer("id") });
  const expression = sql`1`;
  const odd = sql`2`;
  const out = namedExpressions({ id: table.id, __tags: expression, "a-b": odd });
  expect(out.id).toBe(table.id);
  expect((out.__tags as unknown as { fieldAlias: string }).fieldAlias).toBe("__tags");
  expect(out["a-b"]).toBe(odd);
});

test("the answer's URLs follow each request's own host, requests of two hosts alternating", async () => {
  for (const host of ["http://one.test", "http://two.test:8080", "http://one.test"]) {
    const r = await t.app.request(`${host}${paths[0]}`, {
      headers: { authorization: `Token ${t.admin}` },
    });
    expect(r.status).toBe(200);
    expect(((await r.json()) as { url: string }).url).toBe(`${host}${paths[0]}`);
  }
});

test("an Authorization value parses the same each time it comes (kept parses are frozen)", () => {
  const long = `Token ${"x".repeat(300)}`;
  for (let round = 0; round < 2; round++) {
    expect(credentialFromHeader("Token abc")).toEqual({ version: 1, secret: "abc" });
    expect(credentialFromHeader("Bearer nbt_key1.secret1")).toEqual({
      version: 2,
      key: "key1",
      secret: "secret1",
    });
    expect(credentialFromHeader("Bearer nbt_key1")).toBe("malformed");
    expect(credentialFromHeader(long)).toBe("malformed");
    expect(credentialFromHeader("  ")).toBeNull();
    expect(credentialFromHeader(undefined)).toBeNull();
  }
  expect(Object.isFrozen(credentialFromHeader("Token abc"))).toBe(true);
});
