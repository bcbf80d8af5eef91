/**
 * The child of `app-exits.test.ts`: uses the app in-process as a bench or a CLI does, closes
 * it, and returns without `process.exit`: the process must then end by itself. Argument `app`:
 * rounds of `openDatabase`, `runMigrations`, `createApp`, requests, a schema apply and custom
 * object writes, `db.close()`, then a flush of each round's type asked for after its close;
 * `cli`: `schema apply` and `schema export` against a local file through `schemaCommand`;
 * `busy`: a write that waited for a long write's lock; `drain`: `npm start`'s drain of a server
 * that stops at once; `redis`: the throwaway local Redis started and stopped.
 * Prints `closed` once its work is done.
 */
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { createApp } from "../../src/app";
import { schemaCommand } from "../../src/cli/schema";
import { loadConfig } from "../../src/config";
import { createUser, issueToken } from "../../src/core/auth/provisioning";
import { openDatabase } from "../../src/db/local";
import { runMigrations } from "../../src/migrations";
import {
  flushSearchIndexesNow,
  searchFlusher,
} from "../../src/plugins/custom-objects/search/flush";
import { drainer } from "../../src/drain";
import { createCache } from "../../src/services/cache";
import { startLocalRedisStack } from "../../src/services/local-redis";
import { createLogger } from "../../src/services/logger";
import { waitFor } from "../helpers/wait";

const dir = process.env.CHILD_DIR!;
const CO = "/api/plugins/custom-objects";
/** Apps built and closed one after the other, as a bench's rounds. */
const ROUNDS = 6;
const document = {
  schema_version: "1",
  types: [
    {
      name: "circuit",
      slug: "circuit",
      fields: [
        { id: 1, name: "name", type: "text", primary: true },
        { id: 2, name: "notes", type: "longtext" },
      ],
    },
  ],
};

/**
 * One round as a bench runs it: an app over a file of its own, requests, a schema apply and
 * custom object writes, what is due indexed, the database closed.
 */
async function round(n: number) {
  const config = loadConfig({ DATABASE_URL: `file:${join(dir, `app-${n}.db`)}` });
  const lines: string[] = [];
  const logger = createLogger("debug", (line) => lines.push(line));
  const db = await openDatabase(config.database.url);
  await runMigrations(db);
  const app = await createApp({ config, db, cache: createCache("memory"), logger });
  await createUser(db.orm, { username: "child", isSuperuser: true });
  const { key } = await issueToken(db.orm, { username: "child" });
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await app.request(`http://child${path}`, {
      method,
      headers: { authorization: `Token ${key}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
    return res.json();
  };
  await call("POST", "/api/dcim/sites/", { name: "site 1", slug: "site-1" });
  await call("POST", `${CO}/schema/apply/`, { schema: document, allow_destructive: false });
  for (let i = 0; i < 10; i++)
    await call("POST", `${CO}/circuit/`, { name: `circuit ${i}`, notes: `row ${i} of the child` });
  await call("GET", `${CO}/circuit/?q=child`);
  const types = await call("GET", `${CO}/custom-object-types/?slug=circuit`);
  await flushSearchIndexesNow(app.services);
  await db.close();
  return { services: app.services, cotId: types.results[0].id as number, lines };
}

/**
 * Rounds of a bench, each app closed; then each round's flusher is asked to index its type (a
 * write's flush, committed as its database closed), one after the other's attempt: the process
 * goes on until each has met its closed database, after which nothing may hold it. (Before 0127
 * each flusher retried every second, holding the process during its wait: rounds whose attempts
 * fell apart kept it alive for good.)
 */
async function inProcessApp() {
  const rounds = [];
  for (let n = 0; n < ROUNDS; n++) rounds.push(await round(n));
  for (const { services, cotId, lines } of rounds) {
    searchFlusher(services).schedule(cotId);
    await waitFor(() => lines.some((l) => l.includes("search index flush")), {
      timeoutMs: 30_000,
      intervalMs: 5,
      message: "the search flush to meet the closed database",
    });
  }
}

async function cliRun() {
  const file = join(dir, "schema.json");
  await Bun.write(file, JSON.stringify(document));
  const io = {
    out: async () => undefined,
    err: async (text: string) => void process.stderr.write(text),
    env: { DATABASE_URL: `file:${join(dir, "cli.db")}`, LOG_LEVEL: "error" },
    isTTY: false,
    stdin: async () => "",
  };
  for (const argv of [["apply", file], ["export"]]) {
    const code = await schemaCommand(argv, io);
    if (code !== 0) throw new Error(`schema ${argv[0]} exited ${code}`);
  }
}

/**
 * A write on the main connection that met the lock of a long write (the background connection,
 * a schema apply's) waits for its release, at most the busy timeout (ten minutes here): once the
 * lock is back, that bound must not hold the process.
 */
async function busyWrite() {
  const db = await openDatabase(`file:${join(dir, "busy.db")}`, undefined, {
    busyTimeoutMs: 600_000,
  });
  await db.client.execute("CREATE TABLE t (x INTEGER)");
  let entered!: () => void;
  const inside = new Promise<void>((r) => (entered = r));
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const long = db.longWrite(() =>
    db.transaction(async (tx) => {
      await tx.run(sql`INSERT INTO t VALUES (1)`);
      entered();
      await held;
    }),
  );
  await inside;
  const waiting = db.client.execute("INSERT INTO t VALUES (2)");
  // turns of the event loop (no time passes): the write tries, meets the lock and waits
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
  release();
  await Promise.all([long, waiting]);
  await db.close();
}

/** Bounds far longer than the test waits: a timer of theirs left running would hold the child. */
const LONG_BOUND_MS = 600_000;

/** `npm start`'s drain of a server that stops at once, under a long drain bound. */
async function drainRun() {
  const drain = drainer(() => new Response("ok"), { timeoutMs: LONG_BOUND_MS, quietMs: 0 });
  if (!(await drain.drain({ stop: () => undefined }))) throw new Error("the drain timed out");
}

/** The throwaway local Redis started and stopped, under a long stop bound. */
async function redisRun() {
  const stack = await startLocalRedisStack({ stopTimeoutMs: LONG_BOUND_MS });
  if (!stack) throw new Error("no redis-server on PATH");
  await stack.stop();
}

const MODES: Record<string, () => Promise<void>> = {
  app: inProcessApp,
  cli: cliRun,
  busy: busyWrite,
  drain: drainRun,
  redis: redisRun,
};
await MODES[process.argv[2] ?? "app"]!();
console.log("closed");
