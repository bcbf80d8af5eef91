/**
 * The full-text (FTS5 trigram) index behind `?q=` and `__ic`/`__isw`/`__iew` (decisions 0050,
 * 0056): every answer is exactly the rows a scan returns — with rows pending, after a flush,
 * after updates, deletes and plain SQL writes —, pending rows are indexed shortly after a write,
 * the index follows field changes (rename, removal, new fields), respects permission constraints,
 * and an index of the older form is upgraded by the migrations.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { servicesOf } from "../../src/app";
import {
  flushSearchIndexesNow,
  SearchFlusher,
} from "../../src/plugins/custom-objects/search/flush";
import { openDatabase } from "../../src/db/local";
import { createLogger } from "../../src/services/logger";
import { makeTestApp, type TestApp } from "../helpers/app";
import { manualTimers, waitFor } from "../helpers/wait";
import { addField, choiceSet, CO, create, makeCot } from "./fixtures";

let t: TestApp;
let cot: { id: number; slug: string };
/** The type's rowid range in the shared index (decision 0130), as SQL. */
const range = () =>
  `BETWEEN ${cot.id} * 1099511627776 AND ${cot.id} * 1099511627776 + 1099511627775`;
const pendingCount = async () =>
  Number(
    (
      await t.deps.db.client.execute(
        `SELECT count(*) AS n FROM co_search_pending WHERE type_id = ${cot.id}`,
      )
    ).rows[0]!.n,
  );
const entryCount = async () =>
  Number(
    (
      await t.deps.db.client.execute(
        `SELECT count(*) AS n FROM co_search_docsize WHERE id ${range()}`,
      )
    ).rows[0]!.n,
  );
const markAllPending = () =>
  t.deps.db.client.execute(
    `INSERT OR IGNORE INTO co_search_pending(type_id, id) SELECT ${cot.id}, id FROM "co_${cot.id}"`,
  );
const flush = () => flushSearchIndexesNow(servicesOf(t.app));

const WORDS = [
  "Alpha",
  "alphabet",
  "ÉCOLE",
  "école",
  "100%_sure",
  'say "hi"',
  "x_y",
  "Zürich",
  "naïve",
  "abc",
  "ab",
  "ALPHA-beta",
  "mixedCase",
  "  spaced  ",
];
const rows: Array<{ title: string | null; notes: string | null; n: number }> = [];
for (let i = 0; i < 60; i++) {
  rows.push({
    title: i % 7 === 0 ? null : `${WORDS[i % WORDS.length]} ${i}`,
    notes: i % 5 === 0 ? null : `${WORDS[(i * 3) % WORDS.length]}/${WORDS[(i + 4) % WORDS.length]}`,
    n: i * 37,
  });
}

async function ids(query: string, token?: string): Promise<number[]> {
  const r = await t.json("GET", `${CO}/${cot.slug}/?limit=1000&${query}`, token ? { token } : {});
  expect(r.status).toBe(200);
  return (r.body.results as Array<{ id: number }>).map((x) => x.id).sort((a, b) => a - b);
}

/** The same condition as a plain scan of the table (what the list answered before the index). */
async function scan(where: string, args: unknown[]): Promise<number[]> {
  const rs = await t.deps.db.client.execute({
    sql: `SELECT id FROM co_${cot.id} WHERE ${where} ORDER BY id`,
    args: args as any,
  });
  return rs.rows.map((r) => Number(r.id));
}
const esc = (s: string) => s.replace(/[\\%_]/g, (m) => `\\${m}`);
const like = (col: string) => `${col} LIKE ? ESCAPE '\\'`;

const NEEDLES = [
  "alp",
  "ALPHA",
  "pha",
  "école",
  "ÉCO",
  "0%_",
  "%_s",
  '"hi"',
  "x_y",
  "ürich",
  "NAÏ",
  "ab",
  "a",
  "bet",
  "e 1",
  "/ab",
  "zzz",
  "sure/",
  "d  ",
  "37",
  "111",
  "2-b",
];

beforeAll(async () => {
  t = await makeTestApp();
  cot = await makeCot(t, "searchable", "searchable");
  await addField(t, cot.id, { name: "title", type: "text" });
  await addField(t, cot.id, { name: "notes", type: "longtext" });
  await addField(t, cot.id, { name: "n", type: "integer" });
  for (const r of rows) await create(t, cot.slug, r);
});
afterAll(() => t.close());

/** One page of a list: its count and ids in the order answered. */
async function page(query: string): Promise<{ count: number; ids: number[] }> {
  const r = await t.json("GET", `${CO}/${cot.slug}/?${query}`);
  expect(r.status).toBe(200);
  return { count: r.body.count, ids: (r.body.results as Array<{ id: number }>).map((x) => x.id) };
}

/** Every needle, through q and each narrowed lookup (and negations), against a scan of the table. */
async function expectScanAnswers() {
  for (const needle of NEEDLES) {
    const p = `%${esc(needle.trim())}%`; // the list trims q
    const matched = await scan(`${like("title")} OR ${like("notes")} OR ${like("n")}`, [p, p, p]);
    expect({ needle, ids: await ids(`q=${encodeURIComponent(needle)}`) }).toEqual({
      needle,
      ids: matched,
    });
    // Count and pages (decision 0081: from the index), both id orders, against the scan.
    const qs = `q=${encodeURIComponent(needle)}&limit=4`;
    const desc = [...matched].reverse();
    for (const [query, want] of [
      [qs, { count: matched.length, ids: matched.slice(0, 4) }],
      [`${qs}&offset=3`, { count: matched.length, ids: matched.slice(3, 7) }],
      [`${qs}&ordering=-id&offset=2`, { count: matched.length, ids: desc.slice(2, 6) }],
    ] as const)
      expect({ needle, query, ...(await page(query)) }).toEqual({ needle, query, ...want });
  }
  for (const needle of NEEDLES) {
    const e = esc(needle);
    for (const [lookup, p] of [
      ["ic", `%${e}%`],
      ["isw", `${e}%`],
      ["iew", `%${e}`],
    ] as const) {
      for (const col of ["title", "notes"]) {
        expect({
          needle,
          lookup,
          col,
          ids: await ids(`${col}__${lookup}=${encodeURIComponent(needle)}`),
        }).toEqual({ needle, lookup, col, ids: await scan(like(col), [p]) });
        expect({
          needle,
          lookup,
          col,
          ids: await ids(`${col}__n${lookup}=${encodeURIComponent(needle)}`),
        }).toEqual({
          needle,
          lookup,
          col,
          ids: await scan(`${col} IS NULL OR NOT (${like(col)})`, [p]),
        });
      }
    }
  }
  // Several values: any of them.
  expect(await ids("title__ic=alpha&title__ic=zur")).toEqual(
    await scan(`${like("title")} OR ${like("title")}`, ["%alpha%", "%zur%"]),
  );
}

/** Waits for the flusher the writes scheduled to leave nothing pending. */
async function drained(): Promise<boolean> {
  return waitFor(async () => (await pendingCount()) === 0, { message: "nothing pending" });
}

describe("full-text index", () => {
  test("exists after the fields are added; the rows written are indexed shortly after, by themselves", async () => {
    const def = await t.deps.db.client.execute({
      sql: "SELECT sql FROM sqlite_master WHERE name = ?",
      args: ["co_search"],
    });
    expect(String(def.rows[0]!.sql)).toContain("contentless_delete=1");
    expect(await drained()).toBe(true);
    expect(await entryCount()).toBe(rows.length);
    // one more through the API: pending at once, indexed by the scheduled flush
    const obj = await create(t, cot.slug, { title: "flushme", notes: null, n: 0 });
    expect(await drained()).toBe(true);
    expect(await ids("title__ic=flushm")).toEqual([obj.id]);
    expect((await t.json("DELETE", `${CO}/${cot.slug}/${obj.id}/`)).status).toBe(204);
    expect(await drained()).toBe(true);
    expect(await entryCount()).toBe(rows.length);
  });

  test("q and the text lookups answer exactly the rows a scan returns, with every row pending", async () => {
    await markAllPending();
    expect(await pendingCount()).toBe(rows.length);
    await expectScanAnswers();
  });

  test("and after the flush, with nothing pending", async () => {
    await flush();
    expect(await pendingCount()).toBe(0);
    await expectScanAnswers();
  });

  test("and after updates and deletes by plain SQL (pending until flushed, then indexed)", async () => {
    const c = t.deps.db.client;
    await c.execute(`UPDATE "co_${cot.id}" SET title = 'Gone alpha ' || id WHERE id % 3 = 0`);
    await c.execute(`UPDATE "co_${cot.id}" SET notes = NULL WHERE id % 4 = 1`);
    await c.execute(`DELETE FROM "co_${cot.id}" WHERE id % 11 = 2`);
    // an id moved by SQL: its old entry must not answer for it, its new id must
    await c.execute(`UPDATE "co_${cot.id}" SET id = id + 100000 WHERE id = 6`);
    await c.execute(
      `INSERT INTO "co_${cot.id}" (created, last_updated, title, notes, n) VALUES ('2024-01-01', '2024-01-01', 'plain sql École', 'x_y/ab', 5)`,
    );
    expect(await pendingCount()).toBeGreaterThan(0);
    await expectScanAnswers();
    await flush();
    expect(await pendingCount()).toBe(0);
    await expectScanAnswers();
  });

  test("lists go through the index: emptied, it finds nothing for needles of 3+ characters", async () => {
    const before = await ids("q=alpha");
    expect(before.length).toBeGreaterThan(0);
    await flush();
    // the type's own entries, by its rowid range (the other types' stay)
    await t.deps.db.client.execute(`DELETE FROM co_search WHERE rowid ${range()}`);
    expect(await entryCount()).toBe(0);
    try {
      expect(await ids("q=alpha")).toEqual([]);
      expect(await ids("title__ic=alpha")).toEqual([]);
      expect((await ids("q=al")).length).toBeGreaterThan(0); // two characters: a scan
      // a pending row is a candidate even when the index lacks it
      await t.deps.db.client.execute(
        `INSERT INTO co_search_pending(type_id, id) VALUES (${cot.id}, ${before[0]})`,
      );
      expect(await ids("q=alpha")).toEqual([before[0]!]);
    } finally {
      await markAllPending();
      await flush();
    }
    expect(await ids("q=alpha")).toEqual(before);
  });

  test("a q alone in id order is counted and paged from the index, not from the rows it matches", async () => {
    // A row changed behind the index's back (its trigger dropped for the update, then restored
    // verbatim): the index still holds its old text. Counted from the index, the row still
    // counts by that text; a scan of the matches (the path before decision 0081) would not.
    const obj = await create(t, cot.slug, { title: "wombatish", notes: null, n: 2 });
    await flush();
    const au = `co_${cot.id}_fts_au`;
    const db = t.deps.db.client;
    const trigger = (
      await db.execute({ sql: "SELECT sql FROM sqlite_master WHERE name = ?", args: [au] })
    ).rows[0]!.sql as string;
    await db.execute(`DROP TRIGGER "${au}"`);
    try {
      await db.execute({
        sql: `UPDATE "co_${cot.id}" SET title = 'changed' WHERE id = ?`,
        args: [obj.id],
      });
    } finally {
      await db.execute(trigger);
    }
    try {
      const answered = await page("q=wombat");
      expect(answered.count).toBe(1);
      expect(answered.ids).toEqual([obj.id]);
      // With another filter the rows are read: the changed row no longer matches.
      expect((await page("q=wombat&n=2")).count).toBe(0);
    } finally {
      await db.execute({ sql: `DELETE FROM "co_${cot.id}" WHERE id = ?`, args: [obj.id] });
      await flush();
    }
  });

  test("kept in the row's transaction: updates and deletes are seen at once", async () => {
    const obj = await create(t, cot.slug, { title: "quokkaish", notes: null, n: 1 });
    expect(await ids("q=quokka")).toEqual([obj.id]);
    expect(
      (await t.json("PATCH", `${CO}/${cot.slug}/${obj.id}/`, { body: { title: "wombatish" } }))
        .status,
    ).toBe(200);
    expect(await ids("q=quokka")).toEqual([]);
    expect(await ids("q=wombat")).toEqual([obj.id]);
    expect((await t.json("DELETE", `${CO}/${cot.slug}/${obj.id}/`)).status).toBe(204);
    expect(await ids("q=wombat")).toEqual([]);
  });

  test("follows field changes: rename, a new field, removal", async () => {
    const fields = (
      await t.json(
        "GET",
        `${CO}/custom-object-type-fields/?custom_object_type_id=${cot.id}&limit=100`,
      )
    ).body.results as Array<{ id: number; name: string }>;
    const notes = fields.find((f) => f.name === "notes")!;
    expect(
      (
        await t.json("PATCH", `${CO}/custom-object-type-fields/${notes.id}/`, {
          body: { name: "remarks" },
        })
      ).status,
    ).toBe(200);
    expect(await ids("remarks__ic=alpha")).toEqual(await scan(like("remarks"), ["%alpha%"]));
    expect(await ids("q=ürich")).toEqual(
      await scan(`${like("title")} OR ${like("remarks")} OR ${like("n")}`, [
        "%ürich%",
        "%ürich%",
        "%ürich%",
      ]),
    );
    const extra = await addField(t, cot.id, { name: "extra", type: "text" });
    const obj = await create(t, cot.slug, { title: null, remarks: null, extra: "platypus" });
    expect(await ids("q=platyp")).toEqual([obj.id]);
    expect((await t.json("DELETE", `${CO}/custom-object-type-fields/${extra.id}/`)).status).toBe(
      204,
    );
    expect(await ids("q=platyp")).toEqual([]);
    const sqlRow = await t.deps.db.client.execute({
      sql: "SELECT sql FROM sqlite_master WHERE name = ?",
      args: [`co_${cot.id}_fts_au`],
    });
    expect(String(sqlRow.rows[0]!.sql)).toContain('"remarks"');
    expect(String(sqlRow.rows[0]!.sql)).not.toContain('"extra"');
  });

  test("permission constraints still apply to indexed searches", async () => {
    const r = await t.json("POST", "/api/users/permissions/", {
      body: {
        name: "only-small-n",
        actions: ["view"],
        object_types: [`custom_objects.${cot.slug}`],
        constraints: { n__lt: 300 },
      },
    });
    if (r.status !== 201) throw new Error(JSON.stringify(r.body));
    const token = await t.user("searcher");
    const u = (await t.json("GET", "/api/users/users/?username=searcher")).body.results[0];
    expect(
      (await t.json("PATCH", `/api/users/permissions/${r.body.id}/`, { body: { users: [u.id] } }))
        .status,
    ).toBe(200);
    expect(await ids("q=alpha", token)).toEqual(
      await scan(`(${like("title")} OR ${like("remarks")} OR ${like("n")}) AND n < 300`, [
        "%alpha%",
        "%alpha%",
        "%alpha%",
      ]),
    );
  });

  test("a burst of writes is indexed once it pauses, and steady writes by the longest wait", async () => {
    const services = servicesOf(t.app);
    const markPending = () =>
      t.deps.db.client.execute(
        `INSERT OR IGNORE INTO co_search_pending(type_id, id) SELECT ${cot.id}, min(id) FROM "co_${cot.id}"`,
      );
    // delay 80 ms, longest wait 400 ms, on a clock this test moves
    const clock = manualTimers();
    const flusher = new SearchFlusher(services, 80, 400, clock);
    await flush();
    await markPending();
    // writes every 30 ms for 240 ms: each pushes the flush back, so nothing is indexed meanwhile
    for (let i = 0; i < 8; i++) {
      flusher.schedule(cot.id);
      clock.advance(30);
      expect(clock.fired).toBe(0);
    }
    expect(await pendingCount()).toBe(1);
    clock.advance(49);
    expect(clock.fired).toBe(0);
    clock.advance(1); // 80 ms after the last write
    expect(clock.fired).toBe(1);
    expect(await drained()).toBe(true);
    await flusher.flushNow(); // settles: the run that drained it has ended
    // steady writes that never pause still get indexed by the longest wait
    await markPending();
    for (let elapsed = 0; elapsed < 400; elapsed += 25) {
      expect(clock.fired).toBe(1);
      flusher.schedule(cot.id);
      clock.advance(25);
    }
    expect(clock.fired).toBe(2); // at 400 ms, though the writes never paused for 80
    expect(await drained()).toBe(true);
  });

  test("a write scheduled while flushNow runs is flushed by a timer afterwards, not left waiting", async () => {
    const services = servicesOf(t.app);
    const clock = manualTimers();
    const flusher = new SearchFlusher(services, 80, 400, clock);
    await flush();
    await t.deps.db.client.execute(
      `INSERT OR IGNORE INTO co_search_pending(type_id, id) SELECT ${cot.id}, min(id) FROM "co_${cot.id}"`,
    );
    const running = flusher.flushNow(); // flushes the types dirty when it started: none
    // a write of this type committed just now: its schedule finds the flush running
    flusher.schedule(cot.id);
    await running;
    expect(await pendingCount()).toBe(1);
    expect(clock.fired).toBe(0);
    clock.advance(80);
    expect(clock.fired).toBe(1);
    await flusher.flushNow(); // settles the run the timer started
    expect(await drained()).toBe(true);
  });

  test("a flush armed when its database closed stops there: no retry is armed (0127)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "host-flush-closed-"));
    const db = await openDatabase(`file:${join(dir, "closed.db")}`);
    await db.close();
    const lines: string[] = [];
    const clock = manualTimers();
    const flusher = new SearchFlusher(
      { db, logger: createLogger("debug", (l) => lines.push(l)) },
      80,
      400,
      clock,
    );
    try {
      flusher.schedule(cot.id); // a write's flush, committed as the database closed
      clock.advance(80);
      expect(clock.fired).toBe(1);
      await flusher.flushNow(); // settles the run the timer started
      expect(lines.join("\n")).toContain("search index flush stopped: the database is closed");
      expect(lines.join("\n")).not.toContain("retrying");
      clock.advance(60_000);
      expect(clock.fired).toBe(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("full-text index over multiselect items", () => {
  // A multiselect is matched item by item: the index holds the items apart (not the list's JSON
  // text, where a newline is written `\n` and a needle starting at its `n` would match).
  const ITEMS = ["line\nbreak", 'say "hi"', "back\\slash", "Fast", "tab\there"];
  let m: { id: number; slug: string };
  beforeAll(async () => {
    await choiceSet(t, "search-items", ITEMS);
    m = await makeCot(t, "itemized", "itemized");
    await addField(t, m.id, { name: "title", type: "text" });
    await addField(t, m.id, { name: "labels", type: "multiselect", choice_set: "search-items" });
    for (let i = 0; i < 12; i++)
      await create(t, m.slug, {
        title: `row ${i}`,
        labels: ITEMS.filter((_, k) => (i >> k) & 1 || k === i % ITEMS.length),
      });
  });

  test("q answers exactly the rows a scan returns, pending and indexed", async () => {
    const expectExact = async () => {
      for (const needle of [
        "nbr",
        "nbreak",
        "ast",
        "FAST",
        "say",
        'hi"',
        "slash",
        "there",
        "ttab",
        "row",
      ]) {
        const p = `%${esc(needle)}%`;
        const rs = await t.deps.db.client.execute({
          sql: `SELECT id FROM co_${m.id} WHERE ${like("title")} OR EXISTS (SELECT 1 FROM json_each(labels) je WHERE ${like("je.value")}) ORDER BY id`,
          args: [p, p],
        });
        const want = rs.rows.map((r) => Number(r.id));
        const r = await t.json("GET", `${CO}/${m.slug}/?q=${encodeURIComponent(needle)}&limit=3`);
        expect({
          needle,
          count: r.body.count,
          ids: r.body.results.map((x: { id: number }) => x.id),
        }).toEqual({
          needle,
          count: want.length,
          ids: want.slice(0, 3),
        });
      }
    };
    await expectExact();
    await flush();
    await expectExact();
  });
});
