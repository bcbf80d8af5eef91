/**
 * A revert from the change log by a caller whose views and writes are constrained, counted on a
 * remote database (issue 28 item 2, decision 0168): whether it may view the change record, and
 * view and change (or delete) its object, ride in the plan's one read, so an update's revert and
 * a create taken back are 2 round trips as a superuser's are, and a dry run
 * of an update's revert 1; for a host model and a custom object type, whose model comes from the
 * plugin's cache with its guard in that read. Each answer is what the superuser's would be, its
 * refusals the same (tests/security/revert-scope.test.ts holds those). An update record another
 * app instance wrote on the same database, never seen by the reverting process, costs the same.
 */
import { settleBeforeCounting } from "../helpers/settle";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { servicesOf } from "../../src/app";
import { forgetChange, seenChange } from "../../src/core/changes/seen";
import { BASE, makeTestApp, type TestApp } from "../helpers/app";
import { userWith } from "../helpers/grants";
import { anotherInstance } from "../helpers/instances";
import { type RemoteDb, startRemoteDb } from "../helpers/remote-db";
import { addField, CO, makeCot } from "../custom-objects/fixtures";

let remote: RemoteDb;
let t: TestApp;
let writer: string;
let serial = 0;
const next = () => ++serial;

beforeAll(async () => {
  remote = await startRemoteDb("round-trips-constrained-revert");
  t = await makeTestApp({ DATABASE_URL: remote.url });
  const cot = await makeCot(t, "gadget");
  await addField(t, cot.id, { name: "title", type: "text", primary: true });
  await addField(t, cot.id, { name: "size", type: "integer" });
  const other = await makeCot(t, "hidden_kind");
  await addField(t, other.id, { name: "title", type: "text", primary: true });
  const all = ["view", "add", "change", "delete"];
  writer = (
    await userWith(t, "revert-writer", [
      [all, "dcim.site", { status: "active" }],
      [all, "custom_objects.gadget", { size__lte: 2 }],
      [["view"], "custom_objects.hidden_kind", { title: "none" }],
      [["view"], "core.objectchange", { id__gte: 1 }],
    ])
  ).token;
});
afterAll(async () => {
  await t.close();
  await remote.stop();
});

interface Kind {
  list: string;
  type: string;
  body: () => Record<string, unknown>;
  patch: () => Record<string, unknown>;
}
const kinds: Record<string, Kind> = {
  site: {
    list: "/api/dcim/sites/",
    type: "dcim.site",
    body: () => ({ name: `cr ${next()}`, slug: `cr-${serial}`, status: "active" }),
    patch: () => ({ description: `d${next()}` }),
  },
  gadget: {
    list: `${CO}/gadget/`,
    type: "custom_objects.gadget",
    body: () => ({ title: `g ${next()}`, size: 1 }),
    patch: () => ({ title: `g ${next()}` }),
  },
};

/** The writer's request; fails the test unless it answers `status`. */
async function asWriter(method: string, path: string, body: unknown, status: number) {
  const r = await t.json(method, path, { token: writer, body });
  expect({ method, path, status: r.status }).toEqual({ method, path, status });
  return r.body;
}

/** A change `act` of a new object of `kind`, looked at in the change log as the writer. */
async function changeOf(kind: Kind, act: "POST" | "PATCH" | "DELETE"): Promise<number> {
  const { id } = await asWriter("POST", kind.list, kind.body(), 201);
  if (act === "PATCH") await asWriter("PATCH", `${kind.list}${id}/`, kind.patch(), 200);
  if (act === "DELETE") await asWriter("DELETE", `${kind.list}${id}/`, undefined, 204);
  const log = await asWriter(
    "GET",
    `/api/core/object-changes/?changed_object_type=${kind.type}&changed_object_id=${id}&ordering=-id&limit=1`,
    undefined,
    200,
  );
  return log.results[0].id;
}

/** The deferred search-index flush done, and the writer's token use recently recorded. */
const settle = () => settleBeforeCounting(t.app, null, "revert-writer");

/** Round trips of the writer's revert of `change` (after a warm one of another), and its answer. */
async function reverted(kind: Kind, act: "POST" | "PATCH" | "DELETE", query = "") {
  await asWriter(
    "POST",
    `/api/core/object-changes/${await changeOf(kind, act)}/revert/${query}`,
    {},
    200,
  );
  const change = await changeOf(kind, act);
  await settle();
  remote.proxy.reset();
  const answer = await asWriter(
    "POST",
    `/api/core/object-changes/${change}/revert/${query}`,
    {},
    200,
  );
  return { trips: remote.proxy.count, answer };
}

test("a constrained caller's revert is one read and one batch, its dry run one read", async () => {
  const counts: Record<string, number> = {};
  for (const [name, kind] of Object.entries(kinds)) {
    // (a deleted object's records show only to an unconstrained view: no delete to put back here)
    for (const act of ["PATCH", "POST"] as const) {
      const { trips, answer } = await reverted(kind, act);
      counts[`${name} ${act} reverted`] = trips;
      expect(answer.dry_run).toBe(false);
      expect(typeof answer.change).toBe("number");
    }
    const dry = await reverted(kind, "PATCH", "?dry_run=true");
    counts[`${name} PATCH dry run`] = dry.trips;
    expect(dry.answer).toMatchObject({ dry_run: true, change: null, action: "update" });
  }
  // 8 each and 7 for a dry run before decision 0168 (the checks read one by one after the plan's)
  expect(counts).toEqual({
    "site PATCH reverted": 2,
    "site POST reverted": 2,
    "site PATCH dry run": 1,
    "gadget PATCH reverted": 2,
    "gadget POST reverted": 2,
    "gadget PATCH dry run": 1,
  });
});

/** An update of a new object of `kind` made by the writer through `other`; its change record. */
async function changedElsewhere(other: Other, kind: Kind): Promise<number> {
  const send = async (method: string, path: string, body: unknown) => {
    const r = await other.app.request(BASE + path, {
      method,
      headers: { authorization: `Token ${writer}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    expect({ method, path, status: r.status }).toEqual({
      method,
      path,
      status: method === "POST" ? 201 : 200,
    });
    return (await r.json()) as { id: number };
  };
  const { id } = await send("POST", kind.list, kind.body());
  await send("PATCH", `${kind.list}${id}/`, kind.patch());
  const [row] = (await t.deps.db.orm.all(
    sql`SELECT max(c.id) AS id FROM object_changes c JOIN object_types ot ON ot.id = c.changed_object_type_id WHERE ot.app_label || '.' || ot.model = ${kind.type} AND c.changed_object_id = ${id}`,
  )) as Array<{ id: number }>;
  return Number(row!.id);
}
type Other = Awaited<ReturnType<typeof anotherInstance>>;

/** Round trips of this process's revert (or dry run) of an update written through `other`. */
async function revertedElsewhere(other: Other, kind: Kind, query: string) {
  // warm: one of another such record first (the caches a later one takes on trust)
  const warm = await changedElsewhere(other, kind);
  await asWriter("POST", `/api/core/object-changes/${warm}/revert/${query}`, {}, 200);
  const change = await changedElsewhere(other, kind);
  await settle();
  forgetChange(servicesOf(t.app), change); // (never seen here: this only makes sure)
  expect(seenChange(servicesOf(t.app), change)).toBeUndefined();
  remote.proxy.reset();
  const answer = await asWriter(
    "POST",
    `/api/core/object-changes/${change}/revert/${query}`,
    {},
    200,
  );
  const trips = remote.proxy.count;
  if (process.env.ROUND_TRIPS_LOG)
    console.log(
      kind.type,
      query,
      trips,
      JSON.stringify(
        remote.proxy.log.map((l) => l.sql),
        null,
        1,
      ),
    );
  return { trips, answer };
}

test("a constrained caller's revert of an update another instance wrote: the same counts", async () => {
  const other = await anotherInstance(remote.url);
  const counts: Record<string, number> = {};
  try {
    for (const [name, kind] of Object.entries(kinds)) {
      const done = await revertedElsewhere(other, kind, "");
      expect(done.answer.dry_run).toBe(false);
      counts[`${name} reverted`] = done.trips;
      const dry = await revertedElsewhere(other, kind, "?dry_run=true");
      expect(dry.answer).toMatchObject({ dry_run: true, change: null, action: "update" });
      counts[`${name} dry run`] = dry.trips;
    }
  } finally {
    await other.close();
  }
  if (process.env.ROUND_TRIPS_LOG) console.log(counts);
  expect(counts).toEqual({
    "site reverted": 2,
    "site dry run": 2,
    "gadget reverted": 2,
    "gadget dry run": 2,
  });
});
