/**
 * Retention (docs/decisions/0038-tasks-retention.md): `CHANGELOG_RETENTION_DAYS` and
 * `JOB_RETENTION_DAYS` prune real rows with old timestamps; 0 keeps everything; finished jobs
 * only; outbox rows go once their job has finished; the task worker process prunes on start.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { eq, inArray } from "drizzle-orm";
import { ConfigError, loadConfig } from "../../src/config";
import { jobs, objectChanges, outbox } from "../../src/db/schema";
import { createLogger } from "../../src/services/logger";
import { pruneExpired, retentionTask } from "../../src/services/tasks/retention";
import { startPeriodic } from "../../src/services/tasks/worker";
import { makeTestApp, type TestApp } from "../helpers/app";
import { makeTasksEnv, waitFor } from "./harness";

const DAY = 86_400_000;
const ago = (days: number) => new Date(Date.now() - days * DAY).toISOString();

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(() => t.close());
beforeEach(async () => {
  await t.deps.db.orm.delete(objectChanges);
  await t.deps.db.orm.delete(jobs);
  await t.deps.db.orm.delete(outbox);
});

async function change(daysAgo: number, repr = `change ${daysAgo}d`) {
  const [row] = await t.deps.db.orm
    .insert(objectChanges)
    .values({
      time: ago(daysAgo),
      action: "create",
      changedObjectTypeId: 1,
      changedObjectId: 1,
      objectRepr: repr,
    })
    .returning({ id: objectChanges.id });
  return row!.id;
}

async function job(
  status: string,
  daysAgo: number,
  withOutbox: "relayed" | "waiting" | null = null,
) {
  const finished = ["completed", "errored", "failed"].includes(status);
  const [row] = await t.deps.db.orm
    .insert(jobs)
    .values({
      name: `old.${status}`,
      status,
      created: ago(daysAgo + 1),
      started: status === "pending" ? null : ago(daysAgo),
      completed: finished ? ago(daysAgo) : null,
    })
    .returning({ id: jobs.id });
  if (withOutbox) {
    await t.deps.db.orm.insert(outbox).values({
      jobId: row!.id,
      name: `old.${status}`,
      payload: {},
      maxAttempts: 5,
      key: crypto.randomUUID(),
      relayed: withOutbox === "relayed" ? ago(daysAgo) : null,
    });
  }
  return row!.id;
}

const changeReprs = async () =>
  (await t.deps.db.orm.select({ r: objectChanges.objectRepr }).from(objectChanges))
    .map((x) => x.r)
    .sort();
const jobNames = async () =>
  (await t.deps.db.orm.select({ n: jobs.name, s: jobs.status }).from(jobs)).map((x) => x.n).sort();

describe("settings", () => {
  test("defaults: change records 90 days, jobs 90 days; 0 is allowed (keep everything)", () => {
    expect(loadConfig({}, "bun").retention).toEqual({ changelogDays: 90, jobDays: 90 });
    expect(
      loadConfig({ CHANGELOG_RETENTION_DAYS: "0", JOB_RETENTION_DAYS: "7" }, "bun").retention,
    ).toEqual({ changelogDays: 0, jobDays: 7 });
  });

  for (const [key, value] of [
    ["CHANGELOG_RETENTION_DAYS", "-1"],
    ["JOB_RETENTION_DAYS", "ten"],
    ["JOB_RETENTION_DAYS", "40000"],
  ] as const) {
    test(`${key}=${value} is refused with one line naming the setting`, () => {
      expect(() => loadConfig({ [key]: value }, "bun")).toThrow(ConfigError);
      expect(() => loadConfig({ [key]: value }, "bun")).toThrow(
        new RegExp(`^invalid setting ${key}: `),
      );
    });
  }
});

describe("pruneExpired", () => {
  test("change records older than CHANGELOG_RETENTION_DAYS go; younger ones stay", async () => {
    await change(400);
    await change(91);
    await change(89);
    await change(0);
    expect(await pruneExpired(t.deps.db, { changelogDays: 90, jobDays: 0 })).toMatchObject({
      changes: 2,
      jobs: 0,
    });
    expect(await changeReprs()).toEqual(["change 0d", "change 89d"]);
  });

  test("finished jobs older than JOB_RETENTION_DAYS go; pending and running ones stay however old", async () => {
    await job("completed", 40);
    await job("errored", 40);
    await job("failed", 40);
    await job("completed", 5);
    await job("pending", 400);
    await job("running", 400);
    const pruned = await pruneExpired(t.deps.db, { changelogDays: 0, jobDays: 30 });
    expect(pruned).toMatchObject({ changes: 0, jobs: 3 });
    expect(await jobNames()).toEqual(["old.completed", "old.pending", "old.running"]);
    const [recent] = await t.deps.db.orm.select().from(jobs).where(eq(jobs.name, "old.completed"));
    expect(recent!.completed! > ago(6)).toBe(true);
  });

  test("0 keeps everything", async () => {
    await change(4000);
    await job("completed", 4000);
    expect(await pruneExpired(t.deps.db, { changelogDays: 0, jobDays: 0 })).toMatchObject({
      changes: 0,
      jobs: 0,
    });
    expect(await changeReprs()).toEqual(["change 4000d"]);
    expect(await jobNames()).toEqual(["old.completed"]);
  });

  test("outbox rows go once their job has finished (or is gone); a live job keeps its row", async () => {
    const done = await job("completed", 1, "relayed");
    const live = await job("pending", 1, "relayed");
    const waiting = await job("pending", 0, "waiting");
    const running = await job("running", 0, "relayed");
    await t.deps.db.orm.insert(outbox).values({
      jobId: 999_999,
      name: "orphan",
      payload: {},
      maxAttempts: 5,
      key: "k",
      relayed: ago(1),
    });
    const pruned = await pruneExpired(t.deps.db, { changelogDays: 0, jobDays: 0 });
    expect(pruned.outbox).toBe(2);
    const left = (await t.deps.db.orm.select({ jobId: outbox.jobId }).from(outbox))
      .map((r) => r.jobId)
      .sort((a, b) => a - b);
    expect(left).toEqual([live, waiting, running].sort((a, b) => a - b));
    expect(
      await t.deps.db.orm
        .select()
        .from(jobs)
        .where(inArray(jobs.id, [done])),
    ).toHaveLength(1); // the job row keeps its outcome
  });

  test("more rows than one batch: all of them go in one run", async () => {
    const rows = Array.from({ length: 4_500 }, (_, i) => ({
      time: ago(100 + (i % 50)),
      action: "delete",
      changedObjectTypeId: 1,
      changedObjectId: i,
      objectRepr: "bulk",
    }));
    for (let i = 0; i < rows.length; i += 500)
      await t.deps.db.orm.insert(objectChanges).values(rows.slice(i, i + 500));
    await change(1);
    expect((await pruneExpired(t.deps.db, { changelogDays: 90, jobDays: 90 })).changes).toBe(4_500);
    expect(await changeReprs()).toEqual(["change 1d"]);
  });
});

describe("scheduled", () => {
  test("the periodic retention task runs at start and then on its interval", async () => {
    await change(100);
    const runner = startPeriodic(
      [retentionTask(t.deps.db, { changelogDays: 90, jobDays: 90 }, 100)],
      createLogger("silent"),
    );
    try {
      await waitFor("the first prune", async () => (await changeReprs()).length === 0);
      await change(120);
      await waitFor("the next prune", async () => (await changeReprs()).length === 0);
    } finally {
      await runner.stop(2_000);
    }
  });

  test("npm run worker prunes on start (CHANGELOG_RETENTION_DAYS, JOB_RETENTION_DAYS)", async () => {
    const env = await makeTasksEnv();
    const orm = env.t.deps.db.orm;
    await orm.insert(objectChanges).values([
      {
        time: ago(10),
        action: "create",
        changedObjectTypeId: 1,
        changedObjectId: 1,
        objectRepr: "ten days",
      },
      {
        time: ago(1),
        action: "create",
        changedObjectTypeId: 1,
        changedObjectId: 2,
        objectRepr: "one day",
      },
    ]);
    await orm.insert(jobs).values({ name: "old", status: "completed", completed: ago(10) });
    const child = Bun.spawn([process.execPath, "run", "src/task-worker.ts"], {
      cwd: join(import.meta.dir, "..", ".."),
      env: {
        PATH: process.env.PATH ?? "",
        HOME: process.env.HOME ?? "",
        DATABASE_URL: env.t.dbUrl,
        REDIS_TASKS_URL: env.stack.bridge.url,
        REDIS_TASKS_TOKEN: env.stack.bridge.token,
        CHANGELOG_RETENTION_DAYS: "5",
        JOB_RETENTION_DAYS: "5",
        LOG_LEVEL: "warn",
      },
      stdout: "ignore",
      stderr: "ignore",
    });
    try {
      await waitFor(
        "the worker's prune",
        async () => (await orm.select().from(jobs).where(eq(jobs.name, "old"))).length === 0,
        20_000,
      );
      expect(
        (await orm.select({ r: objectChanges.objectRepr }).from(objectChanges)).map((r) => r.r),
      ).toEqual(["one day"]);
    } finally {
      child.kill("SIGTERM");
      await child.exited;
      await env.close();
    }
  }, 40_000);
});
