/**
 * Issue 30 item 1: with a damaged append-only file in `data/redis/`, `npm start`'s local Redis
 * does not start. Every matching event is still written to the outbox in its write's
 * transaction, the tasks check fails naming the cause, and once Redis is repaired the next
 * start delivers every one of them. Real server processes, a real redis-server, a real receiver.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createClient } from "@libsql/client";
import { HEALTH } from "../healthcheck/helpers";
import { hookAndRule, LOOPBACK_ALLOWED, startReceiver, waitFor } from "../tasks/harness";
import type { TestApp } from "../helpers/app";
import {
  dataFolder,
  httpClient,
  startServerProcess,
  type ServerProcess,
} from "../helpers/server-process";

const cleanups: Array<() => unknown> = [];
afterAll(async () => {
  for (const fn of cleanups.reverse()) await fn();
});

test("events wait in the outbox while the tasks Redis is down, and are delivered once it is there", async () => {
  const folder = await dataFolder();
  cleanups.push(folder.remove);
  // Each database has its own local Redis: `data/redis/<database>/` (decision 0069).
  const redisDir = join(folder.dir, "data", "redis", "host", "appendonlydir");
  mkdirSync(redisDir, { recursive: true });
  writeFileSync(join(redisDir, "appendonly.aof.manifest"), "this is not a manifest\n");
  const receiver = startReceiver();
  cleanups.push(() => receiver.stop());
  const env = { DATABASE_URL: folder.dbUrl, LOG_LEVEL: "info", ...LOOPBACK_ALLOWED };

  let server: ServerProcess = await startServerProcess(env);
  cleanups.push(() => server.kill());
  const api = httpClient(server.url, folder.token);
  await hookAndRule(api as TestApp, { url: receiver.url, eventTypes: ["object_created"] });
  for (let i = 0; i < 5; i++) {
    const r = await api.json("POST", "/api/dcim/sites/", {
      body: { name: `No queue ${i}`, slug: `no-queue-${i}` },
    });
    expect(r.status).toBe(201);
  }
  // In the outbox, committed with the sites.
  const file = createClient({ url: folder.dbUrl });
  cleanups.push(() => file.close());
  const waiting = await file.execute("SELECT count(*) AS n FROM outbox WHERE relayed IS NULL");
  expect(Number(waiting.rows[0]!.n)).toBe(5);
  // The tasks check fails, naming why.
  const health = await api.json("GET", HEALTH, { headers: { accept: "application/json" } });
  expect(health.body.checks.HostRedisTasksHealthCheck).toContain("did not start");
  expect(server.logs.some((l) => String(l.msg).includes("no tasks Redis is configured"))).toBe(
    false,
  );

  server.proc.kill("SIGTERM");
  expect(await server.exited()).toBe(0);
  rmSync(join(folder.dir, "data", "redis"), { recursive: true, force: true }); // repaired
  server = await startServerProcess(env);
  cleanups.push(() => server.kill());
  await waitFor("five deliveries", () => receiver.received.length >= 5, 20_000);
  const names = receiver.received.map((d) => JSON.parse(d.body).data.name).sort();
  expect(names).toEqual([0, 1, 2, 3, 4].map((i) => `No queue ${i}`));
  server.proc.kill("SIGTERM");
  expect(await server.exited()).toBe(0);
}, 90_000);
