/**
 * Issue 30 benches (items 3 and 4), each on a fresh libSQL file with the app served in-process:
 *   columns — +`ADD` columns spread over 5 existing types, with `OTHERS` other types present and
 *     with none: the apply's time, and site creates sent every 20 ms during it (how many answer
 *     503, and their slowest answer).
 *   prune   — `PRUNE` change records past retention deleted by the retention prune while `/livez`
 *     is due every 10 ms: the prune's time and each probe's answer timed from when it was due.
 *   ddl     — the techniques for adding columns compared on plain files (`ddl-techniques.ts`);
 *     `ddl edit rebuild` runs only those (the `alter` row takes minutes beside 800 types).
 *   npx bun bench/faults.ts columns|prune|ddl     (OTHERS=800 ADD=500 PRUNE=700000)
 * Every loop is bounded; nothing listens on the network.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createApp } from "../src/app";
import { loadConfig } from "../src/config";
import { createUser, issueToken } from "../src/core/auth/provisioning";
import { openDatabase } from "../src/db/local";
import { runMigrations } from "../src/migrations";
import { createCache } from "../src/services/cache";
import { pruneExpired } from "../src/services/tasks/retention";
import { ddlTechniques } from "./ddl-techniques";

const OTHERS = Number(process.env.OTHERS ?? 800);
const ADD = Number(process.env.ADD ?? 500);
const PRUNE = Number(process.env.PRUNE ?? 700_000);
const KINDS = ["text", "integer", "decimal", "boolean", "date", "json", "longtext", "url"];

async function setup() {
  const dir = mkdtempSync(join(tmpdir(), "host-bench-faults-"));
  const config = loadConfig({ DATABASE_URL: `file:${join(dir, "bench.db")}`, LOG_LEVEL: "silent" });
  const db = await openDatabase(config.database.url);
  await runMigrations(db);
  const app = await createApp({ config, db, cache: createCache("memory") });
  await createUser(db.orm, { username: "bench", isSuperuser: true });
  const { key } = await issueToken(db.orm, { username: "bench" });
  const call = (method: string, path: string, body?: unknown) =>
    app.request(`http://bench${path}`, {
      method,
      headers: { authorization: `Token ${key}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const close = async () => {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  };
  return { db, call, close };
}

const types = (prefix: string, count: number, fields: number) =>
  Array.from({ length: count }, (_, t) => ({
    name: `${prefix}_${t}`,
    slug: `${prefix}_${t}`,
    fields: Array.from({ length: fields }, (_, f) => ({
      id: f + 1,
      name: f === 0 ? "name" : `field_${f}`,
      type: f === 0 ? "text" : KINDS[f % KINDS.length]!,
      primary: f === 0,
    })),
  }));

async function columns(others: number) {
  const { call, close } = await setup();
  const apply = async (list: unknown[]) => {
    const res = await call("POST", "/api/plugins/custom-objects/schema/apply/", {
      schema: { schema_version: "1", types: list },
      allow_destructive: false,
    });
    if (res.status !== 200)
      throw new Error(`apply ${res.status}: ${(await res.text()).slice(0, 300)}`);
  };
  const other = types("other", others, 3);
  // A document names the types it changes; the others stay as they are.
  // Each setup apply creates 100 types: its time should not grow with the types before it.
  const setupMs: number[] = [];
  for (let i = 0; i < other.length; i += 100) {
    const s0 = performance.now();
    await apply(other.slice(i, i + 100));
    setupMs.push(performance.now() - s0);
  }
  if (setupMs.length)
    console.log(`others=${others} setup applies (100 types each): ${setupMs.map((ms) => ms.toFixed(0)).join(", ")} ms`);
  await apply(types("wide", 5, 1));
  // Writers during the apply: one create every 20 ms, each timed.
  let writing = true;
  const answers: Array<{ status: number; ms: number }> = [];
  const writer = (async () => {
    for (let i = 0; writing && i < 10_000; i++) {
      const t0 = performance.now();
      const res = await call("POST", "/api/dcim/sites/", { name: `w${i}`, slug: `w-${i}` });
      await res.arrayBuffer();
      answers.push({ status: res.status, ms: performance.now() - t0 });
      await Bun.sleep(20);
    }
  })();
  await Bun.sleep(100);
  const t0 = performance.now();
  await apply(types("wide", 5, 1 + Math.ceil(ADD / 5)));
  const applyMs = performance.now() - t0;
  writing = false;
  await writer;
  const refused = answers.filter((a) => a.status === 503).length;
  const slowest = Math.max(...answers.map((a) => a.ms));
  console.log(
    `others=${others} +${ADD} columns on 5 types: apply ${applyMs.toFixed(0)} ms; ` +
      `${answers.length} creates meanwhile, ${refused} answered 503, slowest ${slowest.toFixed(0)} ms`,
  );
  await close();
  return applyMs;
}

/**
 * `/livez` on a fixed schedule (every 10 ms) until `work` settles, each probe timed from when it
 * was due (a stall counts in full): "N probes, p50, p99, max".
 */
async function probeWhile(
  call: (method: string, path: string) => Promise<Response> | Response,
  work: Promise<unknown>,
): Promise<string> {
  let probing = true;
  void work.finally(() => (probing = false));
  const probes: number[] = [];
  const started = performance.now();
  for (let i = 0; probing && i < 100_000; i++) {
    const due = started + i * 10;
    const wait = due - performance.now();
    if (wait > 0) await Bun.sleep(wait);
    await (await call("GET", "/livez")).arrayBuffer();
    probes.push(performance.now() - due);
  }
  probes.sort((a, b) => a - b);
  const p = (q: number) => probes[Math.min(probes.length - 1, Math.floor(q * probes.length))]!;
  return `${probes.length} probes, p50 ${p(0.5).toFixed(1)} ms, p99 ${p(0.99).toFixed(1)} ms, max ${p(1).toFixed(1)} ms`;
}

async function prune() {
  const { db, call, close } = await setup();
  const old = new Date(Date.now() - 400 * 86_400_000).toISOString();
  for (let done = 0; done < PRUNE; done += 50_000)
    await db.client.execute({
      sql: `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
            INSERT INTO object_changes (time, action, changed_object_type_id, changed_object_id, object_repr, postchange_data)
            SELECT ?, 'update', 1, i, 'site ' || i, json_object('name', 'site ' || i, 'description', hex(randomblob(40))) FROM n`,
      args: [Math.min(50_000, PRUNE - done), old],
    });
  // The same probes with nothing else running first: what the machine itself adds (a busy
  // machine delays a probe whatever the server does).
  const idle = await probeWhile(call, Bun.sleep(3_000));
  const t0 = performance.now();
  const pruning = pruneExpired(db, { changelogDays: 90, jobDays: 90 }, { budgetMs: 600_000 });
  const busy = await probeWhile(call, pruning);
  const result = await pruning;
  const pruneMs = performance.now() - t0;
  console.log(
    `pruned ${result.changes} change records in ${pruneMs.toFixed(0)} ms; /livez due every 10 ms: ` +
      `during the prune ${busy}; idle beforehand ${idle}`,
  );
  await close();
}

const which = process.argv[2];
if (which === "columns") {
  const none = await columns(0);
  const many = await columns(OTHERS);
  console.log(`ratio ${OTHERS} others / none: ${(many / none).toFixed(2)}×`);
} else if (which === "prune") await prune();
else if (which === "ddl") ddlTechniques(OTHERS, process.argv.slice(3));
else console.log("usage: bun bench/faults.ts columns|prune|ddl [technique…]");
