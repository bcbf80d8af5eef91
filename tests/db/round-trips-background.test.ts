/**
 * Background bulk writes (`?background=true`) counted on a remote database (issue 28 item 2,
 * decision 0172): for sites and a custom object type, bulk create / update / replace / delete of
 * 100, as a superuser and as a token whose view and change are constrained, with warm caches:
 * the enqueueing request ≤ 2 round trips, and the job's run (claim, the write, its result) ≤ 3.
 * Each job's record and each object written read the same through a local app on the same file.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { type Client, createClient } from "@libsql/client";
import { sql } from "drizzle-orm";
import { servicesOf } from "../../src/app";
import { flushSearchIndexesNow } from "../../src/plugins/custom-objects/search/flush";
import { BASE } from "../helpers/app";
import { userWith } from "../helpers/grants";
import { anotherInstance } from "../helpers/instances";
import { type RemoteDb, startRemoteDb } from "../helpers/remote-db";
import { settleBeforeCounting } from "../helpers/settle";
import { waitFor } from "../helpers/wait";
import { addField, CO, makeCot } from "../custom-objects/fixtures";
import { handedToRedis, makeTasksEnv, type TasksEnv } from "../tasks/harness";

/** The enqueueing request: one read, one atomic batch (the job and its outbox row). */
const ENQUEUE_BUDGET = 2;
/** The job's run: its claim, then the bulk write's read and its write with the job's result. */
const RUN_BUDGET = 3;
const N = 100;

let remote: RemoteDb;
let env: TasksEnv;
let local: Awaited<ReturnType<typeof anotherInstance>>;
/** The remote database's file, read directly (no round trip counted). */
let file: Client;
let writer: string;
let viewer: string;
/** Objects the constrained token may not view: a planned site, a widget of size 5. */
const hidden: Record<string, number> = {};
let tenant = 0;

type Who = "admin" | "writer";
type Body = Record<string, unknown>;
const tokenOf = (who: Who) => (who === "admin" ? env.t.admin : writer);

interface Kind {
  list: string;
  create: (n: number) => Body;
  patch: (n: number) => Body;
  put: (n: number) => Body;
}

const KINDS: Record<string, () => Kind> = {
  site: () => ({
    list: "/api/dcim/sites/",
    create: (n) => ({ name: `bg site ${n}`, slug: `bg-site-${n}`, status: "active", tenant }),
    patch: (n) => ({ description: `d${n}` }),
    put: (n) => ({ name: `bg site put ${n}`, slug: `bg-site-put-${n}`, status: "active" }),
  }),
  widget: () => ({
    list: `${CO}/widget/`,
    create: (n) => ({ title: `bg widget ${n}`, size: 1 }),
    patch: (n) => ({ size: 1 + (n % 2) }),
    put: (n) => ({ title: `bg widget put ${n}`, size: 2 }),
  }),
};

let serial = 0;
const next = () => ++serial;

beforeAll(async () => {
  remote = await startRemoteDb("round-trips-background");
  env = await makeTasksEnv({ DATABASE_URL: remote.url });
  const t = env.t;
  tenant = (await t.json("POST", "/api/tenancy/tenants/", { body: { name: "T", slug: "t" } })).body
    .id;
  const cot = await makeCot(t, "widget");
  await addField(t, cot.id, { name: "title", type: "text", primary: true });
  await addField(t, cot.id, { name: "size", type: "integer" });
  hidden.site = (
    await t.json("POST", "/api/dcim/sites/", {
      body: { name: "hidden", slug: "hidden", status: "planned" },
    })
  ).body.id;
  hidden.widget = (
    await t.json("POST", `${CO}/widget/`, { body: { title: "big", size: 5 } })
  ).body.id;
  const all = ["add", "change", "delete", "view"];
  writer = (
    await userWith(t, "bg-writer", [
      [all, "dcim.site", { status: "active" }],
      [all, "custom_objects.widget", { size__lte: 2 }],
      [["view"], "tenancy.tenant", { id__gte: 1 }],
      [["view"], "custom_objects.customobjecttype", { slug__in: ["widget"] }],
      [["view"], "core.objecttype", { id__gte: 1 }],
      [["view"], "core.job", null],
    ])
  ).token;
  viewer = (
    await userWith(t, "bg-viewer", [
      [["view"], "dcim.site", null],
      [["view"], "custom_objects.widget", null],
    ])
  ).token;
  local = await anotherInstance(`file:${remote.path}`);
  file = createClient({ url: `file:${remote.path}` });
});
afterAll(async () => {
  file?.close();
  await local?.close();
  await env?.close();
  await remote?.stop();
});

/** The deferred search-index flush done, and {who}'s token use recently recorded. */
const settle = (who: Who) =>
  settleBeforeCounting(
    env.t.app,
    () => env.t.req("GET", "/api/status/", { token: tokenOf(who) }),
    who === "admin" ? "admin" : "bg-writer",
  );

/** The relay's statement that marks outbox rows handed to Redis. */
const RELAY_MARK = /^update "outbox" set "relayed"/;

/**
 * Runs queued jobs (the worker's `runOne`) until none is ready; answers the round trips of the
 * one that ran. A stale copy (a hand-over that landed past its bound and was relayed again) is
 * dropped by its claim, and not counted.
 */
async function runJobs(): Promise<number> {
  await flushSearchIndexesNow(servicesOf(env.t.app));
  remote.proxy.reset();
  let ran = 0;
  let trips = 0;
  for (;;) {
    const before = remote.proxy.count;
    const outcome = await env.queue.runOne("default");
    if (outcome === "idle") break;
    if (outcome === "ran") {
      ran++;
      trips += remote.proxy.count - before;
    }
  }
  expect(ran).toBe(1);
  return trips;
}

interface Measured {
  name: string;
  /** What the measured request sent. */
  sent: Body[];
  enqueue: number;
  relay: number;
  run: number;
  job: Body;
  sql: string[][];
}
const results: Measured[] = [];

/** The job as `who` reads it. */
async function jobOf(who: Who, id: number): Promise<Body> {
  const r = await env.t.json("GET", `/api/core/jobs/${id}/`, { token: tokenOf(who) });
  expect(r.status).toBe(200);
  return r.body;
}

/** One background bulk write as `who`: enqueued, then run; counted both. */
async function once(who: Who, method: string, path: string, body: unknown) {
  await settle(who);
  remote.proxy.reset();
  const r = await env.t.json(method, `${path}?background=true`, { token: tokenOf(who), body });
  expect({ status: r.status, body: r.body.job?.status }).toEqual({ status: 202, body: "pending" });
  // the request's trips: the relay to Redis marks the job's outbox row after the answer, apart
  const sqls = remote.proxy.log.map((l) => l.sql);
  const enqueue = sqls.filter((trip) => !trip.some((q) => RELAY_MARK.test(q))).length;
  await handedToRedis(env, file, r.body.job.id);
  const relay = remote.proxy.log.filter((l) => l.sql.some((q) => RELAY_MARK.test(q))).length;
  const run = await runJobs();
  const runSql = remote.proxy.log.map((l) => l.sql);
  return {
    enqueue,
    relay,
    run,
    id: r.body.job.id as number,
    sql: [...sqls, ["-- job"], ...runSql],
  };
}

/** Makes `n` objects of `kind` as `who` (synchronously), answering their ids. */
async function made(who: Who, k: Kind, n: number): Promise<number[]> {
  const r = await env.t.json("POST", k.list, {
    token: tokenOf(who),
    body: Array.from({ length: n }, () => k.create(next())),
  });
  expect(r.status).toBe(201);
  return r.body.map((o: Body) => o.id as number);
}

/** A write measured after a warm run of the same write (each with its own objects). */
async function measure(
  who: Who,
  name: string,
  method: string,
  k: Kind,
  body: () => Promise<unknown>,
  status: number,
) {
  for (const round of ["warm", "measured"]) {
    const sent = (await body()) as Body[];
    const m = await once(who, method, k.list, sent);
    const job = await jobOf(who, m.id);
    expect({ name, round, status: job.status, code: (job.data as Body)?.status_code }).toEqual({
      name,
      round,
      status: { value: "completed", label: "Completed" },
      code: status,
    });
    if (round === "measured") results.push({ name: `${who} ${name}`, ...m, job, sent });
  }
}

async function sweep(who: Who, key: string) {
  const k = KINDS[key]!();
  const ids = (objs: number[], f: (n: number) => Body) => objs.map((id) => ({ id, ...f(next()) }));
  await measure(who, `${key} create`, "POST", k, async () => repeat(k.create), 201);
  await measure(
    who,
    `${key} update`,
    "PATCH",
    k,
    async () => ids(await made(who, k, N), k.patch),
    200,
  );
  await measure(
    who,
    `${key} replace`,
    "PUT",
    k,
    async () => ids(await made(who, k, N), k.put),
    200,
  );
  await measure(
    who,
    `${key} delete`,
    "DELETE",
    k,
    async () => ids(await made(who, k, N), () => ({})),
    204,
  );
}
const repeat = (f: (n: number) => Body) => Array.from({ length: N }, () => f(next()));

test("background bulk writes of 100 are swept for both callers and both kinds", async () => {
  for (const who of ["admin", "writer"] as const)
    for (const key of Object.keys(KINDS)) await sweep(who, key);
  expect(results.length).toBe(16);
});

test(`the enqueue is ≤ ${ENQUEUE_BUDGET} round trips and the job's run ≤ ${RUN_BUDGET}, warm`, () => {
  const over = results.filter(
    (r) => r.enqueue > ENQUEUE_BUDGET || r.relay > 1 || r.run > RUN_BUDGET,
  );
  if (process.env.ROUND_TRIPS_LOG)
    for (const r of results)
      console.log(
        over.includes(r) ? "OVER" : "ok  ",
        r.enqueue,
        r.relay,
        r.run,
        r.name,
        over.includes(r)
          ? r.sql
              .map((trip, i) => `\n  #${i + 1} ${trip.map((q) => q.slice(0, 160)).join("\n     ")}`)
              .join("")
          : "",
      );
  expect(over.map((r) => `${r.enqueue}+${r.relay}+${r.run} ${r.name}`)).toEqual([]);
});

test("each job, and each object it wrote, reads the same through a local app on the same file", async () => {
  let compared = 0;
  for (const r of results) {
    const who = r.name.startsWith("admin") ? "admin" : "writer";
    const there = await localGet(who, `/api/core/jobs/${r.job.id}/`);
    expect({ job: r.name, body: r.job as unknown }).toEqual({ job: r.name, body: there });
    const refs = ((r.job.data as Body).data ?? []) as Array<{ id: number; url: string }>;
    // as the answer lists them: in the order sent, only `{id, url}`, the object's own URL
    if (/delete/.test(r.name))
      expect({ job: r.name, data: refs }).toEqual({ job: r.name, data: [] });
    else expect(refs.length).toBe(N);
    for (const [i, ref] of refs.entries()) {
      const path = ref.url.slice(BASE.length);
      const remoteRead = await env.t.json("GET", path, { token: tokenOf(who) });
      expect({ path, body: remoteRead.body }).toEqual({ path, body: await localGet(who, path) });
      expect(Object.keys(ref).sort()).toEqual(["id", "url"]);
      expect(remoteRead.body.id).toBe(ref.id);
      expect(remoteRead.body.url).toBe(ref.url);
      const sent = r.sent[i]!;
      if (sent.id !== undefined) expect(ref.id).toBe(sent.id as number);
      else expect(remoteRead.body.name ?? remoteRead.body.title).toBe(sent.name ?? sent.title);
      compared++;
    }
  }
  expect(compared).toBe(12 * N);
});

async function localGet(who: Who, path: string): Promise<unknown> {
  const res = await local.app.request(BASE + path, {
    headers: { authorization: `Token ${tokenOf(who)}`, accept: "application/json" },
  });
  return res.status === 200 ? await res.json() : { status: res.status };
}

test("a constrained token's background bulk neither touches nor names what it may not view", async () => {
  for (const key of Object.keys(KINDS)) {
    const k = KINDS[key]!();
    const mine = await made("writer", k, 1);
    const before = await env.t.json("GET", `${k.list}${hidden[key]}/`);
    for (const [method, extra] of [
      ["PATCH", k.patch(next())],
      ["PUT", k.put(next())],
      ["DELETE", {}],
    ] as const) {
      const m = await once("writer", method, k.list, [
        { id: mine[0], ...extra },
        { id: hidden[key], ...extra },
      ]);
      const job = await jobOf("writer", m.id);
      expect({ key, method, status: (job.status as Body).value }).toEqual({
        key,
        method,
        status: "errored",
      });
      // refused as a missing object would be, and nothing of the hidden one is named
      const text = JSON.stringify(job);
      expect({ key, method, leaks: text.includes("hidden") || text.includes("big") }).toEqual({
        key,
        method,
        leaks: false,
      });
      const missing = await env.t.json(method, k.list, {
        token: writer,
        body: [{ id: 999_999, ...extra }],
      });
      expect((job.data as Body).status_code).toBe(missing.status);
    }
    // all or nothing: the hidden object is as it was, the visible one untouched too
    expect((await env.t.json("GET", `${k.list}${hidden[key]}/`)).body).toEqual(before.body);
    expect((await env.t.json("GET", `${k.list}${mine[0]}/`)).status).toBe(200);
  }
});

test("a read-only token is refused at enqueue: nothing is queued", async () => {
  for (const key of Object.keys(KINDS)) {
    const k = KINDS[key]!();
    const [jobs] = (await env.t.deps.db.orm.all(sql`SELECT count(*) AS n FROM jobs`)) as Array<{
      n: number;
    }>;
    for (const method of ["POST", "PATCH", "PUT", "DELETE"]) {
      const body = method === "POST" ? [k.create(next())] : [{ id: hidden[key], ...k.patch(1) }];
      const r = await env.t.json(method, `${k.list}?background=true`, { token: viewer, body });
      expect({ key, method, status: r.status }).toEqual({ key, method, status: 403 });
    }
    const [after] = (await env.t.deps.db.orm.all(sql`SELECT count(*) AS n FROM jobs`)) as Array<{
      n: number;
    }>;
    expect(Number(after!.n)).toBe(Number(jobs!.n));
    expect(await env.queue.runOne("default")).toBe("idle");
  }
});

test("a job whose attempt moved on while its write was under way writes nothing: caught in the batch", async () => {
  const k = KINDS.site!();
  const sent = Array.from({ length: 3 }, () => k.create(next()));
  const r = await env.t.json("POST", `${k.list}?background=true`, { body: sent });
  expect(r.status).toBe(202);
  await handedToRedis(env, file, r.body.job.id);
  // the job's write batch waits at the proxy while another worker takes the next attempt
  remote.proxy.hold((q) => q.some((s) => /^insert into "sites"/i.test(s)));
  const running = env.queue.runOne("default");
  await waitFor(() => remote.proxy.held > 0, { message: "the job's batch held" });
  await file.execute({
    sql: "UPDATE jobs SET attempts = attempts + 1 WHERE id = ?",
    args: [r.body.job.id],
  });
  remote.proxy.release();
  expect(await running).toBe("ran");
  const slugs = sent.map((b) => `slug=${b.slug}`).join("&");
  expect((await env.t.json("GET", `${k.list}?${slugs}`)).body.count).toBe(0);
  // the job stays as the other attempt left it: running, not completed by the stale one
  const job = await jobOf("admin", r.body.job.id);
  expect({ status: (job.status as Body).value, attempts: job.attempts }).toEqual({
    status: "running",
    attempts: 2,
  });
});

test("a job acts on its caller's grants as of its run: a cached copy proven stale is not used", async () => {
  const k = KINDS.site!();
  // the writer's caller is cached from the sweep; its add of sites is taken away after queueing
  const body = k.create(next());
  const r = await env.t.json("POST", `${k.list}?background=true`, { token: writer, body: [body] });
  expect(r.status).toBe(202);
  const grant = await env.t.json("GET", "/api/users/permissions/?name=bg-writer-0");
  const id = grant.body.results[0].id;
  expect(grant.body.results[0].object_types).toEqual(["dcim.site"]);
  expect(
    (await env.t.json("PATCH", `/api/users/permissions/${id}/`, { body: { actions: ["view"] } }))
      .status,
  ).toBe(200);
  await handedToRedis(env, file, r.body.job.id);
  await runJobs();
  const job = await jobOf("admin", r.body.job.id);
  expect({ status: (job.status as Body).value, code: (job.data as Body).status_code }).toEqual({
    status: "errored",
    code: 403,
  });
  expect((await env.t.json("GET", `${k.list}?slug=${body.slug}`)).body.count).toBe(0);
});
