import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(() => t.close());

describe("authentication", () => {
  test("missing token → 403 with the DRF message", async () => {
    const r = await t.json("GET", "/api/dcim/sites/", { token: null });
    expect(r.status).toBe(403);
    expect(r.body.detail).toBe("Authentication credentials were not provided.");
  });

  test("unknown token → 403 Invalid token", async () => {
    const r = await t.json("GET", "/api/dcim/sites/", { token: "0".repeat(40) });
    expect(r.status).toBe(403);
    expect(r.body.detail).toBe("Invalid token");
  });

  test("malformed Authorization header → 403 Invalid token", async () => {
    const r = await t.json("GET", "/api/dcim/sites/", {
      token: null,
      headers: { authorization: "Basic abc" },
    });
    expect(r.status).toBe(403);
    expect(r.body.detail).toBe("Invalid token");
  });

  test("Token and Bearer schemes both work", async () => {
    for (const scheme of ["Token", "Bearer", "token"]) {
      const r = await t.req("GET", "/api/dcim/sites/", {
        token: null,
        headers: { authorization: `${scheme} ${t.admin}` },
      });
      expect(r.status).toBe(200);
    }
  });

  test("expired token → 403 Invalid token", async () => {
    const key = await t.user("expired", [[["view"], "dcim.site"]], {
      expires: new Date(Date.now() - 60_000).toISOString(),
    });
    const r = await t.json("GET", "/api/dcim/sites/", { token: key });
    expect(r.status).toBe(403);
    expect(r.body.detail).toBe("Invalid token");
  });

  test("a token that expires in the future works", async () => {
    const key = await t.user("future", [[["view"], "dcim.site"]], {
      expires: new Date(Date.now() + 3600_000).toISOString(),
    });
    expect((await t.req("GET", "/api/dcim/sites/", { token: key })).status).toBe(200);
  });

  test("read-only token cannot write, even as superuser", async () => {
    const { issueToken } = await import("../../src/core/auth/provisioning");
    const ro = await issueToken(t.deps.db.orm, { username: "admin", writeEnabled: false });
    expect((await t.req("GET", "/api/dcim/sites/", { token: ro.key })).status).toBe(200);
    const r = await t.json("POST", "/api/dcim/sites/", {
      token: ro.key,
      body: { name: "ro", slug: "ro" },
    });
    expect(r.status).toBe(403);
    expect(r.body.detail).toContain("write");
  });

  test("deleting a token revokes it at once (cache invalidated)", async () => {
    const created = await t.json("POST", "/api/users/tokens/", {
      body: { user: 1, description: "short-lived" },
    });
    expect(created.status).toBe(201);
    const key = `nbt_${created.body.key}.${created.body.token}`;
    expect(created.body.token).toMatch(/^[A-Za-z0-9]{40}$/);
    expect((await t.req("GET", "/api/status/", { token: key })).status).toBe(200);
    expect((await t.req("DELETE", `/api/users/tokens/${created.body.id}/`)).status).toBe(204);
    expect((await t.req("GET", "/api/status/", { token: key })).status).toBe(403);
  });

  test("deactivating a user revokes their tokens at once", async () => {
    const key = await t.user("soon-inactive", [[["view"], "dcim.site"]]);
    expect((await t.req("GET", "/api/dcim/sites/", { token: key })).status).toBe(200);
    const users = await t.json("GET", "/api/users/users/?username=soon-inactive");
    expect(
      (
        await t.req("PATCH", `/api/users/users/${users.body.results[0].id}/`, {
          body: { is_active: false },
        })
      ).status,
    ).toBe(200);
    expect((await t.req("GET", "/api/dcim/sites/", { token: key })).status).toBe(403);
  });

  test("the token is shown once: reads never carry the secret, and only its hash is stored", async () => {
    const created = await t.json("POST", "/api/users/tokens/", { body: { user: 1 } });
    const read = await t.json("GET", `/api/users/tokens/${created.body.id}/`);
    expect(read.body.token).toBeUndefined();
    expect(read.body.display).toBe(created.body.key);
    const rows = await t.deps.db.client.execute("SELECT key_hash FROM tokens");
    expect(rows.rows.some((r) => r.key_hash === created.body.token)).toBe(false);
  });

  test("a token's last_used is recorded when it is used, at most once a minute", async () => {
    const created = await t.json("POST", "/api/users/tokens/", {
      body: { user: 1, description: "tracked" },
    });
    const lastUsed = async () =>
      (await t.json("GET", `/api/users/tokens/${created.body.id}/`)).body.last_used;
    expect(await lastUsed()).toBeNull();
    const before = (await t.json("GET", `/api/users/tokens/${created.body.id}/`)).body.last_updated;
    const start = Date.now();
    const credential = `nbt_${created.body.key}.${created.body.token}`;
    expect((await t.req("GET", "/api/dcim/sites/", { token: credential })).status).toBe(200);
    const first = await lastUsed();
    expect(Date.parse(first)).toBeGreaterThanOrEqual(start - 1000);
    // an edit timestamp, not a use timestamp: it stays
    expect((await t.json("GET", `/api/users/tokens/${created.body.id}/`)).body.last_updated).toBe(
      before,
    );
    // A marker in the row: a second write within the minute would replace it.
    const marker = "2000-01-01T00:00:00.000Z";
    await t.deps.db.client.execute({
      sql: "UPDATE tokens SET last_used = ? WHERE id = ?",
      args: [marker, created.body.id],
    });
    expect((await t.req("GET", "/api/dcim/sites/", { token: credential })).status).toBe(200);
    expect(await lastUsed()).toBe(marker); // within the minute: no second write
  });

  test("with the database cache backend, token and user changes commit and revoke at once", async () => {
    // The cache lives in the same single-connection database as the change that invalidates it.
    const d = await makeTestApp({ CACHE_BACKEND: "database" });
    try {
      const key = await d.user("db-cached", [[["view"], "dcim.site"]]);
      expect((await d.req("GET", "/api/dcim/sites/", { token: key })).status).toBe(200); // now cached
      const all = await d.json("GET", "/api/users/tokens/?limit=100");
      const mine = all.body.results.find((r: any) => r.user.username === "db-cached");
      const edited = await d.json("PATCH", `/api/users/tokens/${mine.id}/`, {
        body: { expires: "2000-01-01T00:00:00Z" },
      });
      expect(edited.status).toBe(200);
      expect((await d.req("GET", "/api/dcim/sites/", { token: key })).status).toBe(403);
      const other = await d.user("db-cached-2", [[["view"], "dcim.site"]]);
      expect((await d.req("GET", "/api/dcim/sites/", { token: other })).status).toBe(200);
      const users = await d.json("GET", "/api/users/users/?username=db-cached-2");
      expect(
        (
          await d.req("PATCH", `/api/users/users/${users.body.results[0].id}/`, {
            body: { is_active: false },
          })
        ).status,
      ).toBe(200);
      expect((await d.req("GET", "/api/dcim/sites/", { token: other })).status).toBe(403);
    } finally {
      await d.close();
    }
  }, 10_000);

  test("bulk token creation is refused (keys could not be shown)", async () => {
    const r = await t.json("POST", "/api/users/tokens/", { body: [{ user: 1 }] });
    expect(r.status).toBe(400);
  });

  test("provision: username + password → token; wrong password → 403", async () => {
    expect(
      (
        await t.req("POST", "/api/users/users/", {
          body: { username: "pw-user", password: "s3cret-pass" },
        })
      ).status,
    ).toBe(201);
    const ok = await t.json("POST", "/api/users/tokens/provision/", {
      token: null,
      body: { username: "pw-user", password: "s3cret-pass" },
    });
    expect(ok.status).toBe(201);
    expect(
      (await t.req("GET", "/api/status/", { token: `nbt_${ok.body.key}.${ok.body.token}` })).status,
    ).toBe(200);
    const bad = await t.json("POST", "/api/users/tokens/provision/", {
      token: null,
      body: { username: "pw-user", password: "nope" },
    });
    expect(bad.status).toBe(403);
    const user = await t.json("GET", "/api/users/users/?username=pw-user");
    expect(user.body.results[0].password).toBeUndefined();
  });
});

describe("permissions", () => {
  test("no permission → 403; view permission → 200 on reads only", async () => {
    const none = await t.user("nobody");
    expect((await t.req("GET", "/api/dcim/sites/", { token: none })).status).toBe(403);
    const viewer = await t.user("viewer", [[["view"], "dcim.site"]]);
    expect((await t.req("GET", "/api/dcim/sites/", { token: viewer })).status).toBe(200);
    expect((await t.req("GET", "/api/dcim/devices/", { token: viewer })).status).toBe(403);
    expect(
      (await t.req("POST", "/api/dcim/sites/", { token: viewer, body: { name: "v", slug: "v" } }))
        .status,
    ).toBe(403);
  });

  test("add permission allows create but not change or delete", async () => {
    const adder = await t.user("adder", [[["view", "add"], "dcim.site"]]);
    const created = await t.json("POST", "/api/dcim/sites/", {
      token: adder,
      body: { name: "added", slug: "added" },
    });
    expect(created.status).toBe(201);
    expect(
      (
        await t.req("PATCH", `/api/dcim/sites/${created.body.id}/`, {
          token: adder,
          body: { description: "x" },
        })
      ).status,
    ).toBe(403);
    expect(
      (await t.req("DELETE", `/api/dcim/sites/${created.body.id}/`, { token: adder })).status,
    ).toBe(403);
  });

  test("permissions granted through a group apply", async () => {
    const g = await t.json("POST", "/api/users/groups/", { body: { name: "noc" } });
    expect(g.status).toBe(201);
    const p = await t.json("POST", "/api/users/permissions/", {
      body: {
        name: "noc-tenants",
        actions: ["view"],
        object_types: ["tenancy.tenant"],
        groups: [g.body.id],
      },
    });
    expect(p.status).toBe(201);
    const key = await t.user("member");
    const u = await t.json("GET", "/api/users/users/?username=member");
    expect((await t.req("GET", "/api/tenancy/tenants/", { token: key })).status).toBe(403);
    await t.req("PATCH", `/api/users/users/${u.body.results[0].id}/`, {
      body: { groups: [g.body.id] },
    });
    expect((await t.req("GET", "/api/tenancy/tenants/", { token: key })).status).toBe(200);
  });

  test("a disabled permission grants nothing", async () => {
    const key = await t.user("disabled-perm");
    const u = await t.json("GET", "/api/users/users/?username=disabled-perm");
    await t.json("POST", "/api/users/permissions/", {
      body: {
        name: "off",
        enabled: false,
        actions: ["view"],
        object_types: ["ipam.prefix"],
        users: [u.body.results[0].id],
      },
    });
    expect((await t.req("GET", "/api/ipam/prefixes/", { token: key })).status).toBe(403);
  });

  test("superuser passes every check", async () => {
    for (const path of [
      "/api/dcim/sites/",
      "/api/users/tokens/",
      "/api/core/object-types/",
      "/api/extras/tags/",
    ]) {
      expect((await t.req("GET", path)).status).toBe(200);
    }
  });

  test("permission records validate object types and actions", async () => {
    const bad = await t.json("POST", "/api/users/permissions/", {
      body: { name: "bad", actions: [], object_types: ["nope.nothing"] },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.actions).toBeDefined();
    expect(bad.body.object_types).toBeDefined();
  });
});

describe("a write run again on fresh grants (decision 0089)", () => {
  test("reads the body it read: the caller's grants changed by their previous write, the next write still answers", async () => {
    const me = (await t.json("GET", "/api/users/users/?username=admin")).body.results[0].id;
    for (let i = 0; i < 3; i++) {
      // each permission assigned to the caller changes their grants: the next write finds its
      // cached copy stale and runs again on the fresh one, body and all
      const r = await t.json("POST", "/api/users/permissions/", {
        body: { name: `self-${i}`, actions: ["view"], object_types: ["dcim.site"], users: [me] },
      });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      expect(r.body.name).toBe(`self-${i}`);
    }
  });
});

describe("LOGIN_REQUIRED=false", () => {
  test("anonymous callers may read but not write", async () => {
    const open = await makeTestApp({ LOGIN_REQUIRED: "false" });
    try {
      expect((await open.req("GET", "/api/dcim/sites/", { token: null })).status).toBe(200);
      const w = await open.json("POST", "/api/dcim/sites/", {
        token: null,
        body: { name: "a", slug: "a" },
      });
      expect(w.status).toBe(403);
      expect(w.body.detail).toBe("Authentication credentials were not provided.");
    } finally {
      await open.close();
    }
  });
});
