/**
 * Migration 0014 fills the network numbers (decision 0203) of rows stored before it in SQL, so a
 * database migrated by SQL alone (D1, by wrangler) has them: its statements, run on stored
 * prefixes and addresses, agree with `src/networks.ts` (the numbers every write stores) on every
 * row: IPv4 and IPv6, every mask length, `::` anywhere, host bits set, and text that is no network
 * (left for the start-up step, which marks it family 0).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { MIGRATIONS_FOLDER } from "../../src/db/migrate";
import { addressNumbers, prefixNumbers } from "../../src/networks";
import { makeTestApp, type TestApp } from "../helpers/app";

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(() => t.close());

const ODD = [
  "10.0.0.0/8",
  "10.1.2.77/24",
  "0.0.0.0/0",
  "255.255.255.255/32",
  "010.0.0.0/8",
  "300.0.0.0/8",
  "10.0.0.0/33",
  "10.0.0/8",
  "10.0.0.0",
  "10.0.0.0/",
  "2001:db8::/32",
  "2001:DB8:1:2::/64",
  "::/0",
  "::1/128",
  "1::/16",
  "fe80::1:2:3:4/65",
  "1:2:3:4:5:6:7:8/128",
  "1:2:3:4:5:6:7::/112",
  "::2:3:4:5:6:7:8/3",
  "2001:db8::1::2/64",
  "12345::/16",
  "2001:db8::/129",
  "g::/16",
  "1:2:3:4:5:6:7:8:9/64",
  "1:2:3:4:5:6:7/64",
  "abc/24",
  // IPv6 with an IPv4 tail (an IPv4-mapped address, NAT64): the tail is two groups
  "::ffff:1.2.3.4/128",
  "::FFFF:192.0.2.1/96",
  "64:ff9b::192.0.2.33/120",
  "1:2:3:4:5:6:1.2.3.4/128",
  "::1.2.3.4/128",
  "::ffff:01.2.3.4/128",
  "::ffff:1.2.3.256/128",
  "::ffff:1.2.3/128",
  "::ffff:1.2.3.4.5/128",
  "::ffff:1..3.4/128",
  "::ffff:a1.2.3.4/128",
  "::ffff:1234.2.3.4/128",
  "::1.2.3.4:5/128",
  "1.2.3.4::/64",
  "1:2:3:4:5:6:7:1.2.3.4/128",
  "::ffff:1.2.3.4/129",
];

/** Every mask length of one IPv4 and one IPv6 address, host bits set: each partial nibble. */
const MASKS = [
  ...Array.from({ length: 33 }, (_, m) => `203.0.113.219/${m}`),
  ...Array.from({ length: 129 }, (_, m) => `2001:db8:a5c3:7e19:ffff:1234:abcd:9f5e/${m}`),
];

/** The migration's backfill statements (its UPDATEs), as drizzle's migrator splits the file. */
function backfillStatements(): string[] {
  const file = readFileSync(join(MIGRATIONS_FOLDER, "0014_network_columns.sql"), "utf8");
  return file.split("--> statement-breakpoint").filter((s) => /^\s*(--.*\n\s*)*UPDATE/.test(s));
}

test("the migration's SQL numbers agree with src/networks.ts on every stored row", async () => {
  const orm = t.deps.db.orm;
  const texts = [...ODD, ...MASKS];
  for (const text of texts) {
    await orm.run(
      sql`INSERT INTO prefixes (prefix, created, last_updated) VALUES (${text}, '', '')`,
    );
    await orm.run(
      sql`INSERT INTO ip_addresses (address, created, last_updated) VALUES (${text}, '', '')`,
    );
  }
  const statements = backfillStatements();
  expect(statements.length).toBe(2);
  for (const s of statements) await orm.run(sql.raw(s));

  const prefixes = (await orm.all(
    sql`SELECT prefix, _family, _mask, _first, _last FROM prefixes`,
  )) as Record<string, unknown>[];
  const addresses = (await orm.all(
    sql`SELECT address, _family, _mask, _host FROM ip_addresses`,
  )) as Record<string, unknown>[];
  expect(prefixes.length).toBe(texts.length);
  for (const row of prefixes) {
    const n = prefixNumbers(row.prefix);
    const want = n.netFamily
      ? { _family: n.netFamily, _mask: n.netMask, _first: n.netFirst, _last: n.netLast }
      : { _family: null, _mask: null, _first: null, _last: null };
    expect({ prefix: row.prefix, ...want }).toEqual(row as any);
  }
  for (const row of addresses) {
    const n = addressNumbers(row.address);
    const want = n.netFamily
      ? { _family: n.netFamily, _mask: n.netMask, _host: n.netHost }
      : { _family: null, _mask: null, _host: null };
    expect({ address: row.address, ...want }).toEqual(row as any);
  }
  // the networks among them got numbers (the comparison above is not one of nulls alone)
  expect(prefixes.filter((r) => r._family !== null).length).toBe(MASKS.length + 20);
});
