/**
 * NetBox's network filters (decision 0203) on Cloudflare D1 (miniflare's, migrated by wrangler
 * as a deploy is): the stored numbers are written by the D1 write path, and `prefix`, `address`,
 * `within`, `contains`, `parent` (16 prefixes: 48 bound values, under D1's 100), `family` and
 * `mask_length` answer and count as on the other backends; a NetBox filter Host does not model
 * is a 400 there too. Rows stored before migration 0014 get their numbers from its SQL on D1.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { MIGRATIONS_FOLDER } from "../../src/db/migrate";
import { type D1App, startD1App } from "../helpers/d1-app";

// wrangler's migration run takes 10–30 s on a busy machine
setDefaultTimeout(180_000);

let d1: D1App;

beforeAll(async () => {
  d1 = await startD1App("netfilters");
  await d1.made(
    "/api/ipam/prefixes/",
    ["10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24", "2001:db8::/32", "2001:db8:1::/48"].map(
      (prefix) => ({ prefix }),
    ),
  );
  await d1.made("/api/ipam/prefixes/", { prefix: "192.168.0.0/16" });
  await d1.made(
    "/api/ipam/ip-addresses/",
    ["10.1.2.3/24", "10.9.0.1/16", "2001:db8:1::1/64"].map((address) => ({ address })),
  );
});
afterAll(() => d1?.stop());

const list = async (path: string, key: string) => {
  const r = await d1.json("GET", path);
  if (r.status !== 200) throw new Error(`${path}: ${r.status} ${JSON.stringify(r.body)}`);
  expect(r.body.count).toBe(r.body.results.length);
  return (r.body.results as Record<string, string>[]).map((x) => x[key]).sort();
};

test("prefixes within, within_include, contains, family and mask_length on D1", async () => {
  const p = (q: string) => list(`/api/ipam/prefixes/?${q}`, "prefix");
  expect(await p("within=10.0.0.0/8")).toEqual(["10.1.0.0/16", "10.1.2.0/24"]);
  expect(await p("within_include=10.1.0.0/16")).toEqual(["10.1.0.0/16", "10.1.2.0/24"]);
  expect(await p("contains=10.1.2.9")).toEqual(["10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24"]);
  expect(await p("within=2001:db8::/32")).toEqual(["2001:db8:1::/48"]);
  expect(await p("family=4&mask_length__lte=16")).toEqual([
    "10.0.0.0/8",
    "10.1.0.0/16",
    "192.168.0.0/16",
  ]);
});

test("IP addresses by parent (16 prefixes at once), family and mask_length on D1", async () => {
  const a = (q: string) => list(`/api/ipam/ip-addresses/?${q}`, "address");
  expect(await a("parent=10.1.0.0/16")).toEqual(["10.1.2.3/24"]);
  const sixteen = Array.from({ length: 15 }, (_, i) => `parent=172.${16 + i}.0.0/16`);
  expect(await a([...sixteen, "parent=10.9.0.0/16"].join("&"))).toEqual(["10.9.0.1/16"]);
  expect(await a("family=6&mask_length=64")).toEqual(["2001:db8:1::1/64"]);
});

test("prefix= and address= compare networks on D1, many values as a few bound values", async () => {
  const p = (q: string) => list(`/api/ipam/prefixes/?${q}`, "prefix");
  const a = (q: string) => list(`/api/ipam/ip-addresses/?${q}`, "address");
  expect(await p("prefix=2001:DB8:0:0::/32")).toEqual(["2001:db8::/32"]);
  // 100 values (a filter's most), each with a mask: a few lists, not a value each (D1 takes 100)
  const many = Array.from({ length: 99 }, (_, i) => `prefix=172.${i}.0.0/16`);
  expect(await p([...many, "prefix=10.1.0.0/16"].join("&"))).toEqual(["10.1.0.0/16"]);
  expect(await a("address=10.1.2.3&address=2001:db8:1::1/64")).toEqual([
    "10.1.2.3/24",
    "2001:db8:1::1/64",
  ]);
  expect(await a("address=10.9.0.1/24")).toEqual([]);
});

test("a NetBox filter Host does not model is a 400 on D1, never every row", async () => {
  const r = await d1.json("GET", "/api/ipam/prefixes/?vrf_id=1");
  expect(r.status).toBe(400);
  expect(Object.keys(r.body)).toEqual(["vrf_id"]);
});

test("rows stored before migration 0014 get their numbers from its SQL on D1", async () => {
  // an IPv4-mapped prefix too: its IPv4 tail is two groups in the SQL as in src/networks.ts
  for (const text of ["100.64.0.0/10", "2001:db8:ff::/48", "::ffff:100.64.1.0/120"])
    await d1.binding
      .prepare("INSERT INTO prefixes (prefix, created, last_updated) VALUES (?, '', '')")
      .bind(text)
      .all();
  const file = readFileSync(join(MIGRATIONS_FOLDER, "0014_network_columns.sql"), "utf8");
  const updates = file.split("--> statement-breakpoint").filter((s) => s.includes("UPDATE `"));
  expect(updates.length).toBe(2);
  for (const s of updates) await d1.binding.prepare(s).bind().all();
  const p = (q: string) => list(`/api/ipam/prefixes/?${q}`, "prefix");
  expect(await p("within=100.0.0.0/8")).toEqual(["100.64.0.0/10"]);
  expect(await p("contains=2001:db8:ff::1")).toEqual(["2001:db8::/32", "2001:db8:ff::/48"]);
  expect(await p("within=::ffff:0:0/96")).toEqual(["::ffff:100.64.1.0/120"]);
});
