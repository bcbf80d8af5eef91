/**
 * The HTTP contract (DESIGN.md §4, §6), written once and run against every target that serves
 * the app: the Bun app in process and the Worker in workerd. Each target brings a driver.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import parsePrometheusTextFormat from "parse-prometheus-text-format";

/** Options of one request. `token: null` sends no Authorization header. */
export interface ContractRequestOptions {
  token?: string | null;
  /** Authorization scheme for `token`; default `Token`. */
  scheme?: string;
  body?: unknown;
  /** Sent as is instead of `body` (e.g. malformed JSON). */
  raw?: string;
  headers?: Record<string, string>;
}

/** One way of reaching the app over HTTP, plus what the suite needs to seed it. */
export interface ContractTarget {
  runtime: "bun" | "workerd";
  /** The database behind it: a local file, libSQL over HTTP, or Cloudflare D1 (default by runtime). */
  database?: "local" | "remote" | "d1";
  /** Origin that absolute URLs in responses start with. */
  base: string;
  /** `MAX_BODY_BYTES` the target was started with. */
  maxBodyBytes: number;
  request(method: string, path: string, opts?: ContractRequestOptions): Promise<Response>;
  /** Creates a superuser named `username` (outside HTTP) and returns a token for it. */
  superuserToken(username: string): Promise<string>;
  /**
   * A task worker beats once, as the runtime's own worker does (Bun: the worker loop; workerd: a
   * cron run). The target's health settings are {@link CONTRACT_HEALTH_SETTINGS}.
   */
  workerTick(): Promise<void>;
  /** Present when `REDIS_CACHING_URL` and `REDIS_TASKS_URL` point at a real Redis; `stop` takes it away. */
  redis?: { token: string; stop(): Promise<void> };
  close(): Promise<void>;
}

/** `PLUGINS_CONFIG.host_healthcheck_plugin` every target starts with. */
export const CONTRACT_HEALTH_SETTINGS = {
  groups: { core: ["Database"], redis: ["HostRedisCacheHealthCheck", "HostRedisTasksHealthCheck"] },
};

/** The `RequestInit` of a contract request (shared by every driver, so they send the same bytes). */
export function requestInit(method: string, opts: ContractRequestOptions = {}): RequestInit {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.token) headers.authorization = `${opts.scheme ?? "Token"} ${opts.token}`;
  let body: string | undefined;
  if (opts.raw !== undefined) body = opts.raw;
  else if (opts.body !== undefined) body = JSON.stringify(opts.body);
  if (body !== undefined && !headers["content-type"]) headers["content-type"] = "application/json";
  return { method, headers, body };
}

interface JsonResponse {
  status: number;
  body: any;
  res: Response;
}

const databaseOf = (t: ContractTarget) =>
  t.database ?? (t.runtime === "workerd" ? "remote" : "local");

/** Shared prefix of everything a suite creates, so two suites on one database never collide. */
const uniq = () => Math.random().toString(36).slice(2, 8);

/**
 * Registers the contract tests for one target.
 * @example contractSuite("bun", async () => bunTarget());
 */
export function contractSuite(
  label: string,
  setup: () => Promise<ContractTarget>,
  options: {
    /**
     * "batched" where only the schema documents an apply takes as one batch can be applied (D1,
     * decisions 0111 and 0119: adding types and fields, changing attributes and names, choice
     * sets, compound keys and checks, removals through the trash: 0120, retypes: 0126, relations
     * to types it creates: 0136; swaps, retargets and lists: 0142). It adds one test there: a swap
     * of two fields' names, 501 on D1 before 0142, applies. Types, fields and objects are one read
     * and one batch everywhere.
     */
    schemaApply?: "all" | "batched";
  } = {},
): void {
  let t: ContractTarget;
  let admin: string;
  const run = uniq();

  const req = (method: string, path: string, opts: ContractRequestOptions = {}) =>
    t.request(method, path, { ...opts, token: opts.token === undefined ? admin : opts.token });
  const json = async (
    method: string,
    path: string,
    opts: ContractRequestOptions = {},
  ): Promise<JsonResponse> => {
    const res = await req(method, path, opts);
    const text = await res.text();
    let body: unknown = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      throw new Error(`${method} ${path}: ${res.status} answered non-JSON: ${text.slice(0, 200)}`);
    }
    return { status: res.status, body, res };
  };
  const created = async (path: string, body: unknown) => {
    const r = await json("POST", path, { body });
    if (r.status !== 201) throw new Error(`POST ${path}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body;
  };

  describe(`HTTP contract on ${label}`, () => {
    beforeAll(async () => {
      t = await setup();
      admin = await t.superuserToken(`contract-${run}`);
    });
    afterAll(async () => {
      await t?.close();
    });

    describe("authentication", () => {
      test("missing token → 403 'Authentication credentials were not provided.'", async () => {
        const r = await json("GET", "/api/dcim/sites/", { token: null });
        expect(r.status).toBe(403);
        expect(r.body.detail).toBe("Authentication credentials were not provided.");
      });

      test("unknown or malformed token → 403 'Invalid token'", async () => {
        for (const opts of [{ token: "0".repeat(40) }, { token: "x", scheme: "Basic" }]) {
          const r = await json("GET", "/api/dcim/sites/", opts);
          expect(r.status).toBe(403);
          expect(r.body.detail).toBe("Invalid token");
        }
      });

      test("Token and Bearer schemes both authenticate", async () => {
        for (const scheme of ["Token", "Bearer"]) {
          expect((await req("GET", "/api/dcim/sites/", { scheme })).status).toBe(200);
        }
      });

      test("a token deleted through the API stops working at once (token cache invalidated)", async () => {
        const me = await json("GET", `/api/users/users/?username=contract-${run}`);
        const token = await created("/api/users/tokens/", {
          user: me.body.results[0].id,
          description: "short-lived",
        });
        const credential = `nbt_${token.key}.${token.token}`;
        expect((await req("GET", "/api/status/", { token: credential })).status).toBe(200);
        expect((await req("DELETE", `/api/users/tokens/${token.id}/`)).status).toBe(204);
        expect((await req("GET", "/api/status/", { token: credential })).status).toBe(403);
      });
    });

    describe("host models", () => {
      const facility = `fac-${run}`;
      let siteIds: number[] = [];

      beforeAll(async () => {
        const made = await created(
          "/api/dcim/sites/",
          Array.from({ length: 7 }, (_, i) => ({
            name: `${run} site ${i}`,
            slug: `${run}-site-${i}`,
            status: i % 3 === 0 ? "planned" : "active",
            facility,
            description: i % 2 === 0 ? `Core ${i}` : "",
          })),
        );
        siteIds = made.map((s: { id: number }) => s.id);
      });

      test("site CRUD: create 201, read with absolute url, PATCH, PUT, DELETE 204, then 404", async () => {
        const site = await created("/api/dcim/sites/", {
          name: `${run} crud`,
          slug: `${run}-crud`,
        });
        const read = await json("GET", `/api/dcim/sites/${site.id}/`);
        expect(read.status).toBe(200);
        expect(read.body).toMatchObject({
          id: site.id,
          url: `${t.base}/api/dcim/sites/${site.id}/`,
          display: `${run} crud`,
          status: { value: "active" },
        });
        expect(new Date(read.body.created).toISOString()).toBe(read.body.created);
        const patched = await json("PATCH", `/api/dcim/sites/${site.id}/`, {
          body: { description: "patched" },
        });
        expect(patched.status).toBe(200);
        expect(patched.body.description).toBe("patched");
        const put = await json("PUT", `/api/dcim/sites/${site.id}/`, {
          body: { name: `${run} crud2`, slug: `${run}-crud2` },
        });
        expect(put.status).toBe(200);
        expect(put.body.name).toBe(`${run} crud2`);
        expect((await req("DELETE", `/api/dcim/sites/${site.id}/`)).status).toBe(204);
        expect((await req("GET", `/api/dcim/sites/${site.id}/`)).status).toBe(404);
      });

      test("a change reverted from the change log: put back once, then 409 (decisions 0113, 0118, 0139)", async () => {
        const site = await created("/api/dcim/sites/", {
          name: `${run} undo`,
          slug: `${run}-undo`,
          description: "before",
        });
        const patched = await json("PATCH", `/api/dcim/sites/${site.id}/`, {
          body: { description: "after" },
        });
        expect(patched.status).toBe(200);
        // the record remembered or not (an isolate that never served it), the answers are the same
        const changes = await json(
          "GET",
          `/api/core/object-changes/?changed_object_type=dcim.site&changed_object_id=${site.id}&ordering=-id&limit=1&fields=id`,
        );
        const change = changes.body.results[0].id as number;
        const reverted = await json("POST", `/api/core/object-changes/${change}/revert/`);
        expect(reverted.status, JSON.stringify(reverted.body)).toBe(200);
        expect(reverted.body).toMatchObject({
          reverted_change: change,
          action: "update",
          changes: { description: { from: "after", to: "before" } },
          skipped: [],
        });
        const now = await json("GET", `/api/dcim/sites/${site.id}/`);
        expect(now.body.description).toBe("before");
        expect(reverted.body.object).toEqual(now.body);
        const again = await json("POST", `/api/core/object-changes/${change}/revert/`);
        expect(again.status, JSON.stringify(again.body)).toBe(409);
        expect(again.body.error).toBe("revert_conflict");
      });

      test("device CRUD with a nested site; a site its devices need cannot be deleted (409)", async () => {
        const site = await created("/api/dcim/sites/", { name: `${run} dc`, slug: `${run}-dc` });
        const dev = await created("/api/dcim/devices/", {
          name: `${run}-sw1`,
          site: site.id,
          serial: "S1",
        });
        expect(dev.site).toMatchObject({
          id: site.id,
          url: `${t.base}/api/dcim/sites/${site.id}/`,
          slug: `${run}-dc`,
        });
        const patched = await json("PATCH", `/api/dcim/devices/${dev.id}/`, {
          body: { serial: "S2" },
        });
        expect(patched.body.serial).toBe("S2");
        expect((await json("GET", `/api/dcim/devices/?site_id=${site.id}`)).body.count).toBe(1);
        expect((await json("DELETE", `/api/dcim/sites/${site.id}/`)).status).toBe(409);
        expect((await req("DELETE", `/api/dcim/devices/${dev.id}/`)).status).toBe(204);
        expect((await req("DELETE", `/api/dcim/sites/${site.id}/`)).status).toBe(204);
      });

      test("pagination: count, limit/offset, absolute next/previous that keep the filters", async () => {
        const first = await json("GET", `/api/dcim/sites/?facility=${facility}&limit=3`);
        expect(first.body.count).toBe(7);
        expect(first.body.results.length).toBe(3);
        expect(first.body.previous).toBeNull();
        expect(first.body.next).toBe(
          `${t.base}/api/dcim/sites/?facility=${facility}&limit=3&offset=3`,
        );
        const seen: number[] = [];
        let next: string | null = `/api/dcim/sites/?facility=${facility}&limit=3`;
        for (let page = 0; next && page < 10; page++) {
          const r: JsonResponse = await json("GET", next.replace(t.base, ""));
          seen.push(...r.body.results.map((s: { id: number }) => s.id));
          next = r.body.next;
        }
        expect(seen.sort((a, b) => a - b)).toEqual([...siteIds].sort((a, b) => a - b));
        const last = await json("GET", `/api/dcim/sites/?facility=${facility}&limit=3&offset=6`);
        expect(last.body.previous).toBe(
          `${t.base}/api/dcim/sites/?facility=${facility}&limit=3&offset=3`,
        );
        expect(last.body.next).toBeNull();
        expect((await json("GET", "/api/dcim/sites/?limit=abc")).status).toBe(400);
      });

      test("filters: exact, choice, lookups, id lists, q and ordering", async () => {
        const count = async (qs: string) => {
          const r = await json("GET", `/api/dcim/sites/?facility=${facility}&${qs}`);
          if (r.status !== 200) throw new Error(`${qs}: ${r.status} ${JSON.stringify(r.body)}`);
          return r.body.count as number;
        };
        expect(await count("status=planned")).toBe(3);
        expect(await count("status__n=planned")).toBe(4);
        expect(await count("description__ic=core")).toBe(4);
        expect(await count("description__empty=true")).toBe(3);
        expect(await count(`id=${siteIds[0]}&id=${siteIds[1]}`)).toBe(2);
        expect(await count(`id__gte=${siteIds[2]}`)).toBe(5);
        expect(await count(`name__iew=${" site 6".toUpperCase()}`)).toBe(1);
        expect(await count(`q=${run}-site-5`)).toBe(1);
        const ordered = await json(
          "GET",
          `/api/dcim/sites/?facility=${facility}&ordering=-name&limit=2&fields=id,name`,
        );
        expect(ordered.body.results).toEqual([
          { id: siteIds[6], name: `${run} site 6` },
          { id: siteIds[5], name: `${run} site 5` },
        ]);
        expect((await json("GET", "/api/dcim/sites/?name__gt=a")).status).toBe(400);
      });

      test("bulk create is all-or-nothing, with errors per item", async () => {
        const before = (await json("GET", `/api/dcim/sites/?facility=${facility}`)).body.count;
        const r = await json("POST", "/api/dcim/sites/", {
          body: [
            { name: `${run} bulk ok`, slug: `${run}-bulk-ok`, facility },
            { name: `${run} bulk bad`, slug: "not a slug!", facility },
          ],
        });
        expect(r.status).toBe(400);
        expect(r.body.errors.map((e: { index: number }) => e.index)).toEqual([1]);
        expect(r.body.errors[0].errors.slug).toBeDefined();
        expect((await json("GET", `/api/dcim/sites/?facility=${facility}`)).body.count).toBe(
          before,
        );
      });

      test("bulk update and bulk delete are all-or-nothing", async () => {
        const [a, b] = (
          await created("/api/tenancy/tenants/", [
            { name: `${run} T1`, slug: `${run}-t1` },
            { name: `${run} T2`, slug: `${run}-t2` },
          ])
        ).map((x: { id: number }) => x.id);
        const bad = await json("PATCH", "/api/tenancy/tenants/", {
          body: [
            { id: a, description: "one" },
            { id: b, slug: "no good!" },
          ],
        });
        expect(bad.status).toBe(400);
        expect((await json("GET", `/api/tenancy/tenants/${a}/`)).body.description).toBe("");
        const good = await json("PATCH", "/api/tenancy/tenants/", {
          body: [
            { id: a, description: "one" },
            { id: b, description: "two" },
          ],
        });
        expect(good.status).toBe(200);
        expect(good.body.map((x: { description: string }) => x.description)).toEqual([
          "one",
          "two",
        ]);
        // NetBox 4.7: a list naming an object that is not there is a 400 naming it (0200)
        const missing = await json("DELETE", "/api/tenancy/tenants/", {
          body: [{ id: a }, { id: 987654321 }],
        });
        expect(missing.status).toBe(400);
        expect(missing.body.errors).toEqual([
          { id: 987654321, errors: { id: ["Object with ID 987654321 does not exist"] } },
        ]);
        expect((await req("GET", `/api/tenancy/tenants/${a}/`)).status).toBe(200);
        expect(
          (await req("DELETE", "/api/tenancy/tenants/", { body: [{ id: a }, { id: b }] })).status,
        ).toBe(204);
        expect((await req("GET", `/api/tenancy/tenants/${b}/`)).status).toBe(404);
      });

      test("paths without the trailing slash reach the same handlers", async () => {
        expect((await req("GET", "/api/dcim/sites")).status).toBe(200);
        expect((await req("GET", `/api/dcim/sites/${siteIds[0]}`)).status).toBe(200);
      });
    });

    describe("host models with write hooks (one read and one batch: D1 too, decision 0092)", () => {
      /** Creates, PATCHes and deletes one object: each answer is the object as GET reads it. */
      async function roundTrip(path: string, body: unknown, patch: Record<string, unknown>) {
        const made = await created(path, body);
        expect((await json("GET", `${path}${made.id}/`)).body).toEqual(made);
        const patched = await json("PATCH", `${path}${made.id}/`, { body: patch });
        expect(patched.status, JSON.stringify(patched.body)).toBe(200);
        expect((await json("GET", `${path}${made.id}/`)).body).toEqual(patched.body);
        return { made, patched: patched.body };
      }

      test("tags, groups, users, permissions, owners, owner groups: create, PATCH, DELETE", async () => {
        const tag = await roundTrip(
          "/api/extras/tags/",
          { name: `${run} tag`, slug: `${run}-tag`, object_types: ["dcim.site"] },
          { object_types: ["dcim.site", "dcim.device"] },
        );
        expect(tag.patched.object_types).toEqual(["dcim.device", "dcim.site"]);
        // NetBox 4.6's add_tags / remove_tags ride in the same read and batch
        const site = await created("/api/dcim/sites/", {
          name: `${run} tagged`,
          slug: `${run}-tagged`,
          add_tags: [{ slug: `${run}-tag` }],
        });
        expect(site.tags.map((x: { id: number }) => x.id)).toEqual([tag.made.id]);
        const untagged = await json("PATCH", `/api/dcim/sites/${site.id}/`, {
          body: { remove_tags: [tag.made.id] },
        });
        expect(untagged.body.tags).toEqual([]);
        expect((await req("DELETE", `/api/dcim/sites/${site.id}/`)).status).toBe(204);
        const group = await created("/api/users/groups/", { name: `${run} group` });
        const user = await roundTrip(
          "/api/users/users/",
          { username: `${run}-u`, password: "contract-password-1", groups: [group.id] },
          { first_name: "C", groups: [] },
        );
        expect(user.made.groups.map((g: { id: number }) => g.id)).toEqual([group.id]);
        expect(user.patched.groups).toEqual([]);
        const perm = await roundTrip(
          "/api/users/permissions/",
          {
            name: `${run} perm`,
            actions: ["view"],
            object_types: ["dcim.site"],
            groups: [group.id],
            users: [user.made.id],
          },
          { actions: ["view", "change"], users: [] },
        );
        expect(perm.patched.groups.map((g: { id: number }) => g.id)).toEqual([group.id]);
        const ownerGroup = await roundTrip(
          "/api/users/owner-groups/",
          { name: `${run} og` },
          { description: "owners" },
        );
        const owner = await roundTrip(
          "/api/users/owners/",
          { name: `${run} owner`, group: ownerGroup.made.id, users: [user.made.id] },
          { user_groups: [group.id] },
        );
        expect(owner.patched.users.map((u: { id: number }) => u.id)).toEqual([user.made.id]);
        const bulk = await created(
          "/api/extras/tags/",
          [1, 2].map((i) => ({ name: `${run} bulk ${i}`, slug: `${run}-bulk-${i}` })),
        );
        for (const [path, id] of [
          ["/api/users/owners/", owner.made.id],
          ["/api/users/owner-groups/", ownerGroup.made.id],
          ["/api/users/permissions/", perm.made.id],
          ["/api/users/users/", user.made.id],
          ["/api/extras/tags/", tag.made.id],
          ...bulk.map((b: { id: number }) => ["/api/extras/tags/", b.id]),
        ] as Array<[string, number]>) {
          expect((await req("DELETE", `${path}${id}/`)).status).toBe(204);
          expect((await req("GET", `${path}${id}/`)).status).toBe(404);
        }
      });

      test("a background bulk write is queued in one atomic write (202) and the worker does it", async () => {
        const r = await json("POST", "/api/extras/tags/?background=true", {
          body: [{ name: `${run} queued`, slug: `${run}-queued` }],
        });
        expect(r.status, JSON.stringify(r.body)).toBe(202);
        let job: { status: { value: string }; data: { status_code: number } } | null = null;
        // bounded: each tick runs the worker (Bun) or the cron handler (workerd) once
        for (let tick = 0; tick < 20 && !job; tick++) {
          await t.workerTick();
          const now = (await json("GET", `/api/core/jobs/${r.body.job.id}/`)).body;
          if (["completed", "errored", "failed"].includes(now.status.value)) job = now;
        }
        expect(job?.status.value).toBe("completed");
        expect(job?.data.status_code).toBe(201);
        const made = await json("GET", `/api/extras/tags/?slug=${run}-queued`);
        expect(made.body.count).toBe(1);
        expect((await req("DELETE", `/api/extras/tags/${made.body.results[0].id}/`)).status).toBe(
          204,
        );
      });

      test("webhooks and event rules: create, PATCH, DELETE (a called webhook is protected)", async () => {
        const hook = await roundTrip(
          "/api/extras/webhooks/",
          { name: `${run} hook`, payload_url: "https://example.com/contract" },
          { description: "patched" },
        );
        const rule = await roundTrip(
          "/api/extras/event-rules/",
          {
            name: `${run} rule`,
            // disabled: nothing in the suite is delivered to it
            enabled: false,
            object_types: ["dcim.site"],
            event_types: ["object_created"],
            action_object_type: "extras.webhook",
            action_object_id: hook.made.id,
          },
          { object_types: ["dcim.site", "dcim.device"] },
        );
        expect(rule.made.action_object).toMatchObject({ id: hook.made.id });
        expect((await req("DELETE", `/api/extras/webhooks/${hook.made.id}/`)).status).toBe(409);
        expect((await req("DELETE", `/api/extras/event-rules/${rule.made.id}/`)).status).toBe(204);
        expect((await req("DELETE", `/api/extras/webhooks/${hook.made.id}/`)).status).toBe(204);
      });
    });

    describe("error shapes", () => {
      test("malformed JSON → 400 with detail", async () => {
        const r = await json("POST", "/api/dcim/sites/", { raw: "{nope" });
        expect(r.status).toBe(400);
        expect(r.body.detail).toContain("JSON parse error");
      });

      test("validation → 400 keyed by field", async () => {
        const r = await json("POST", "/api/dcim/sites/", {
          body: { name: "", slug: "bad slug!", status: "melting" },
        });
        expect(r.status).toBe(400);
        expect(Object.keys(r.body).sort()).toEqual(["name", "slug", "status"]);
      });

      test("unknown path → 404 JSON; unknown id → 404", async () => {
        const r = await json("GET", "/api/dcim/nothing-here/");
        expect(r.status).toBe(404);
        expect(r.body.detail).toBe("Not found.");
        expect((await json("GET", "/nowhere")).status).toBe(404);
        for (const id of ["abc", "99999999999999999999", "987654321"])
          expect((await json("GET", `/api/dcim/sites/${id}/`)).status).toBe(404);
      });

      test("wrong method → 405 with Allow", async () => {
        const r = await json("POST", "/api/dcim/sites/1/", { body: {} });
        expect(r.status).toBe(405);
        expect(r.res.headers.get("allow")).toContain("PATCH");
      });

      test("oversized body → 413 JSON", async () => {
        const r = await json("POST", "/api/dcim/sites/", {
          body: { name: "x".repeat(t.maxBodyBytes + 10), slug: "big" },
        });
        expect(r.status).toBe(413);
        expect(r.body.detail).toContain(String(t.maxBodyBytes));
      });
    });

    describe("core endpoints", () => {
      test("/api/status/ reports the runtime, database kind, cache backend and plugins", async () => {
        const r = await json("GET", "/api/status/");
        expect(r.status).toBe(200);
        expect(r.body.runtime).toStartWith(t.runtime);
        expect(r.body["database-kind"]).toBe(databaseOf(t));
        if (t.runtime === "workerd") expect(r.body["cache-backend"]).toBe("kv");
        expect(r.body.plugins).toEqual({
          custom_objects: "0.1.0",
          host_healthcheck_plugin: "0.1.0",
        });
        expect((await json("GET", "/api/status/", { token: null })).status).toBe(403);
      });

      test("/api/ root lists absolute URLs of the sections", async () => {
        const r = await json("GET", "/api/");
        expect(r.body.dcim).toBe(`${t.base}/api/dcim/`);
      });
    });

    const batchedOnly = options.schemaApply === "batched";
    describe("custom objects plugin", () => {
      const CO = "/api/plugins/custom-objects";
      const slug = `kit_${run}`;
      let cotId: number;
      let siteId: number;
      let deviceIds: number[];

      const instance = (extra: Record<string, unknown> = {}) => ({
        title: "Alpha",
        notes: "multi\nline",
        count: 7,
        price: 12.5,
        enabled: true,
        day: "2024-02-29",
        moment: "2024-03-01T10:20:30Z",
        link: "https://example.test/x?q=1",
        blob: { nested: [1, "two", null] },
        speed: "fast",
        speeds: ["slow", "fast"],
        site: siteId,
        devices: deviceIds,
        ...extra,
      });

      beforeAll(async () => {
        await created("/api/extras/custom-field-choice-sets/", {
          name: `speeds-${run}`,
          extra_choices: [
            ["slow", "Slow"],
            ["fast", "Fast"],
          ],
        });
        const site = await created("/api/dcim/sites/", { name: `${run} co`, slug: `${run}-co` });
        siteId = site.id;
        deviceIds = (
          await created("/api/dcim/devices/", [
            { name: `${run}-co-d1`, site: siteId },
            { name: `${run}-co-d2`, site: siteId },
          ])
        ).map((d: { id: number }) => d.id);
      });

      test("a COT with one field of each of the 13 types", async () => {
        const cot = await created(`${CO}/custom-object-types/`, {
          name: slug,
          slug,
          verbose_name: "Kit",
        });
        cotId = cot.id;
        expect(cot.object_type).toMatchObject({ app_label: "custom_objects", model: slug });
        const fields: Array<Record<string, unknown>> = [
          { name: "title", type: "text", primary: true, required: true, unique: true },
          { name: "notes", type: "longtext" },
          { name: "count", type: "integer", validation_minimum: 0, validation_maximum: 100 },
          { name: "price", type: "decimal" },
          { name: "enabled", type: "boolean", default: false },
          { name: "day", type: "date" },
          { name: "moment", type: "datetime" },
          { name: "link", type: "url" },
          { name: "blob", type: "json" },
          { name: "speed", type: "select", choice_set: `speeds-${run}` },
          { name: "speeds", type: "multiselect", choice_set: `speeds-${run}` },
          {
            name: "site",
            type: "object",
            related_object_type: "dcim.site",
            on_delete_behavior: "set_null",
          },
          { name: "devices", type: "multiobject", related_object_type: "dcim.device" },
        ];
        for (const f of fields)
          await created(`${CO}/custom-object-type-fields/`, { custom_object_type: cotId, ...f });
        const read = await json("GET", `${CO}/custom-object-types/${cotId}/`);
        expect(read.body.fields.map((f: { type: string }) => f.type).sort()).toEqual(
          fields.map((f) => f.type as string).sort(),
        );
        const root = await json("GET", `${CO}/`);
        expect(root.body[slug]).toBe(`${t.base}${CO}/${slug}/`);
      });

      test("instance CRUD round-trips every field type", async () => {
        const made = await created(`${CO}/${slug}/`, instance());
        const r = await json("GET", `${CO}/${slug}/${made.id}/`);
        expect(r.status).toBe(200);
        // every value comes back as sent; the time in full, relations as nested objects
        const { devices: _ids, ...sent } = instance();
        expect(r.body).toMatchObject({
          ...sent,
          id: made.id,
          url: `${t.base}${CO}/${slug}/${made.id}/`,
          display: "Alpha",
          custom_object_type: { id: cotId, slug },
          moment: "2024-03-01T10:20:30.000Z",
          site: { id: siteId, url: `${t.base}/api/dcim/sites/${siteId}/` },
        });
        expect(r.body.devices.map((d: { id: number }) => d.id)).toEqual(deviceIds);
        const patched = await json("PATCH", `${CO}/${slug}/${made.id}/`, {
          body: { count: 8, devices: [deviceIds[1]] },
        });
        expect(patched.status).toBe(200);
        expect(patched.body.count).toBe(8);
        expect(patched.body.devices.map((d: { id: number }) => d.id)).toEqual([deviceIds[1]]);
        expect(patched.body.title).toBe("Alpha");
        const list = await json("GET", `${CO}/${slug}/?title=Alpha`);
        expect(list.body.count).toBe(1);
        const bad = await json("POST", `${CO}/${slug}/`, {
          body: instance({ title: "Alpha", count: 1000, speed: "warp" }),
        });
        expect(bad.status).toBe(400);
        expect(Object.keys(bad.body).sort()).toEqual(["count", "speed", "title"]);
        expect((await req("DELETE", `${CO}/${slug}/${made.id}/`)).status).toBe(204);
        expect((await req("GET", `${CO}/${slug}/${made.id}/`)).status).toBe(404);
        expect((await req("GET", `${CO}/no_such_${run}/`)).status).toBe(404);
      });

      test("linked-objects: one row per (object, field); 400 bad params; 404 unknown id", async () => {
        const a = await created(`${CO}/${slug}/`, instance({ title: "Linked A" }));
        await created(`${CO}/${slug}/`, instance({ title: "Linked B", site: null, devices: [] }));
        const L = `${CO}/linked-objects/`;
        const r = await json("GET", `${L}?object_type=dcim.site&object_id=${siteId}`);
        expect(r.status).toBe(200);
        expect(r.body.count).toBe(1);
        expect(r.body.results[0]).toMatchObject({
          custom_object_type: { id: cotId, slug },
          field_name: "site",
          object: { id: a.id, title: "Linked A" },
        });
        const viaDevice = await json(
          "GET",
          `${L}?object_type=dcim.device&object_id=${deviceIds[0]}`,
        );
        expect(viaDevice.body.results.map((x: { field_name: string }) => x.field_name)).toEqual([
          "devices",
        ]);
        expect((await json("GET", L)).status).toBe(400);
        expect((await json("GET", `${L}?object_type=dcim.site&object_id=abc`)).status).toBe(400);
        expect((await json("GET", `${L}?object_type=nothing.here&object_id=1`)).status).toBe(400);
        expect((await json("GET", `${L}?object_type=dcim.site&object_id=987654321`)).status).toBe(
          404,
        );
      });

      if (batchedOnly)
        test("a swap of two fields' names runs without the transaction (decision 0142)", async () => {
          // it took the transaction (501 here) until 0142 staged it through free names
          const swap = (first: string, second: string) => ({
            schema_version: "1",
            types: [
              {
                name: `nope_${run}`,
                slug: `nope_${run}`,
                fields: [
                  { id: 1, name: first, type: "text" },
                  { id: 2, name: second, type: "text" },
                ],
              },
            ],
          });
          const made = await json("POST", `${CO}/schema/apply/`, {
            body: { schema: swap("a", "b") },
          });
          expect(made.status, JSON.stringify(made.body)).toBe(200);
          const r = await json("POST", `${CO}/schema/apply/`, { body: { schema: swap("b", "a") } });
          expect(r.status, JSON.stringify(r.body)).toBe(200);
          const kept = await json("GET", `${CO}/schema/export?slug=nope_${run}`);
          expect(kept.body.types[0].fields.map((f: { name: string }) => f.name)).toEqual([
            "b",
            "a",
          ]);
        });

      test("schema documents: preview writes nothing, apply, re-apply unchanged, destructive → 409 until allowed", async () => {
        const sslug = `net_${run}`;
        const typeDoc = (fields: unknown[], removed?: unknown[]) => ({
          schema_version: "1",
          types: [
            { name: sslug, slug: sslug, fields, ...(removed ? { removed_fields: removed } : {}) },
          ],
        });
        const cid = { id: 1, name: "cid", type: "text", primary: true, required: true };
        const legacy = { id: 2, name: "legacy", type: "text" };
        const site = { id: 3, name: "site", type: "object", related_object_type: "dcim/site" };
        const v1 = typeDoc([cid, legacy, site]);

        const preview = await json("POST", `${CO}/schema/preview/`, { body: v1 });
        expect(preview.status).toBe(200);
        expect(preview.body.diffs[0]).toMatchObject({
          slug: sslug,
          is_new: true,
          has_changes: true,
        });
        expect((await req("GET", `${CO}/${sslug}/`)).status).toBe(404);

        const applied = await json("POST", `${CO}/schema/apply/`, { body: { schema: v1 } });
        expect(applied.status, JSON.stringify(applied.body)).toBe(200);
        expect(applied.body.applied).toBe(true);
        expect(applied.body.diffs).toEqual(preview.body.diffs);
        const inst = await created(`${CO}/${sslug}/`, { cid: "C1", legacy: "old", site: siteId });
        expect(inst.site).toMatchObject({ id: siteId });
        const again = await json("POST", `${CO}/schema/apply/`, { body: { schema: v1 } });
        expect(
          again.body.diffs.every((d: { has_changes: boolean }) => d.has_changes === false),
        ).toBe(true);

        const v2 = typeDoc([cid, site], [legacy]);
        const refused = await json("POST", `${CO}/schema/apply/`, { body: { schema: v2 } });
        expect(refused.status).toBe(409);
        expect(refused.body).toMatchObject({
          error: "destructive_changes",
          destructive_slugs: [sslug],
        });
        expect((await json("GET", `${CO}/${sslug}/${inst.id}/`)).body.legacy).toBe("old");
        const allowed = await json("POST", `${CO}/schema/apply/`, {
          body: { schema: v2, allow_destructive: true },
        });
        // a removal goes through the trash: one batch on D1 too (decision 0120)
        expect(allowed.status, JSON.stringify(allowed.body)).toBe(200);
        expect((await json("GET", `${CO}/${sslug}/${inst.id}/`)).body).not.toHaveProperty("legacy");

        const invalid = await json("POST", `${CO}/schema/apply/`, {
          body: { schema: { schema_version: "2", types: [] } },
        });
        expect(invalid.status).toBe(400);
        expect(invalid.body.error).toBe("invalid_schema");
        expect(
          (await json("POST", `${CO}/schema/preview/`, { body: v1, token: null })).status,
        ).toBe(403);
      });

      test("the schema trash: removed fields and types keep their data, restore brings them back, purge drops them", async () => {
        const tslug = `bin_${run}`;
        const code = { id: 1, name: "code", type: "text" };
        const note = { id: 2, name: "note", type: "text" };
        const parts = {
          id: 3,
          name: "parts",
          type: "multiobject",
          related_object_type: "dcim/site",
        };
        const typeDoc = (fields: unknown[], removed?: unknown[]) => ({
          schema_version: "1",
          types: [
            { name: tslug, slug: tslug, fields, ...(removed ? { removed_fields: removed } : {}) },
          ],
        });
        const apply = (body: unknown) => json("POST", `${CO}/schema/apply/`, { body });
        expect((await apply({ schema: typeDoc([code, note, parts]) })).status).toBe(200);
        const a = await created(`${CO}/${tslug}/`, { code: "A", note: "kept", parts: [siteId] });
        await created(`${CO}/${tslug}/`, { code: "B" });
        const gone = await apply({
          schema: typeDoc([code], [note, parts]),
          allow_destructive: true,
        });
        expect(gone.status, JSON.stringify(gone.body)).toBe(200);
        expect((await json("GET", `${CO}/${tslug}/${a.id}/`)).body).not.toHaveProperty("note");
        const listed = await json("GET", `${CO}/schema/trash/?slug=${tslug}`);
        expect(
          listed.body.results.map((r: { name: string; rows: number }) => [r.name, r.rows]),
        ).toEqual([
          ["note", 1],
          ["parts", 1],
        ]);
        for (const entry of listed.body.results)
          expect((await json("POST", `${CO}/schema/trash/${entry.id}/restore/`)).status).toBe(200);
        const back = await json("GET", `${CO}/${tslug}/${a.id}/`);
        expect(back.body.note).toBe("kept");
        expect(back.body.parts.map((p: { id: number }) => p.id)).toEqual([siteId]);

        // a whole type: to the trash with its rows, back, then purged for good
        const removal = { schema_version: "1", types: [], removed_types: [{ slug: tslug }] };
        const removed = await apply({ schema: removal, allow_destructive: true });
        expect(removed.status, JSON.stringify(removed.body)).toBe(200);
        expect(removed.body.trash).toHaveLength(1);
        expect((await req("GET", `${CO}/${tslug}/`)).status).toBe(404);
        const entry = removed.body.trash[0];
        expect((await json("POST", `${CO}/schema/trash/${entry}/restore/`)).status).toBe(200);
        expect((await json("GET", `${CO}/${tslug}/${a.id}/`)).body.code).toBe("A");
        const again = await apply({ schema: removal, allow_destructive: true });
        expect(again.status).toBe(200);
        expect((await req("DELETE", `${CO}/schema/trash/${again.body.trash[0]}/`)).status).toBe(
          204,
        );
        expect((await json("GET", `${CO}/schema/trash/?slug=${tslug}`)).body.count).toBe(0);
        expect(
          (await json("POST", `${CO}/schema/trash/${again.body.trash[0]}/restore/`)).status,
        ).toBe(404);
      });

      test("schema safety (issue 16): counted gates, stale plans, the trash restores data, unique_together, bundles round-trip", async () => {
        const slug = `safe_${run}`;
        const setName = `grades-${run}`;
        const bundle = (
          fields: unknown[],
          extra: Record<string, unknown> = {},
          removed?: unknown[],
        ) => ({
          schema_version: "1",
          choice_sets: [
            {
              name: setName,
              extra_choices: [
                ["a", "A"],
                ["b", "B"],
              ],
            },
          ],
          types: [
            {
              name: slug,
              slug,
              fields,
              ...extra,
              ...(removed ? { removed_fields: removed } : {}),
            },
          ],
        });
        const code = { id: 1, name: "code", type: "text" };
        const grade = { id: 2, name: "grade", type: "select", choice_set: setName };
        const note = { id: 3, name: "note", type: "text" };
        const v1 = bundle([code, grade, note], { unique_together: [["code", "grade"]] });
        const p1 = await json("POST", `${CO}/schema/preview/`, { body: v1 });
        expect(p1.status).toBe(200);
        const plan = p1.body.plan_id as string;
        expect(plan).toMatch(/^[0-9a-f]{32}\.[0-9a-f]{32}$/);
        expect(
          (await json("POST", `${CO}/schema/apply/`, { body: { schema: v1, plan_id: plan } }))
            .status,
        ).toBe(200);
        // the same plan again: the database moved since its preview
        const stale = await json("POST", `${CO}/schema/apply/`, {
          body: { schema: v1, plan_id: plan },
        });
        expect(stale.status).toBe(409);
        expect(stale.body.error).toBe("stale_plan");

        const a = await created(`${CO}/${slug}/`, { code: "X", grade: "a", note: "first" });
        await created(`${CO}/${slug}/`, { code: "Y", grade: "b", note: "second" });
        const dup = await json("POST", `${CO}/${slug}/`, { body: { code: "X", grade: "a" } });
        expect(dup.status).toBe(400);
        expect(Object.keys(dup.body).sort()).toEqual(["code", "grade"]);

        // gates name slug, field, reason and rows; nothing changes
        const narrowed = {
          ...bundle([code, grade], { unique_together: [["code", "grade"]] }, [note]),
          choice_sets: [{ name: setName, extra_choices: [["a", "A"]] }],
        };
        const refused = await json("POST", `${CO}/schema/apply/`, { body: { schema: narrowed } });
        expect(refused.status).toBe(409);
        expect(refused.body.error).toBe("destructive_changes");
        const reasons = (
          refused.body.destructive_changes as Array<{
            slug: string;
            field: string;
            reason: string;
            rows: number;
          }>
        )
          .map((g) => `${g.slug}.${g.field}:${g.reason}:${g.rows}`)
          .sort();
        expect(reasons).toEqual([`${slug}.grade:choices_in_use:1`, `${slug}.note:field_removed:2`]);

        // removal with allow_destructive goes to the trash; restore brings the values back
        const removed = await json("POST", `${CO}/schema/apply/`, {
          body: {
            schema: bundle([code, grade], { unique_together: [["code", "grade"]] }, [note]),
            allow_destructive: true,
          },
        });
        // choice sets and compound keys are batched (decision 0119), the trash too (0120)
        await trashAndRestore(removed, a.id);
        // the export carries unique_together and the choice set, and round-trips with no changes
        const exported = await json("GET", `${CO}/schema/export/?slug=${slug}`);
        expect(exported.body.types[0].unique_together).toEqual([["code", "grade"]]);
        expect(exported.body.choice_sets).toEqual([
          {
            name: setName,
            extra_choices: [
              ["a", "A"],
              ["b", "B"],
            ],
          },
        ]);
        const again = await json("POST", `${CO}/schema/apply/`, {
          body: { schema: exported.body },
        });
        expect(again.status).toBe(200);
        expect(again.body.diffs.every((d: { has_changes: boolean }) => !d.has_changes)).toBe(true);
      });
      /** "schema safety": field `note` of object `id` went to the trash; restoring brings it back. */
      async function trashAndRestore(removed: { status: number }, id: number) {
        const slug = `safe_${run}`;
        expect(removed.status).toBe(200);
        expect((await json("GET", `${CO}/${slug}/${id}/`)).body).not.toHaveProperty("note");
        const trash = await json("GET", `${CO}/schema/trash/?slug=${slug}`);
        expect(trash.body.results).toEqual([
          expect.objectContaining({ kind: "field", name: "note", rows: 2 }),
        ]);
        expect(
          (await json("POST", `${CO}/schema/trash/${trash.body.results[0].id}/restore/`)).status,
        ).toBe(200);
        expect((await json("GET", `${CO}/${slug}/${id}/`)).body.note).toBe("first");
      }
    });

    describe("health check plugin", () => {
      const path = "/plugins/host_healthcheck_plugin/healthcheck/?format=json";

      test("anonymous JSON: all four checks working, 200, no-store", async () => {
        if (!t.redis)
          throw new Error(`the ${label} target must be started with Redis for this suite`);
        const r = await json("GET", path, { token: null });
        expect(r.body).toEqual({
          status: "working",
          checks: {
            Database: "working",
            CacheBackend: "working",
            HostRedisCacheHealthCheck: "working",
            HostRedisTasksHealthCheck: "working",
          },
        });
        expect(r.status).toBe(200);
        expect(r.res.headers.get("cache-control")).toBe("no-store");
      });

      test("HTML for browsers (server-rendered JSX)", async () => {
        const res = await req("GET", "/plugins/host_healthcheck_plugin/healthcheck/", {
          token: null,
          headers: { accept: "text/html" },
        });
        expect(res.status).toBe(200);
        expect(res.headers.get("content-type")).toStartWith("text/html");
        const html = await res.text();
        for (const id of [
          "Database",
          "CacheBackend",
          "HostRedisCacheHealthCheck",
          "HostRedisTasksHealthCheck",
        ])
          expect(html).toContain(id);
      });

      test("groups and ?exclude= run only the chosen checks; an unknown group is 404", async () => {
        const core = await json(
          "GET",
          "/plugins/host_healthcheck_plugin/healthcheck/core/?format=json",
          { token: null },
        );
        expect(core.status).toBe(200);
        expect(core.body).toEqual({ status: "working", checks: { Database: "working" } });
        const redis = await json(
          "GET",
          "/plugins/host_healthcheck_plugin/healthcheck/redis/?format=json&exclude=HostRedisTasksHealthCheck",
          { token: null },
        );
        expect(redis.body).toEqual({
          status: "working",
          checks: { HostRedisCacheHealthCheck: "working" },
        });
        expect((await json("GET", `${path}&exclude=Nope`, { token: null })).status).toBe(400);
        expect(
          (
            await json("GET", "/plugins/host_healthcheck_plugin/healthcheck/nope/?format=json", {
              token: null,
            })
          ).status,
        ).toBe(404);
        expect((await json("GET", "/readyz?exclude=CacheBackend", { token: null })).body).toEqual({
          status: "ready",
        });
      });

      test("health+json observes the database driver and latency; a worker's beat shows in the queue figures", async () => {
        await t.workerTick();
        const r = await json(
          "GET",
          "/plugins/host_healthcheck_plugin/healthcheck/?format=health%2Bjson",
          { token: null },
        );
        expect(r.status).toBe(200);
        const values = (id: string) =>
          Object.fromEntries(
            (r.body.checks[id] as Array<{ measurementName?: string; observedValue: unknown }>)
              .filter((e) => e.measurementName)
              .map((e) => [e.measurementName, e.observedValue]),
          );
        const db = values("Database");
        expect(db.driver).toBe({ local: "file", remote: "libsql", d1: "d1" }[databaseOf(t)]);
        expect(db.latency as number).toBeGreaterThanOrEqual(0);
        const queue = values("HostRedisTasksHealthCheck");
        expect(queue).toMatchObject({
          queue_depth: expect.any(Number),
          pending_jobs: expect.any(Number),
          worker_runtime: t.runtime,
        });
        expect(queue.worker_heartbeat_age as number).toBeLessThan(30);
      });

      test("OpenMetrics parses with a Prometheus text parser: up, per check up and duration, queue figures", async () => {
        const res = await req("GET", "/plugins/host_healthcheck_plugin/healthcheck/", {
          token: null,
          headers: { accept: "application/openmetrics-text; version=1.0.0" },
        });
        expect(res.status).toBe(200);
        expect(res.headers.get("content-type")).toStartWith("application/openmetrics-text");
        const text = await res.text();
        expect(text.endsWith("# EOF\n")).toBe(true);
        const families = parsePrometheusTextFormat(text);
        const value = (name: string, check?: string) =>
          families
            .find((f) => f.name === name)
            ?.metrics.find((m) => !check || m.labels?.check === check)?.value;
        expect(value("host_health_up")).toBe("1");
        for (const id of [
          "Database",
          "CacheBackend",
          "HostRedisCacheHealthCheck",
          "HostRedisTasksHealthCheck",
        ]) {
          expect(value("host_health_check_up", id)).toBe("1");
          expect(Number(value("host_health_check_duration_seconds", id))).toBeGreaterThanOrEqual(0);
        }
        expect(
          Number(value("host_health_observed_queue_depth", "HostRedisTasksHealthCheck")),
        ).toBeGreaterThanOrEqual(0);
        expect(
          Number(
            value("host_health_observed_worker_heartbeat_age_seconds", "HostRedisTasksHealthCheck"),
          ),
        ).toBeGreaterThanOrEqual(0);
      });

      // Last in the suite: it takes Redis away.
      test("Redis stopped → 500, both Redis checks 'unavailable: …', the database still working", async () => {
        await t.redis!.stop();
        const r = await json("GET", path, { token: null });
        expect(r.status).toBe(500);
        expect(r.body.status).not.toBe("working");
        expect(r.body.checks.Database).toBe("working");
        expect(r.body.checks.HostRedisCacheHealthCheck).toStartWith("unavailable: ");
        expect(r.body.checks.HostRedisTasksHealthCheck).toStartWith("unavailable: ");
        expect(JSON.stringify(r.body)).not.toContain(t.redis!.token);
      });
    });
  });
}
