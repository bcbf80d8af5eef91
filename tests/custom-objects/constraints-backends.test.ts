/**
 * Issue 32 item 1 on every database Host runs on (decision 0087): a type's partial unique key
 * (an index with a WHERE clause) and check (two triggers) are built and enforced the same on a
 * local libSQL file, a remote libSQL server over HTTP (the Hrana tool, as Turso is reached) and
 * Cloudflare D1 (miniflare), and a violation maps to the same 400.
 */
import { startMiniflare, type WatchedMiniflare } from "../helpers/workerd-watch";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Database } from "../../src/db/client";
import { d1Database, type D1Binding } from "../../src/db/d1";
import { openDatabase } from "../../src/db/local";
import { ValidationError } from "../../src/core/errors";
import { mapConstraintError } from "../../src/core/rest/constraints";
import { rebuildConditional } from "../../src/plugins/custom-objects/schema/constraints";
import { startHranaServer, type HranaServer } from "../../tools/hrana-server";

let dir: string;
let hrana: HranaServer;
let mf: WatchedMiniflare;
const dbs: Record<string, Database> = {};
const COT = 900;
const FIELDS = [
  { name: "name", type: "text", isPolymorphic: false },
  { name: "vid", type: "integer", isPolymorphic: false },
  { name: "status", type: "text", isPolymorphic: false },
];
const QUOTED = "it's live";

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "host-constraints-"));
  hrana = await startHranaServer({ path: join(dir, "remote.db"), port: 0 });
  dbs.local = await openDatabase(`file:${join(dir, "local.db")}`);
  dbs.remote = await openDatabase(hrana.url);
  mf = await startMiniflare("constraints-backends", {
    modules: true,
    script: "export default { fetch() { return new Response('') } }",
    d1Databases: ["DB"],
  });
  dbs.d1 = d1Database(mf.watched((await mf.mf.getD1Database("DB")) as unknown as D1Binding));
  for (const db of Object.values(dbs)) {
    await db.execute({
      sql: `CREATE TABLE co_${COT} (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT, vid INTEGER, status TEXT)`,
      args: [],
    });
    await rebuildConditional(
      db.orm,
      COT,
      FIELDS,
      {
        unique: [{ fields: ["vid"], condition: { status__in: ["active", "planned", QUOTED] } }],
        checks: [{ name: "vid_range", condition: { vid__gte: 1, vid__lte: 4094 } }],
      },
      false,
    );
  }
});
afterAll(async () => {
  for (const db of Object.values(dbs)) await db.close();
  await mf?.stop();
  await hrana?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const insert = (db: Database, vid: number, status: string) =>
  db.execute({
    sql: `INSERT INTO co_${COT} (name, vid, status) VALUES ('x', ?, ?)`,
    args: [vid, status],
  });

/** The 400 a write that raised `e` answers. */
async function refusal(write: Promise<unknown>): Promise<Record<string, string[]>> {
  const e = await write.then(
    () => null,
    (err: unknown) => err,
  );
  expect(e).not.toBeNull();
  const mapped = mapConstraintError(e, null);
  expect(mapped).toBeInstanceOf(ValidationError);
  return (mapped as ValidationError).fields as Record<string, string[]>;
}

for (const kind of ["local", "remote", "d1"]) {
  describe(kind, () => {
    test("the check refuses inserts and updates outside it, naming itself and its field", async () => {
      const db = dbs[kind]!;
      await insert(db, 10, "active");
      const out = await refusal(insert(db, 5000, "active"));
      expect(out.vid![0]).toContain('check "vid_range"');
      const update = await refusal(
        db.execute({ sql: `UPDATE co_${COT} SET vid = 0 WHERE vid = 10`, args: [] }),
      );
      expect(update.vid![0]).toContain("vid_range");
    });

    test("the partial key holds among the rows its condition admits only", async () => {
      const db = dbs[kind]!;
      await insert(db, 20, "active");
      await refusal(insert(db, 20, "planned"));
      await insert(db, 20, "retired");
      await insert(db, 20, "retired");
      await insert(db, 30, QUOTED);
      await refusal(insert(db, 30, QUOTED));
      const rows = await db.execute({
        sql: `SELECT count(*) AS n FROM co_${COT} WHERE vid = 20`,
        args: [],
      });
      expect(Number(rows.rows[0]!.n)).toBe(3);
    });
  });
}
