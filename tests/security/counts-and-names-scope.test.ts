/**
 * Outside probe (decision 0191): a record the caller may view must not count or name what they
 * may not view. An owner group's `member_count` counted owners hidden from the caller, and an
 * event rule's `action_object` named a webhook hidden from them (NetBox does both; we are
 * stricter), and a write's webhook deliveries were the writer's jobs, telling them another's
 * rule matched and how its receiver answered. Detail, list, change log snapshots and write answers, on a local file and a remote
 * database (their reads differ).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { userWith } from "../helpers/grants";
import { appOn, type BackendApp } from "../helpers/remote-db";

for (const backend of ["local", "remote"] as const)
  describe(`${backend}: counts and names of hidden objects`, () => {
    let app: BackendApp;
    const t = () => app.t;
    let prober = "";
    let auditor = "";
    let group = 0;
    let rule = 0;
    let hook = 0;
    const made = async (path: string, body: unknown) => {
      const r = await t().json("POST", path, { body });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      return r.body.id as number;
    };
    beforeAll(async () => {
      app = await appOn(backend, `counts-names-${backend}`);
      group = await made("/api/users/owner-groups/", { name: "ops" });
      await made("/api/users/owners/", { name: "seen owner", group });
      await made("/api/users/owners/", { name: "hidden owner", group });
      await made("/api/users/owners/", { name: "hidden owner 2", group });
      // the group's change record now snapshots its three members
      expect(
        (
          await t().json("PATCH", `/api/users/owner-groups/${group}/`, {
            body: { description: "now" },
          })
        ).status,
      ).toBe(200);
      hook = await made("/api/extras/webhooks/", {
        name: "SecretHook",
        payload_url: "http://hooks.example/x",
      });
      rule = await made("/api/extras/event-rules/", {
        name: "r1",
        object_types: ["dcim.site"],
        event_types: ["object_created"],
        action_object_type: "extras.webhook",
        action_object_id: hook,
      });
      prober = (
        await userWith(t(), "prober", [
          [["view", "change"], "users.ownergroup", null],
          [["view"], "users.owner", { name: "seen owner" }],
          [["view", "change"], "extras.eventrule", null],
          [["view", "add"], "dcim.site", null],
          [["view"], "core.objectchange", null],
          [["view"], "core.job", null],
        ])
      ).token;
      auditor = (
        await userWith(t(), "auditor", [
          [["view"], "users.ownergroup", null],
          [["view"], "users.owner", null],
          [["view"], "extras.eventrule", null],
          [["view"], "extras.webhook", null],
        ])
      ).token;
    });
    afterAll(() => app.close());

    const get = async (path: string, token: string) => {
      const r = await t().json("GET", path, { token });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      return r.body;
    };

    test("an owner group counts its members only for a caller who may view every owner", async () => {
      const one = `/api/users/owner-groups/${group}/`;
      expect((await get(one, prober)).member_count).toBeNull();
      expect((await get("/api/users/owner-groups/", prober)).results[0].member_count).toBeNull();
      const changes = await get(
        "/api/core/object-changes/?changed_object_type=users.ownergroup",
        prober,
      );
      expect(changes.count).toBe(2);
      for (const record of changes.results)
        for (const snapshot of [record.prechange_data, record.postchange_data])
          if (snapshot) expect(snapshot.member_count, JSON.stringify(record)).toBeNull();
      const patched = await t().json("PATCH", one, {
        token: prober,
        body: { description: "by prober" },
      });
      expect(patched.status).toBe(200);
      expect(patched.body.member_count).toBeNull();
      // who may view every owner, and a superuser, are told the count
      expect((await get(one, auditor)).member_count).toBe(3);
      expect((await get(one, t().admin)).member_count).toBe(3);
    });

    test("an event rule names its webhook only to a caller who may view it", async () => {
      const one = `/api/extras/event-rules/${rule}/`;
      expect((await get(one, prober)).action_object).toEqual({ id: hook });
      expect((await get("/api/extras/event-rules/", prober)).results[0].action_object).toEqual({
        id: hook,
      });
      const patched = await t().json("PATCH", one, {
        token: prober,
        body: { description: "by prober" },
      });
      expect(patched.status, JSON.stringify(patched.body)).toBe(200);
      expect(patched.body.action_object).toEqual({ id: hook });
      expect(JSON.stringify(patched.body)).not.toContain("SecretHook");
      expect((await get(one, auditor)).action_object.name).toBe("SecretHook");
      expect((await get(one, t().admin)).action_object.name).toBe("SecretHook");
    });

    test("a write's deliveries to another's webhook are not the writer's jobs", async () => {
      const site = await t().json("POST", "/api/dcim/sites/", {
        token: prober,
        body: { name: "probe site", slug: "probe-site" },
      });
      expect(site.status, JSON.stringify(site.body)).toBe(201);
      const jobs = async (token: string) =>
        (await get("/api/core/jobs/?name=webhook.deliver", token)).results as any[];
      expect(await jobs(prober)).toEqual([]);
      // the rule matched: the delivery is queued, seen by a superuser
      expect((await jobs(t().admin)).map((j) => j.object_id)).toEqual([hook]);
    });
    test("a webhook's deletion refused for its callers names no rule the caller may not view", async () => {
      // a webhook the deleter may delete, called by a rule they may not view
      const doomed = await made("/api/extras/webhooks/", {
        name: "Doomed",
        payload_url: "http://hooks.example/y",
      });
      await made("/api/extras/event-rules/", {
        name: "HiddenRuleName",
        object_types: ["dcim.site"],
        event_types: ["object_created"],
        action_object_type: "extras.webhook",
        action_object_id: doomed,
      });
      const deleter = (
        await userWith(t(), "hook-deleter", [[["view", "delete"], "extras.webhook", null]])
      ).token;
      for (const [method, path, body] of [
        ["DELETE", `/api/extras/webhooks/${doomed}/`, undefined],
        ["DELETE", "/api/extras/webhooks/", [{ id: doomed }]],
      ] as const) {
        const r = await t().req(method, path, { token: deleter, body });
        const text = await r.text();
        expect(r.status, text).toBe(409);
        expect(text).not.toContain("HiddenRuleName");
        expect(JSON.parse(text).protected_objects ?? []).toEqual([]);
      }
      // who may view the rules is told which one
      const named = await t().req("DELETE", `/api/extras/webhooks/${doomed}/`);
      expect(await named.text()).toContain("HiddenRuleName");
    });
  });
