/**
 * The gate's lint flags a Drizzle query built and dropped (`tools/lint/unawaited-query.grit`,
 * decision 0201): a query is a thenable that runs only when awaited, so a dropped one is a write
 * that silently never happens. Each shape below is linted alone with the repository's plugin.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "..", "..");
const BIOME = join(ROOT, "node_modules", ".bin", "biome");
let dir: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "host-unawaited-"));
  const plugin = join(ROOT, "tools", "lint", "unawaited-query.grit");
  const config = { plugins: [plugin], linter: { enabled: true, rules: { preset: "none" } } };
  writeFileSync(join(dir, "biome.json"), JSON.stringify(config));
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Whether the plugin flags `body` (inside an async function with executors in scope). */
function flagged(body: string): boolean {
  const file = join(dir, "probe.ts");
  writeFileSync(
    file,
    `export async function f(db: any, tx: any, ctx: any, sql: any, t: any, m: Map<string, number>, als: any) {\n${body}\n}\n`,
  );
  const r = Bun.spawnSync([BIOME, "lint", "probe.ts"], {
    cwd: dir,
    stdout: "pipe",
    stderr: "pipe",
  });
  return (r.stdout.toString() + r.stderr.toString()).includes("never runs");
}

test.each([
  ["tx.run(sql`INSERT INTO t SELECT value FROM json_each(?)`);"],
  ["void tx.all(sql`INSERT INTO t VALUES (1) RETURNING id`);"],
  ["ctx.db.run(statements.jobs);"],
  ["db.insert(t).values({ a: 1 });"],
  ["tx.insert(t).values({ a: 1 }).returning({ id: t.id });"],
  ["tx.update(t).set({ a: 1 }).where(x);"],
  ["void db.delete(t).where(x);"],
  ["db.select().from(t).where(x);"],
])("flags a dropped query: %s", (body) => {
  expect(flagged(body)).toBe(true);
});

test.each([
  ["await tx.run(sql`INSERT INTO t VALUES (1)`);"],
  ["return tx.all(sql`SELECT 1`);"],
  ["batch.add(db.select().from(t));"],
  ["current ??= ctx.db.select().from(t).then((r) => r);"],
  ["items.forEach(async (i) => { await db.insert(t).values(i); });"],
  ["m.delete('a'); m.set('a', 1);"],
  ["als.run(true, () => 1);"],
])("leaves alone: %s", (body) => {
  expect(flagged(body)).toBe(false);
});
