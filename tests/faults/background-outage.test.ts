/**
 * Background loops while the remote database link is down (decision 0204): through the fault
 * proxy in front of the Hrana stand-in, on a clock the test moves, a loop backs off (a handful of
 * tries over ten simulated minutes, not one a second), logs the outage at most once a minute,
 * keeps one timer and one run at a time, and resumes by itself when the link is back.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { SearchFlusher } from "../../src/plugins/custom-objects/search/flush";
import { createLogger } from "../../src/services/logger";
import { createUpstashRedis } from "../../src/services/redis";
import { TaskQueue } from "../../src/services/tasks/queue";
import { startPeriodic, startWorker } from "../../src/services/tasks/worker";
import { startHranaServer, type HranaServer } from "../../tools/hrana-server";
import { makeTestApp, type TestApp } from "../helpers/app";
import { startRedisStack, type RedisStack } from "../helpers/redis-bridge";
import { startFaultProxy, type FaultProxy } from "../helpers/fault-proxy";
import { manualTimers, waitFor } from "../helpers/wait";

const MINUTE = 60_000;
const OUTAGE_MINUTES = 10;

let dir: string;
let hrana: HranaServer;
let proxy: FaultProxy;
let t: TestApp;
let stack: RedisStack;

beforeAll(async () => {
  stack = await startRedisStack();
  dir = mkdtempSync(join(tmpdir(), "host-background-outage-"));
  hrana = await startHranaServer({ path: join(dir, "remote.db") });
  proxy = await startFaultProxy(hrana.url);
  t = await makeTestApp({ DATABASE_URL: proxy.url, DATABASE_TIMEOUT_MS: "1500" });
});
afterAll(async () => {
  proxy.clear();
  await t.close();
  await proxy.stop();
  await hrana.stop();
  await stack.stop();
  rmSync(dir, { recursive: true, force: true });
});

function capture() {
  const lines: Array<{ level: string; msg: string }> = [];
  const logger = createLogger("debug", (l) => lines.push(JSON.parse(l)));
  return { lines, logger };
}

/** A clock that never moves: every failure falls in the same minute, however slow the machine. */
const stoppedClock = () => 0;

describe("the task worker's loops while the database is down", () => {
  test("a periodic task (retention) logs the outage once, not per run, and its recovery", async () => {
    const { lines, logger } = capture();
    let runs = 0;
    const periodic = startPeriodic(
      [
        {
          name: "retention",
          everyMs: 5,
          run: async () => {
            runs++;
            await t.deps.db.orm.run(sql`DELETE FROM jobs WHERE id = -1`);
          },
        },
      ],
      logger,
      stoppedClock,
    );
    try {
      proxy.inject({ kind: "status", status: 503 });
      const from = runs;
      await waitFor(() => runs - from >= 20);
      expect(lines.filter((l) => l.level === "warn").length).toBe(1);
      proxy.clear();
      await waitFor(() => lines.some((l) => /working again/.test(l.msg)));
    } finally {
      proxy.clear();
      await periodic.stop(5_000);
    }
    expect(lines.filter((l) => l.level === "warn").length).toBe(1);
  });

  test("the outbox relay says the database outage once, not per try, and resumes", async () => {
    const { lines, logger } = capture();
    const redis = createUpstashRedis({ url: stack.bridge.url, token: stack.bridge.token });
    const queue = new TaskQueue(t.deps.db, redis, logger, { prefix: "relay-outage" });
    proxy.inject({ kind: "status", status: 503, match: (_p, body) => /outbox/.test(body) });
    const worker = startWorker(queue, {
      logger,
      relayEveryMs: 5,
      idleMs: 5,
      maintainEveryMs: 50,
      now: stoppedClock,
    });
    try {
      await waitFor(() => proxy.hits >= 8);
      // said once (not per try, not silent), and the tries are paced, not a tight loop
      expect(lines.filter((l) => l.level === "warn" && /outbox relay/.test(l.msg)).length).toBe(1);
      proxy.clear();
      await waitFor(() => lines.some((l) => /outbox relay: working again/.test(l.msg)));
    } finally {
      proxy.clear();
      await worker.stop(5_000);
    }
    const said = lines.filter((l) => l.level === "warn" && /outbox relay/.test(l.msg));
    expect(said.length).toBe(1);
  });
});

describe("the token-use writer while its writes fail", () => {
  test("says so once for many tokens, not once per token", async () => {
    const { lines, logger } = capture();
    // a database of its own: the app's logger is this test's
    const own = await startHranaServer({ path: join(dir, "tokens.db") });
    const link = await startFaultProxy(own.url);
    const app = await makeTestApp(
      { DATABASE_URL: link.url, DATABASE_TIMEOUT_MS: "1500" },
      { logger },
    );
    try {
      const TOKENS = 8;
      const keys = [];
      for (let i = 0; i < TOKENS; i++) keys.push(await app.user(`token-use-${i}`));
      link.inject({ kind: "status", status: 503, match: (_p, body) => /last_used/.test(body) });
      for (const token of keys)
        expect((await app.req("GET", "/api/status/", { token })).status).toBe(200);
      await waitFor(() => link.hits >= TOKENS);
      await waitFor(() => lines.some((l) => /token use/.test(l.msg)));
      // a wall-clock minute could begin once during these few seconds: at most two lines, not eight
      expect(lines.filter((l) => /token use/.test(l.msg)).length).toBeLessThanOrEqual(2);
    } finally {
      link.clear();
      await app.close();
      await link.stop();
      await own.stop();
    }
  });
});

describe("the search-index flusher while the database is down", () => {
  test("backs off, logs once a minute, keeps one timer, resumes by itself", async () => {
    const { lines, logger } = capture();
    const clock = manualTimers();
    const flusher = new SearchFlusher({ db: t.deps.db, logger }, 80, 400, clock);
    proxy.inject({ kind: "status", status: 503 });
    flusher.schedule();
    while (clock.now() < OUTAGE_MINUTES * MINUTE) {
      const fired = clock.fired;
      clock.advance(1_000);
      // a try ran: it fails on the link and arms its retry (a condition, not a sleep)
      if (clock.fired !== fired) await waitFor(() => clock.pending === 1, { intervalMs: 2 });
      expect(clock.pending).toBe(1);
    }
    const warnings = lines.filter((l) => l.level === "warn");
    expect(warnings.length).toBeGreaterThan(0);
    expect(warnings.length).toBeLessThanOrEqual(OUTAGE_MINUTES + 1);
    // backed off: one try a second would be 600
    expect(clock.fired).toBeLessThan(60);

    proxy.clear();
    const fired = clock.fired;
    clock.advance(MINUTE); // the longest pause
    expect(clock.fired).toBe(fired + 1);
    await waitFor(() => lines.some((l) => l.level === "info" && /working again/.test(l.msg)));
    expect(clock.pending).toBe(0);
  });

  test("a hung link holds one run; more writes arm no second one", async () => {
    const { logger } = capture();
    const clock = manualTimers();
    const flusher = new SearchFlusher({ db: t.deps.db, logger }, 80, 400, clock);
    proxy.inject({ kind: "hang" });
    flusher.schedule();
    clock.advance(80);
    await waitFor(() => proxy.held === 1);
    for (let i = 0; i < 50; i++) {
      flusher.schedule(i + 1);
      clock.advance(1_000);
    }
    expect({ fired: clock.fired, pending: clock.pending, held: proxy.held }).toEqual({
      fired: 1,
      pending: 0,
      held: 1,
    });
    proxy.clear();
    await flusher.flushNow();
  });
});
