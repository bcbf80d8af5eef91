/**
 * Outside probe (decision 0191): an event rule's conditions are an oracle over the object they
 * watch. A user who may manage rules and webhooks, and view sites but not every tenant or tag,
 * writes conditions on a visible site's hidden tenant and tags (`tenant.name contains "Red"`, a
 * negated guess, `tags.slug`, `snapshots.postchange.…`) and learns, from whether their own
 * receiver is called, what they may not view. Each guess must deliver exactly as a wrong guess
 * does; conditions on what they may view still decide. Real redis-server, real worker, real
 * receivers on 127.0.0.1.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { userWith } from "../helpers/grants";
import { jobsNamed, makeTasksEnv, startReceiver, waitFor, type TasksEnv } from "../tasks/harness";
import { makeCot } from "../custom-objects/fixtures";

let env: TasksEnv;
let prober = "";
const receivers: Array<ReturnType<typeof startReceiver>> = [];
const ids: Record<string, number> = {};

const made = async (path: string, body: unknown, token?: string) => {
  const r = await env.t.json("POST", path, { body, ...(token ? { token } : {}) });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body.id as number;
};

beforeAll(async () => {
  env = await makeTasksEnv();
  env.startWorker();
  ids.blue = await made("/api/tenancy/tenants/", { name: "Blue", slug: "blue" });
  ids.red = await made("/api/tenancy/tenants/", { name: "RedSecret", slug: "red" });
  ids.open = await made("/api/extras/tags/", { name: "open tag", slug: "open-tag" });
  ids.hidden = await made("/api/extras/tags/", { name: "hidden tag", slug: "hidden-tag" });
  prober = (
    await userWith(env.t, "cond-prober", [
      [["view", "add", "change", "delete"], "extras.webhook", null],
      [["view", "add", "change", "delete"], "extras.eventrule", null],
      [["view"], "dcim.site", null],
      [["view"], "tenancy.tenant", { slug: "blue" }],
      [["view"], "extras.tag", { slug__in: ["open-tag", "typed-tag"] }],
      [["view"], "users.ownergroup", null],
    ])
  ).token;
});
afterAll(async () => {
  for (const r of receivers) r.stop();
  await env.close();
});

/**
 * A receiver, a webhook to it and a rule with `conditions` (on site creates unless `on` says
 * otherwise), all the prober's.
 */
async function probe(conditions: unknown, on = { type: "dcim.site", event: "object_created" }) {
  const receiver = startReceiver();
  receivers.push(receiver);
  const name = `p-${crypto.randomUUID().slice(0, 8)}`;
  const hook = await made("/api/extras/webhooks/", { name, payload_url: receiver.url }, prober);
  await made(
    "/api/extras/event-rules/",
    {
      name,
      object_types: [on.type],
      event_types: [on.event],
      conditions,
      action_object_type: "extras.webhook",
      action_object_id: hook,
    },
    prober,
  );
  return { hook, receiver };
}

/** Once every delivery job of these webhooks has finished: how many bodies each receiver got. */
async function delivered(probes: Array<Awaited<ReturnType<typeof probe>>>) {
  const hooks = new Set(probes.map((p) => p.hook));
  await waitFor("the probes' deliveries to finish", async () => {
    const jobs = (await jobsNamed(env.t, "webhook.deliver")).filter((j) => hooks.has(j.object_id));
    return jobs.every((j) => ["completed", "errored", "failed"].includes(j.status.value));
  });
  return probes.map((p) => p.receiver.received.length);
}

describe("a rule's conditions on what its owner may not view", () => {
  test("a guess at a hidden tenant's name or a hidden tag delivers as a wrong guess does", async () => {
    const guesses: Array<[unknown, unknown]> = [
      [
        { attr: "tenant.name", op: "contains", value: "Red" },
        { attr: "tenant.name", op: "contains", value: "Xyz" },
      ],
      [
        { attr: "tenant.name", value: "RedSecret", negate: true },
        { attr: "tenant.name", value: "Nobody", negate: true },
      ],
      [
        { attr: "tags.slug", op: "contains", value: "hidden-tag" },
        { attr: "tags.slug", op: "contains", value: "no-such-tag" },
      ],
      [
        { attr: "snapshots.postchange.tenant.slug", value: "red" },
        { attr: "snapshots.postchange.tenant.slug", value: "nope" },
      ],
      [
        {
          and: [
            { attr: "name", value: "red site" },
            { attr: "tenant.display", value: "RedSecret" },
          ],
        },
        {
          and: [
            { attr: "name", value: "red site" },
            { attr: "tenant.display", value: "Nobody" },
          ],
        },
      ],
    ];
    const probes = [];
    for (const [right, wrong] of guesses) probes.push(await probe(right), await probe(wrong));
    await made("/api/dcim/sites/", {
      name: "red site",
      slug: "red-site",
      tenant: ids.red,
      tags: [ids.hidden, ids.open],
    });
    const counts = await delivered(probes);
    for (let i = 0; i < guesses.length; i++)
      expect(counts[2 * i], JSON.stringify(guesses[i]![0])).toBe(counts[2 * i + 1]!);
  });

  test("conditions on what the owner may view still decide", async () => {
    const probes = [
      await probe({ attr: "tenant.name", value: "Blue" }),
      await probe({ attr: "tenant.name", value: "Green" }),
      await probe({ attr: "tags.slug", op: "contains", value: "open-tag" }),
      await probe({ attr: "name", value: "blue site" }),
      await probe({ attr: "name", value: "other site" }),
    ];
    await made("/api/dcim/sites/", {
      name: "blue site",
      slug: "blue-site",
      tenant: ids.blue,
      tags: [ids.open],
    });
    expect(await delivered(probes)).toEqual([1, 0, 1, 1, 0]);
    // and the body holds the visible tenant whole
    expect(JSON.parse(probes[0]!.receiver.received[0]!.body).data.tenant.name).toBe("Blue");
  });
});

describe("a rule's conditions on values a view rewrites without nesting a record", () => {
  test("a guess at a hidden custom object type a tag names delivers as a wrong guess does", async () => {
    // decision 0187: the prober holds no permission on the type, so its name is withheld
    await makeCot(env.t, "cond_secret_kind");
    const onTags = { type: "extras.tag", event: "object_created" };
    const guesses: Array<[unknown, unknown]> = [
      [
        {
          attr: "object_types",
          op: "contains",
          value: "custom_objects.cond_secret_kind",
          negate: true,
        },
        {
          attr: "object_types",
          op: "contains",
          value: "custom_objects.nothing_here",
          negate: true,
        },
      ],
      [
        { attr: "object_types.0", op: "contains", value: "secret", negate: true },
        { attr: "object_types.0", op: "contains", value: "zzzz", negate: true },
      ],
    ];
    const probes = [];
    for (const [right, wrong] of guesses)
      probes.push(await probe(right, onTags), await probe(wrong, onTags));
    await made("/api/extras/tags/", {
      name: "typed tag",
      slug: "typed-tag",
      object_types: ["custom_objects.cond_secret_kind", "dcim.site"],
    });
    const counts = await delivered(probes);
    for (let i = 0; i < guesses.length; i++)
      expect(counts[2 * i], JSON.stringify(guesses[i]![0])).toBe(counts[2 * i + 1]!);
  });

  test("a guess at an owner group's withheld member_count delivers as a wrong guess does", async () => {
    // decision 0191: the prober may not view owners, so member_count is null to them
    const group = await made("/api/users/owner-groups/", { name: "counted" });
    for (const name of ["o1", "o2"]) await made("/api/users/owners/", { name, group });
    const onGroups = { type: "users.ownergroup", event: "object_updated" };
    const probes = [
      await probe({ attr: "member_count", value: 2, negate: true }, onGroups),
      await probe({ attr: "member_count", value: 7, negate: true }, onGroups),
    ];
    const r = await env.t.json("PATCH", `/api/users/owner-groups/${group}/`, {
      body: { description: "touched" },
    });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const [right, wrong] = await delivered(probes);
    expect(right).toBe(wrong!);
  });
});

describe("a delivery's username", () => {
  test("names the writer only to owners who may view that user", async () => {
    const hidden = await probe(null);
    const receiver = startReceiver();
    receivers.push(receiver);
    const viewer = (
      await userWith(env.t, "cond-user-viewer", [
        [["view", "add"], "extras.webhook", null],
        [["view", "add"], "extras.eventrule", null],
        [["view"], "dcim.site", null],
        [["view"], "users.user", null],
      ])
    ).token;
    const hook = await made(
      "/api/extras/webhooks/",
      { name: "uv", payload_url: receiver.url },
      viewer,
    );
    await made(
      "/api/extras/event-rules/",
      {
        name: "uv",
        object_types: ["dcim.site"],
        event_types: ["object_created"],
        action_object_type: "extras.webhook",
        action_object_id: hook,
      },
      viewer,
    );
    await made("/api/dcim/sites/", { name: "named site", slug: "named-site" });
    expect(await delivered([hidden, { hook, receiver }])).toEqual([1, 1]);
    const writer = (await env.t.json("GET", "/api/users/users/?limit=1&is_superuser=true")).body
      .results[0].username;
    expect(writer.length).toBeGreaterThan(0);
    // the prober may not view users: the body names nobody, as the change log does for them
    expect(JSON.parse(hidden.receiver.received[0]!.body).username).toBe("");
    expect(JSON.parse(receiver.received[0]!.body).username).toBe(writer);
  });
});
