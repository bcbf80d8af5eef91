/**
 * Outside probe, second round (decision 0196): an ordinary account made thousands of event rules
 * and webhooks, and every write of a watched type then matched them all (2,000 rules: the first
 * write held the loop 21 s and 8 GB, reading the rules' print once per rule); a GraphQL variable
 * list of 100,000 items was coerced by graphql-js before any resolver could refuse it. These
 * tests count answers, statements and characters read, never milliseconds.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { useTurnClock } from "../../src/turns";
import { MAX_GRAPHQL_VALUES, MAX_JSON_DEPTH } from "../../src/core/limits";
import { loadConfig } from "../../src/config";
import { makeTestApp, type TestApp } from "../helpers/app";
import { userWith } from "../helpers/grants";
import { askLivez, turnsAtEveryOtherCheck } from "../helpers/livez-probe";

const WEBHOOKS = "/api/extras/webhooks/";
const RULES = "/api/extras/event-rules/";
const NETS = { WEBHOOK_ALLOWED_NETWORKS: "127.0.0.0/8" };
const grants: Array<[string[], string, unknown]> = [
  [["view", "add", "change", "delete"], "extras.webhook", null],
  [["view", "add", "change", "delete"], "extras.eventrule", null],
  [["view"], "dcim.site", null],
];
const hooks = (n: number, from = 0) =>
  Array.from({ length: n }, (_, i) => ({
    name: `h${from + i}`,
    payload_url: `http://127.0.0.1:9/${from + i}`,
  }));
const rules = (hookIds: number[], extra: Record<string, unknown> = {}) =>
  hookIds.map((id, i) => ({
    name: `r${id}-${i}`,
    object_types: ["dcim.site"],
    event_types: ["object_created"],
    action_object_type: "extras.webhook",
    action_object_id: id,
    ...extra,
  }));

afterEach(() => useTurnClock(null));

/** The event rule limits a deployment has unless it sets them (docs/operations.md). */
const DEFAULTS = loadConfig({ LOG_LEVEL: "silent" }, "bun").eventRuleLimits;

test("the limits' defaults are the documented ones", () => {
  expect(DEFAULTS).toEqual({ enabledRules: 200, rulesPerUser: 50, webhooksPerUser: 50 });
});

describe("how many event rules and webhooks there may be", () => {
  let t: TestApp;
  let eve: string;
  let bob: string;
  beforeAll(async () => {
    t = await makeTestApp({
      ...NETS,
      MAX_WEBHOOKS_PER_USER: "3",
      MAX_EVENT_RULES_PER_USER: "3",
      MAX_EVENT_RULES: "5",
    });
    eve = (await userWith(t, "eve", grants)).token;
    bob = (await userWith(t, "bob", grants)).token;
  });
  afterAll(() => t.close());

  test("a user's webhooks past their limit answer 400 naming it, nothing written", async () => {
    const over = await t.json("POST", WEBHOOKS, { token: eve, body: hooks(4) });
    expect(over.status).toBe(400);
    expect(over.body).toEqual({
      detail: "A user may own at most 3 webhooks; delete some first.",
      error: "too_many_webhooks",
      limit: 3,
    });
    expect((await t.json("GET", WEBHOOKS, { token: eve })).body.count).toBe(0);
    expect((await t.json("POST", WEBHOOKS, { token: eve, body: hooks(3) })).status).toBe(201);
    const one = await t.json("POST", WEBHOOKS, { token: eve, body: hooks(1, 3)[0] });
    expect(one.status).toBe(400);
    expect(one.body.error).toBe("too_many_webhooks");
    // another user has their own
    expect((await t.json("POST", WEBHOOKS, { token: bob, body: hooks(3, 10) })).status).toBe(201);
  });

  test("a user's rules past their limit, and enabled rules past the limit in all, answer 400", async () => {
    const eveHooks = (
      await t.json("GET", `${WEBHOOKS}?name__isw=h&ordering=id`, { token: eve })
    ).body.results.map((h: { id: number }) => h.id) as number[];
    const [a, b, c, d, e, f] = eveHooks;
    const over = await t.json("POST", RULES, { token: eve, body: rules([a!, b!, c!, a!]) });
    expect(over.status).toBe(400);
    expect(over.body).toMatchObject({ error: "too_many_event_rules", limit: 3 });
    expect((await t.json("POST", RULES, { token: eve, body: rules([a!, b!, c!]) })).status).toBe(
      201,
    );
    // bob: two enabled rules make five in all; a third enabled one passes the limit in all
    expect((await t.json("POST", RULES, { token: bob, body: rules([d!, e!]) })).status).toBe(201);
    const third = await t.json("POST", RULES, { token: bob, body: rules([f!])[0] });
    expect(third.status).toBe(400);
    expect(third.body).toEqual({
      detail: "At most 5 event rules may be enabled; disable or delete some first.",
      error: "too_many_event_rules",
      limit: 5,
    });
    // a disabled one is within bob's own limit; enabling it is not
    const off = await t.json("POST", RULES, {
      token: bob,
      body: rules([f!], { enabled: false })[0],
    });
    expect(off.status).toBe(201);
    const on = await t.json("PATCH", `${RULES}${off.body.id}/`, {
      token: bob,
      body: { enabled: true },
    });
    expect(on.status).toBe(400);
    expect(on.body.limit).toBe(5);
    // a change that adds nothing goes through at the limit
    const renamed = await t.json("PATCH", `${RULES}${off.body.id}/`, {
      token: bob,
      body: { name: "still off" },
    });
    expect(renamed.status).toBe(200);
    const listed = await t.json("GET", `${RULES}?enabled=true`);
    expect(listed.body.count).toBe(5);
  });
});

describe("many rules matched on one write", () => {
  const N = DEFAULTS.enabledRules;
  let t: TestApp;
  /** Characters of the enabled rules' conditions, all of them. */
  let conditionChars = 0;
  beforeAll(async () => {
    const raised = String(N);
    t = await makeTestApp({
      ...NETS,
      MAX_WEBHOOKS_PER_USER: raised,
      MAX_EVENT_RULES_PER_USER: raised,
    });
    const made = await t.json("POST", WEBHOOKS, { body: hooks(N) });
    expect(made.status).toBe(201);
    // each condition ~12 KB, within its limit, matching every new site
    const names = Array.from({ length: 900 }, (_, i) => `site-${i}`);
    const conditions = { attr: "name", op: "in", value: names };
    conditionChars = N * JSON.stringify(conditions).length;
    const ids = made.body.map((h: { id: number }) => h.id) as number[];
    for (let i = 0; i < N; i += 50) {
      const r = await t.json("POST", RULES, { body: rules(ids.slice(i, i + 50), { conditions }) });
      expect(r.status).toBe(201);
    }
  });
  afterAll(() => t.close());

  test("the write reads the rules once, not their print once per rule", async () => {
    // characters of what the database answers the write's reads (as JSON text)
    let read = 0;
    const db = t.deps.db;
    const reads = db.read;
    db.read = (async (queries: Parameters<typeof reads>[0]) => {
      const results = await reads.call(db, queries);
      read += JSON.stringify(results).length;
      return results;
    }) as unknown as typeof reads;
    try {
      const r = await t.json("POST", "/api/dcim/sites/", { body: { name: "site-1", slug: "s1" } });
      expect(r.status).toBe(201);
    } finally {
      db.read = reads;
    }
    // the rules and their print: about twice the conditions, not N times
    expect(read).toBeGreaterThan(conditionChars);
    expect(read).toBeLessThan(3 * conditionChars);
  });

  test("other requests are answered while the rules are matched", async () => {
    const jobs = async () =>
      (await t.json("GET", "/api/core/jobs/?name=webhook.deliver&limit=1")).body.count as number;
    const queued = await jobs();
    expect(queued).toBeGreaterThanOrEqual(N); // site-1 matched every rule
    turnsAtEveryOtherCheck();
    let answered = 0;
    const stop = askLivez(t, () => answered++);
    try {
      // matches none: all the work is the matching (no delivery's statements give turns)
      const r = await t.json("POST", "/api/dcim/sites/", { body: { name: "other", slug: "o" } });
      expect(r.status).toBe(201);
    } finally {
      await stop();
    }
    // a turn for about every other rule, not one for all of them
    expect(answered).toBeGreaterThanOrEqual(N / 4);
    expect(await jobs()).toBe(queued);
  });
});

describe("GraphQL variables are measured before they are coerced", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await makeTestApp();
  });
  afterAll(() => t.close());
  const query = "query($ids: [ID!]) { site_list(filters: {id: {in_list: $ids}}) { id } }";
  const ids = (n: number) => Array.from({ length: n }, (_, i) => String(i + 1));

  test("a list of 100,000 items answers 400 naming the limit, with a GraphQL error", async () => {
    const r = await t.json("POST", "/graphql/", {
      body: { query, variables: { ids: ids(100_000) } },
    });
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ error: "too_many_values", limit: MAX_GRAPHQL_VALUES });
    expect(r.body.errors[0].extensions.code).toBe("TOO_MANY_VALUES");
    expect(r.body.data).toBeUndefined();
    // as a GET's variables and a form's too
    const get = await t.json(
      "GET",
      `/graphql/?query=${encodeURIComponent(query)}&variables=${encodeURIComponent(JSON.stringify({ ids: ids(MAX_GRAPHQL_VALUES + 2) }))}`,
    );
    expect(get.status).toBe(400);
    const form = await t.req("POST", "/graphql/", {
      raw: new URLSearchParams({
        query,
        variables: JSON.stringify({ ids: ids(MAX_GRAPHQL_VALUES + 2) }),
      }).toString(),
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(form.status).toBe(400);
  });

  test("variables nested past the JSON depth limit answer 400", async () => {
    const deep = `${"[".repeat(100_000)}${"]".repeat(100_000)}`;
    const res = await t.req("POST", "/graphql/", {
      raw: `{"query":"{ __typename }","variables":{"a":${deep}}}`,
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: "json_too_deep", limit: MAX_JSON_DEPTH });
  });

  test("variables within the limits answer; commas in the query text do not count", async () => {
    const long = `${query.replace("{ id }", "{ id name slug }")}${" ".repeat(10)}`;
    const r = await t.json("POST", "/graphql/", {
      body: { query: long, variables: { ids: ids(50) } },
    });
    expect(r.status).toBe(200);
    expect(r.body.data.site_list).toEqual([]);
  });
});
