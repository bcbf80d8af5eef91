/**
 * Issue 30 benches (items 3 and 4), each on a fresh libSQL file with the app served in-process:
 *   columns — +`ADD` columns spread over 5 existing types, with `OTHERS` other types present and
 *     with none, `ROUNDS` times (5 types of their own each; the median counts): the apply's time
 *     and the process's CPU time, and site creates sent every 20 ms during it (how many answer
 *     503, and their slowest answer); and the time of each setup apply creating 100 types.
 *   prune   — `PRUNE` change records past retention deleted by the retention prune while `/livez`
 *     is due every 10 ms: the prune's time and each probe's answer timed from when it was due.
 *   ddl     — the techniques for adding columns compared on plain files (`ddl-techniques.ts`);
 *     `ddl edit rebuild` runs only those (the `alter` row takes minutes beside 800 types).
 *   npx bun bench/faults.ts columns|prune|ddl     (OTHERS=800 ADD=500 ROUNDS=3 PRUNE=700000)
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
const ROUNDS = Number(process.env.ROUNDS ?? 3);
/** WRITERS=0: no site creates during the applies (the apply alone). */
const WRITERS = process.env.WRITERS !== "0";
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
  // A document names the types it changes; the others stay as they are. Each setup apply
  // creates 100 types: its time should not grow with the types before it.
  const other = types("other", others, 3);
  const setupMs: number[] = [];
  for (let i = 0; i < other.length; i += 100) {
    const s0 = performance.now();
    await apply(other.slice(i, i + 100));
    setupMs.push(performance.now() - s0);
  }
  if (setupMs.length)
    console.log(
      `others=${others} setup applies (100 types each): ${setupMs.map((ms) => ms.toFixed(0)).join(", ")} ms`,
    );
  // ROUNDS applies, each +ADD columns on 5 types of its own: the median is the figure (one
  // apply on a shared 2-core machine moves by several times with the load).
  const rounds: Array<{ ms: number; cpu: number }> = [];
  for (let r = 0; r < ROUNDS; r++) {
    await apply(types(`wide${r}`, 5, 1));
    rounds.push(await widen(call, apply, others, `wide${r}`));
  }
  await close();
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  return { ms: median(rounds.map((r) => r.ms)), cpu: median(rounds.map((r) => r.cpu)) };
}

/** One +ADD column apply on 5 types of `prefix`, with a site create every 20 ms meanwhile. */
async function widen(
  call: (method: string, path: string, body?: unknown) => Promise<Response> | Response,
  apply: (list: unknown[]) => Promise<void>,
  others: number,
  prefix: string,
) {
  let writing = true;
  const answers: Array<{ status: number; ms: number }> = [];
  const writer = (async () => {
    for (let i = 0; writing && WRITERS && i < 10_000; i++) {
      const t0 = performance.now();
      const name = `${prefix}-w${i}`;
      const res = await call("POST", "/api/dcim/sites/", { name, slug: name });
      await res.arrayBuffer();
      answers.push({ status: res.status, ms: performance.now() - t0 });
      await Bun.sleep(20);
    }
  })();
  await Bun.sleep(100);
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  await apply(types(prefix, 5, 1 + Math.ceil(ADD / 5)));
  const ms = performance.now() - t0;
  const used = process.cpuUsage(cpu0);
  const cpu = (used.user + used.system) / 1000;
  writing = false;
  await writer;
  const refused = answers.filter((a) => a.status === 503).length;
  const slowest = Math.max(0, ...answers.map((a) => a.ms));
  console.log(
    `others=${others} +${ADD} columns on 5 types: apply ${ms.toFixed(0)} ms (process CPU ${cpu.toFixed(0)} ms); ` +
      `${answers.length} creates meanwhile, ${refused} answered 503, slowest ${slowest.toFixed(0)} ms`,
  );
  return { ms, cpu };
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
  console.log(
    `median of ${ROUNDS}: none ${none.ms.toFixed(0)} ms, ${OTHERS} others ${many.ms.toFixed(0)} ms: ` +
      `ratio ${(many.ms / none.ms).toFixed(2)}× (process CPU ${(many.cpu / none.cpu).toFixed(2)}×)`,
  );
} else if (which === "prune") await prune();
else if (which === "ddl") ddlTechniques(OTHERS, process.argv.slice(3));
else console.log("usage: bun bench/faults.ts columns|prune|ddl [technique…]");
