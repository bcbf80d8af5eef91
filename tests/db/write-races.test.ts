/**
 * Races between writes on a remote database (issue 28 item 2, decision 0071), over HTTP: the app
 * on the project's Hrana server through a proxy that holds the write batches until both writers
 * have read, so both base their write on the same read. One wins; the other answers 409
 * (`write_conflict`), or 412 when it sent `If-Match`; nothing is overwritten silently.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { remoteAppForFile } from "../helpers/remote-db";
import { waitFor } from "../helpers/wait";
import { userWith } from "../helpers/grants";
import { addField, CO, create, makeCot, namedCot } from "../custom-objects/fixtures";

const on = remoteAppForFile("write-races");

let serial = 0;
async function newSite(): Promise<{ id: number; last_updated: string }> {
  const n = ++serial;
  const r = await on.t.json("POST", "/api/dcim/sites/", {
    body: { name: `race ${n}`, slug: `race-${n}` },
  });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  // the answer, built before SQLite gave the id, is the object as a GET reads it
  expect(r.body).toEqual((await on.t.json("GET", `/api/dcim/sites/${r.body.id}/`)).body);
  return r.body;
}

/** Waits (bounded) until `n` write batches wait in the proxy. */
async function untilHeld(n: number) {
  await waitFor(() => on.proxy.held >= n, {
    message: () => `${on.proxy.held} of ${n} write batches held`,
  });
  expect(on.proxy.held).toBe(n);
}

/** Runs `writes` with their write batches held until all of them have read, then lets them go. */
async function race<T>(writes: Array<() => Promise<T>>): Promise<T[]> {
  on.proxy.hold((statements) => statements.some((s) => /^(update|delete from) "sites"/i.test(s)));
  try {
    const running = writes.map((w) => w());
    await untilHeld(writes.length);
    on.proxy.release();
    return await Promise.all(running);
  } finally {
    on.proxy.release();
  }
}

const changesOf = async (id: number) =>
  (
    await on.t.json("GET", `/api/core/object-changes/?changed_object_id=${id}&limit=50`)
  ).body.results.filter(
    (c: { changed_object_type: string }) => c.changed_object_type === "dcim.site",
  );

/** Of two racing answers, one 200 and one 409 `write_conflict`: the 200. */
function winnerOf<A extends { status: number; body: any }>(a: A, b: A): A {
  expect([a.status, b.status].sort()).toEqual([200, 409]);
  expect((a.status === 409 ? a : b).body.error).toBe("write_conflict");
  return a.status === 200 ? a : b;
}

test("two PATCHes of one site from the same read: one 200, the other 409, nothing lost", async () => {
  const site = await newSite();
  const [a, b] = await race(
    ["first", "second"].map(
      (d) => () => on.t.json("PATCH", `/api/dcim/sites/${site.id}/`, { body: { description: d } }),
    ),
  );
  const winner = winnerOf(a!, b!);
  const now = (await on.t.json("GET", `/api/dcim/sites/${site.id}/`)).body;
  expect(now.description).toBe(winner.body.description);
  expect(now.last_updated).toBe(winner.body.last_updated);
  // one change record for the winner, none for the loser
  const updates = (await changesOf(site.id)).filter(
    (c: { action: { value: string } }) => c.action.value === "update",
  );
  expect(updates.length).toBe(1);
  expect(updates[0].postchange_data.description).toBe(winner.body.description);
});

test("with If-Match of the same ETag: one 200, the other 412", async () => {
  const site = await newSite();
  const etag = `W/"${site.last_updated}"`;
  const [a, b] = await race(
    ["one", "two"].map(
      (d) => () =>
        on.t.json("PATCH", `/api/dcim/sites/${site.id}/`, {
          body: { description: d },
          headers: { "If-Match": etag },
        }),
    ),
  );
  expect([a!.status, b!.status].sort()).toEqual([200, 412]);
  // the winner's answer carries its new ETag, which a next If-Match names
  const won = a!.status === 200 ? a! : b!;
  expect(won.res.headers.get("ETag")).toBe(`W/"${won.body.last_updated}"`);
  // a stale ETag is refused before anything is written
  const stale = await on.t.json("PATCH", `/api/dcim/sites/${site.id}/`, {
    body: { description: "late" },
    headers: { "If-Match": etag },
  });
  expect(stale.status).toBe(412);
  const now = (await on.t.json("GET", `/api/dcim/sites/${site.id}/`)).body;
  expect(now.description).toBe((a!.status === 200 ? a! : b!).body.description);
});

test("a DELETE racing a PATCH: one wins, the other answers 409; no update of a deleted row", async () => {
  const site = await newSite();
  const [patched, deleted] = await race([
    () => on.t.json("PATCH", `/api/dcim/sites/${site.id}/`, { body: { description: "kept?" } }),
    () => on.t.json("DELETE", `/api/dcim/sites/${site.id}/`),
  ]);
  const outcome = [patched!.status, deleted!.status];
  // whichever batch the server ran first wins; the other's condition on last_updated fails
  expect([
    [200, 409],
    [409, 204],
  ]).toContainEqual(outcome);
  const after = await on.t.json("GET", `/api/dcim/sites/${site.id}/`);
  if (deleted!.status === 204) expect(after.status).toBe(404);
  else expect(after.body.description).toBe("kept?");
});

test("answers of staged writes are the objects as GET reads them (relations, tags, bulk)", async () => {
  const tenant = (
    await on.t.json("POST", "/api/tenancy/tenants/", { body: { name: "acme", slug: "acme" } })
  ).body;
  const tag = (
    await on.t.json("POST", "/api/extras/tags/", { body: { name: "blue", slug: "blue" } })
  ).body;
  const site = await newSite();
  const get = async (id: number) => (await on.t.json("GET", `/api/dcim/sites/${id}/`)).body;
  const patched = await on.t.json("PATCH", `/api/dcim/sites/${site.id}/`, {
    body: { tenant: tenant.id, tags: [{ slug: "blue" }], status: "planned" },
  });
  expect(patched.status, JSON.stringify(patched.body)).toBe(200);
  expect(patched.body.tenant.id).toBe(tenant.id);
  expect(patched.body.tags.map((x: { id: number }) => x.id)).toEqual([tag.id]);
  expect(patched.body).toEqual(await get(site.id));
  const created = await on.t.json("POST", "/api/dcim/sites/", {
    body: [
      { name: "with tags", slug: "with-tags", tenant: tenant.id, tags: [tag.id] },
      { name: "plain", slug: "plain" },
    ],
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  for (const c of created.body) expect(c).toEqual(await get(c.id));
  const put = await on.t.json("PUT", "/api/dcim/sites/", {
    body: created.body.map((c: { id: number; slug: string }) => ({
      id: c.id,
      name: `${c.slug} again`,
      slug: c.slug,
    })),
  });
  expect(put.status, JSON.stringify(put.body)).toBe(200);
  for (const c of put.body) expect(c).toEqual(await get(c.id));
  // a PUT keeps what it does not name (tags, as NetBox does), drops no relation silently
  expect(put.body[0].tags.map((x: { id: number }) => x.id)).toEqual([tag.id]);
});

/** `race` with the write batches `match` names held until all of them have read. */
async function raceOn<T>(match: RegExp, writes: Array<() => Promise<T>>): Promise<T[]> {
  on.proxy.hold((statements) => statements.some((s) => match.test(s)));
  try {
    const running = writes.map((w) => w());
    await untilHeld(writes.length);
    on.proxy.release();
    return await Promise.all(running);
  } finally {
    on.proxy.release();
  }
}

test("host models with hooks (decision 0092): two PATCHes of a user's groups, one 409; a tag's types likewise", async () => {
  const g1 = (await on.t.json("POST", "/api/users/groups/", { body: { name: "race-g1" } })).body.id;
  const g2 = (await on.t.json("POST", "/api/users/groups/", { body: { name: "race-g2" } })).body.id;
  const user = (await on.t.json("POST", "/api/users/users/", { body: { username: "racer" } })).body;
  const [a, b] = await raceOn(/^update "users"/i, [
    () => on.t.json("PATCH", `/api/users/users/${user.id}/`, { body: { groups: [g1] } }),
    () => on.t.json("PATCH", `/api/users/users/${user.id}/`, { body: { groups: [g2] } }),
  ]);
  const winner = winnerOf(a!, b!);
  const now = (await on.t.json("GET", `/api/users/users/${user.id}/`)).body;
  // the winner's groups alone: the loser's link statements rolled back with its UPDATE
  expect(now).toEqual(winner.body);
  expect(now.groups.map((g: { id: number }) => g.id)).toEqual([winner === a ? g1 : g2]);

  const tag = (
    await on.t.json("POST", "/api/extras/tags/", {
      body: { name: "race-tag", slug: "race-tag", object_types: ["dcim.site"] },
    })
  ).body;
  const etag = `W/"${tag.last_updated}"`;
  const [c, d] = await raceOn(/^update "tags"/i, [
    () =>
      on.t.json("PATCH", `/api/extras/tags/${tag.id}/`, {
        body: { object_types: ["dcim.device"] },
        headers: { "If-Match": etag },
      }),
    () =>
      on.t.json("PATCH", `/api/extras/tags/${tag.id}/`, {
        body: { object_types: ["ipam.prefix"] },
        headers: { "If-Match": etag },
      }),
  ]);
  expect([c!.status, d!.status].sort()).toEqual([200, 412]);
  const won = c!.status === 200 ? c! : d!;
  expect((await on.t.json("GET", `/api/extras/tags/${tag.id}/`)).body).toEqual(won.body);
});

test("a group's grants changed while a user joins it: the join answers 409, no grant handed out (decision 0065)", async () => {
  const group = (await on.t.json("POST", "/api/users/groups/", { body: { name: "race-vault" } }))
    .body.id;
  // the group grants what the joiner holds: viewing sites
  await on.t.json("POST", "/api/users/permissions/", {
    body: { name: "vault-view", actions: ["view"], object_types: ["dcim.site"], groups: [group] },
  });
  const joiner = await userWith(on.t, "joiner", [
    [["view", "change"], "users.user", { id: "$user" }],
    [["view", "change"], "users.group", null],
    [["view"], "dcim.site", null],
  ]);
  const wider = (
    await on.t.json("POST", "/api/users/permissions/", {
      body: { name: "vault-delete", actions: ["delete"], object_types: ["dcim.site"] },
    })
  ).body.id;
  on.proxy.hold((statements) => statements.some((s) => /^update "users"/i.test(s)));
  try {
    const join = on.t.json("PATCH", `/api/users/users/${joiner.id}/`, {
      token: joiner.token,
      body: { groups: [group] },
    });
    await untilHeld(1);
    // meanwhile the group comes to grant deleting sites, which the joiner does not hold
    const attached = await on.t.json("PATCH", `/api/users/permissions/${wider}/`, {
      body: { groups: [group] },
    });
    expect(attached.status).toBe(200);
    on.proxy.release();
    const answer = await join;
    expect(answer.status, JSON.stringify(answer.body)).toBe(409);
  } finally {
    on.proxy.release();
  }
  const me = (await on.t.json("GET", `/api/users/users/${joiner.id}/`)).body;
  expect(me.groups).toEqual([]);
  // asked again, the join is refused: the group now grants more than the joiner holds
  const again = await on.t.json("PATCH", `/api/users/users/${joiner.id}/`, {
    token: joiner.token,
    body: { groups: [group] },
  });
  expect(again.status).toBe(403);
});

/** A webhook made for a race; its id. */
const raceHook = async (name: string): Promise<number> =>
  (
    await on.t.json("POST", "/api/extras/webhooks/", {
      body: { name, payload_url: `https://example.com/${name}` },
    })
  ).body.id;

/** Creates an event rule on site creations that calls webhook `hook`. */
const ruleCalling = (name: string, hook: number) =>
  on.t.json("POST", "/api/extras/event-rules/", {
    body: {
      name,
      object_types: ["dcim.site"],
      event_types: ["object_created"],
      action_object_type: "extras.webhook",
      action_object_id: hook,
    },
  });

test("an event rule naming a webhook deleted while it was written: 400, no rule pointing nowhere", async () => {
  const hook = await raceHook("race-hook");
  on.proxy.hold((statements) => statements.some((s) => /^insert into "event_rules"/i.test(s)));
  try {
    const made = ruleCalling("race-rule", hook);
    await untilHeld(1);
    expect((await on.t.json("DELETE", `/api/extras/webhooks/${hook}/`)).status).toBe(204);
    on.proxy.release();
    const answer = await made;
    expect(answer.status, JSON.stringify(answer.body)).toBe(400);
    expect(Object.keys(answer.body)).toEqual(["action_object_id"]);
  } finally {
    on.proxy.release();
  }
  const rules = (await on.t.json("GET", "/api/extras/event-rules/?name=race-rule")).body;
  expect(rules.count).toBe(0);
});

test("a webhook deleted while a rule comes to call it: the delete answers 409, the rule keeps its webhook", async () => {
  const hook = await raceHook("race-hook-2");
  on.proxy.hold((statements) => statements.some((s) => /^delete from "webhooks"/i.test(s)));
  try {
    const deleted = on.t.json("DELETE", `/api/extras/webhooks/${hook}/`);
    await untilHeld(1);
    const rule = await ruleCalling("race-rule-2", hook);
    expect(rule.status, JSON.stringify(rule.body)).toBe(201);
    on.proxy.release();
    const answer = await deleted;
    expect(answer.status, JSON.stringify(answer.body)).toBe(409);
    expect(answer.body.error).toBe("protected");
  } finally {
    on.proxy.release();
  }
  expect((await on.t.json("GET", `/api/extras/webhooks/${hook}/`)).status).toBe(200);
});

describe("custom objects (decision 0090)", () => {
  const heldWrites = /^(update|delete from|insert into) "co_\d+"/i;
  let made = false;
  async function newThing(): Promise<Record<string, any> & { id: number }> {
    if (!made) {
      const cot = await makeCot(on.t, "racer");
      await addField(on.t, cot.id, { name: "title", type: "text", primary: true, unique: true });
      await addField(on.t, cot.id, { name: "note", type: "text" });
      made = true;
    }
    const thing = await create(on.t, "racer", { title: `thing ${++serial}` });
    expect(thing.id).toBeGreaterThan(0);
    return thing;
  }
  const thingChanges = async (id: number) =>
    (
      await on.t.json("GET", `/api/core/object-changes/?changed_object_id=${id}&limit=50`)
    ).body.results.filter(
      (c: { changed_object_type: string; action: { value: string } }) =>
        c.changed_object_type === "custom_objects.racer" && c.action.value === "update",
    );

  test("two PATCHes of one object from the same read: one 200, the other 409, nothing lost", async () => {
    const thing = await newThing();
    const [a, b] = await raceOn(
      heldWrites,
      ["first", "second"].map(
        (note) => () => on.t.json("PATCH", `${CO}/racer/${thing.id}/`, { body: { note } }),
      ),
    );
    const winner = winnerOf(a!, b!);
    const now = (await on.t.json("GET", `${CO}/racer/${thing.id}/`)).body;
    expect(now.note).toBe(winner.body.note);
    expect(now.last_updated).toBe(winner.body.last_updated);
    const updates = await thingChanges(thing.id);
    expect(updates.length).toBe(1);
    expect(updates[0].postchange_data.note).toBe(winner.body.note);
  });

  test("with If-Match of the same ETag: one 200, the other 412", async () => {
    const thing = await newThing();
    const etag = `W/"${thing.last_updated}"`;
    const [a, b] = await raceOn(
      heldWrites,
      ["one", "two"].map(
        (note) => () =>
          on.t.json("PATCH", `${CO}/racer/${thing.id}/`, {
            body: { note },
            headers: { "If-Match": etag },
          }),
      ),
    );
    expect([a!.status, b!.status].sort()).toEqual([200, 412]);
    const stale = await on.t.json("PATCH", `${CO}/racer/${thing.id}/`, {
      body: { note: "late" },
      headers: { "If-Match": etag },
    });
    expect(stale.status).toBe(412);
    const won = a!.status === 200 ? a! : b!;
    expect((await on.t.json("GET", `${CO}/racer/${thing.id}/`)).body.note).toBe(won.body.note);
  });

  test("a DELETE racing a PATCH: one wins, the other answers 409", async () => {
    const thing = await newThing();
    const [patched, deleted] = await raceOn(heldWrites, [
      () => on.t.json("PATCH", `${CO}/racer/${thing.id}/`, { body: { note: "kept?" } }),
      () => on.t.json("DELETE", `${CO}/racer/${thing.id}/`),
    ]);
    expect([
      [200, 409],
      [409, 204],
    ]).toContainEqual([patched!.status, deleted!.status]);
    const after = await on.t.json("GET", `${CO}/racer/${thing.id}/`);
    if (deleted!.status === 204) expect(after.status).toBe(404);
    else expect(after.body.note).toBe("kept?");
  });

  test("two creates of one unique title: the unique index refuses the second inside its batch (400)", async () => {
    await newThing();
    const title = `twice ${++serial}`;
    const [a, b] = await raceOn(
      heldWrites,
      [1, 2].map(() => () => on.t.json("POST", `${CO}/racer/`, { body: { title } })),
    );
    expect([a!.status, b!.status].sort()).toEqual([201, 400]);
    const refused = a!.status === 400 ? a! : b!;
    expect(refused.body.title[0]).toContain("already exists");
    const list = (await on.t.json("GET", `${CO}/racer/?title=${encodeURIComponent(title)}`)).body;
    expect(list.count).toBe(1);
  });
});

describe("a cascading delete raced by a write to its dependants (decision 0109)", () => {
  let parentType: number;
  beforeAll(async () => {
    parentType = (await namedCot(on.t, "racebox")).id;
    await namedCot(on.t, "raceitem", {
      box: { to: "custom_objects.racebox", onDelete: "cascade" },
    });
    // a first cascading delete keeps the fields pointing at the types (the next plans in its read)
    const warm = (await create(on.t, "racebox", { name: "warm" })).id;
    await create(on.t, "raceitem", { name: "warm item", box: warm });
    expect((await on.t.json("DELETE", `${CO}/racebox/${warm}/`)).status).toBe(204);
  });

  /** Deletes a box with one item while `meanwhile` writes, its batch held until then. */
  async function raced(meanwhile: (box: number, item: number) => Promise<{ status: number }>) {
    const box = (await create(on.t, "racebox", { name: `box ${++serial}` })).id;
    const item = (await create(on.t, "raceitem", { name: `item ${serial}`, box })).id;
    on.proxy.hold((statements) =>
      statements.some((s) => s.startsWith(`DELETE FROM "co_${parentType}"`)),
    );
    try {
      const deleting = on.t.json("DELETE", `${CO}/racebox/${box}/`);
      await untilHeld(1);
      expect((await meanwhile(box, item)).status).toBeLessThan(300);
      on.proxy.release();
      return { box, item, deleted: await deleting };
    } finally {
      on.proxy.release();
    }
  }

  const exists = async (slug: string, id: number) =>
    (await on.t.json("GET", `${CO}/${slug}/${id}/`)).status === 200;

  test("an item made for the box between the read and the write: 409, nothing deleted", async () => {
    let late = 0;
    const { box, item, deleted } = await raced(async (b) => {
      const r = await on.t.json("POST", `${CO}/raceitem/`, { body: { name: "late", box: b } });
      late = r.body.id;
      return r;
    });
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(409);
    expect(deleted.body.error).toBe("write_conflict");
    expect(await exists("racebox", box)).toBe(true);
    expect(await exists("raceitem", item)).toBe(true);
    expect(await exists("raceitem", late)).toBe(true);
    // and the delete then goes through, the late item with it
    expect((await on.t.json("DELETE", `${CO}/racebox/${box}/`)).status).toBe(204);
    expect(await exists("raceitem", late)).toBe(false);
  });

  test("an item changed between the read and the write: 409, not deleted stale", async () => {
    const { box, item, deleted } = await raced((_b, i) =>
      on.t.json("PATCH", `${CO}/raceitem/${i}/`, { body: { name: "renamed" } }),
    );
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(409);
    expect(deleted.body.error).toBe("write_conflict");
    expect(await exists("racebox", box)).toBe(true);
    expect((await on.t.json("GET", `${CO}/raceitem/${item}/`)).body.name).toBe("renamed");
  });

  test("an item moved to another box between the read and the write: 409, it stays", async () => {
    const other = (await create(on.t, "racebox", { name: `other ${++serial}` })).id;
    const { box, item, deleted } = await raced((_b, i) =>
      on.t.json("PATCH", `${CO}/raceitem/${i}/`, { body: { box: other } }),
    );
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(409);
    expect(await exists("racebox", box)).toBe(true);
    expect((await on.t.json("GET", `${CO}/raceitem/${item}/`)).body.box.id).toBe(other);
  });
});

describe("a revert of a delete raced by a create taking its unique key (decision 0113)", () => {
  const lastChange = async (type: string, id: number) =>
    (
      await on.t.json(
        "GET",
        `/api/core/object-changes/?changed_object_type=${type}&changed_object_id=${id}&ordering=-id&limit=1`,
      )
    ).body.results[0] as { id: number; action: { value: string } };
  /**
   * Reverts `change` with its write batch (the first to insert into the table) held until
   * `rival` has run; answers the revert's answer.
   */
  async function revertRacing(insert: RegExp, change: number, rival: () => Promise<void>) {
    let taken = false;
    on.proxy.hold((statements) => {
      if (taken || !statements.some((s) => insert.test(s))) return false;
      taken = true;
      return true;
    });
    try {
      const reverting = on.t.json("POST", `/api/core/object-changes/${change}/revert/`);
      await untilHeld(1);
      await rival();
      on.proxy.release();
      return await reverting;
    } finally {
      on.proxy.release();
    }
  }

  test("a site: the revert answers 409 naming the slug, nothing half-restored", async () => {
    const tag = await on.t.json("POST", "/api/extras/tags/", { body: { name: "rr", slug: "rr" } });
    const site = await on.t.json("POST", "/api/dcim/sites/", {
      body: { name: "restored", slug: "restored", tags: [tag.body.id] },
    });
    expect((await on.t.req("DELETE", `/api/dcim/sites/${site.body.id}/`)).status).toBe(204);
    const change = await lastChange("dcim.site", site.body.id);
    const r = await revertRacing(/^insert into "sites"/i, change.id, async () => {
      const rival = await on.t.json("POST", "/api/dcim/sites/", {
        body: { name: "rival", slug: "restored" },
      });
      expect(rival.status).toBe(201);
    });
    expect(r.status, JSON.stringify(r.body)).toBe(409);
    expect(r.body.error).toBe("revert_conflict");
    expect(r.body.conflicts).toEqual([expect.objectContaining({ reason: "unique" })]);
    expect((await on.t.json("GET", `/api/dcim/sites/${site.body.id}/`)).status).toBe(404);
    expect((await lastChange("dcim.site", site.body.id)).id).toBe(change.id);
    const tagged = await on.t.json("GET", `/api/dcim/sites/?tag=rr`);
    expect(tagged.body.count).toBe(0);
  });

  test("a revert of an update raced by a PATCH of the object: 409, the PATCH stands (decision 0118)", async () => {
    const site = await on.t.json("POST", "/api/dcim/sites/", {
      body: { name: "undone", slug: "undone", description: "first" },
    });
    await on.t.json("PATCH", `/api/dcim/sites/${site.body.id}/`, {
      body: { description: "second" },
    });
    const change = await lastChange("dcim.site", site.body.id);
    const r = await revertRacing(/^update "sites"/i, change.id, async () => {
      const rival = await on.t.json("PATCH", `/api/dcim/sites/${site.body.id}/`, {
        body: { description: "third" },
      });
      expect(rival.status).toBe(200);
    });
    expect(r.status, JSON.stringify(r.body)).toBe(409);
    expect(r.body.error).toBe("revert_conflict"); // not a 412: the caller sent no If-Match
    const now = await on.t.json("GET", `/api/dcim/sites/${site.body.id}/`);
    expect(now.body.description).toBe("third");
    // the rival's change record is the last: the revert wrote none
    const last = await lastChange("dcim.site", site.body.id);
    expect(last.id).toBeGreaterThan(change.id);
    const after = await on.t.json(
      "GET",
      `/api/core/object-changes/?changed_object_type=dcim.site&changed_object_id=${site.body.id}&id__gt=${change.id}`,
    );
    expect(after.body.count).toBe(1);
  });

  test("two reverts of one delete from the same read: one puts it back, the other 409 object_exists", async () => {
    const site = await on.t.json("POST", "/api/dcim/sites/", {
      body: { name: "twice", slug: "twice" },
    });
    expect((await on.t.req("DELETE", `/api/dcim/sites/${site.body.id}/`)).status).toBe(204);
    const change = await lastChange("dcim.site", site.body.id);
    const answers = await raceOn(
      /^insert into "sites"/i,
      [1, 2].map(() => () => on.t.json("POST", `/api/core/object-changes/${change.id}/revert/`)),
    );
    expect(answers.map((a) => a.status).sort()).toEqual([200, 409]);
    const refused = answers.find((a) => a.status === 409)!;
    expect(refused.body.conflicts).toEqual([expect.objectContaining({ reason: "object_exists" })]);
    expect((await on.t.json("GET", `/api/dcim/sites/${site.body.id}/`)).body.slug).toBe("twice");
    const after = await on.t.json(
      "GET",
      `/api/core/object-changes/?changed_object_type=dcim.site&changed_object_id=${site.body.id}&id__gt=${change.id}`,
    );
    expect(after.body.count).toBe(1);
  });

  test("a custom object: the revert answers 409 naming the title, nothing half-restored", async () => {
    const cot = await makeCot(on.t, "restorer");
    await addField(on.t, cot.id, { name: "title", type: "text", primary: true, unique: true });
    const thing = await create(on.t, "restorer", { title: "back" });
    expect((await on.t.req("DELETE", `${CO}/restorer/${thing.id}/`)).status).toBe(204);
    const change = await lastChange("custom_objects.restorer", thing.id);
    const r = await revertRacing(/^insert into "co_\d+"/i, change.id, async () => {
      await create(on.t, "restorer", { title: "back" });
    });
    expect(r.status, JSON.stringify(r.body)).toBe(409);
    expect(r.body.conflicts).toEqual([
      expect.objectContaining({ reason: "unique", field: "title" }),
    ]);
    expect((await on.t.json("GET", `${CO}/restorer/${thing.id}/`)).status).toBe(404);
    expect((await lastChange("custom_objects.restorer", thing.id)).id).toBe(change.id);
  });
});

describe("a custom object type whose shape changes between a write's read and its batch", () => {
  let cot: { id: number };
  beforeAll(async () => {
    cot = await namedCot(on.t, "reshaped");
  });

  /** Runs `write` with its batch (the statement `match` names) held while the type gains a field. */
  async function reshaped(match: RegExp, write: () => Promise<{ status: number; body: any }>) {
    on.proxy.hold((statements) => statements.some((s) => match.test(s)));
    try {
      const writing = write();
      await untilHeld(1);
      await addField(on.t, cot.id, { name: `added_${++serial}`, type: "text", default: "new" });
      on.proxy.release();
      return await writing;
    } finally {
      on.proxy.release();
    }
  }

  test("a create starts again on the new shape: 201 with the new field, never a 403", async () => {
    const made = await reshaped(new RegExp(`^insert into "co_${cot.id}"`, "i"), () =>
      on.t.json("POST", `${CO}/reshaped/`, { body: { name: `made ${++serial}` } }),
    );
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const now = (await on.t.json("GET", `${CO}/reshaped/${made.body.id}/`)).body;
    expect(now).toEqual(made.body);
    expect(Object.values(now)).toContain("new");
  });

  test("a delete starts again on the new shape (not a 409: nothing else wrote the object)", async () => {
    const thing = await create(on.t, "reshaped", { name: `gone ${++serial}` });
    const gone = await reshaped(new RegExp(`^delete from "co_${cot.id}"`, "i"), () =>
      on.t.json("DELETE", `${CO}/reshaped/${thing.id}/`),
    );
    expect(gone.status, JSON.stringify(gone.body)).toBe(204);
    expect((await on.t.json("GET", `${CO}/reshaped/${thing.id}/`)).status).toBe(404);
  });
});
