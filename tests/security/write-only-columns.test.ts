// A write-only column (a user's password hash, a webhook's secret) is never answered, so no
// read the app sends brings it back from the database either: not the change log's nested
// forms of the objects its records name, not a list of the objects themselves.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { TestApp } from "../helpers/app";
import { appOn, type BackendApp } from "../helpers/remote-db";

for (const backend of ["local", "remote"] as const)
  describe(backend, () => {
    let b: BackendApp;
    beforeAll(async () => {
      b = await appOn(backend, "write-only");
    });
    afterAll(() => b.close());
    test("the change log's nested user and webhook forms never carry a hash or a secret", () =>
      neverSent(b.t));
  });

/** Every value the database client returned while `fn` ran, as one JSON text. */
async function returnedDuring(t: TestApp, fn: () => Promise<unknown>): Promise<string> {
  const seen: unknown[] = [];
  const c = t.deps.db.client as any;
  const orig = { execute: c.execute, batch: c.batch };
  c.execute = async (...a: unknown[]) => {
    const r = await orig.execute.apply(c, a);
    seen.push(r.rows);
    return r;
  };
  c.batch = async (...a: unknown[]) => {
    const r = await orig.batch.apply(c, a);
    seen.push(r.map((x: any) => x.rows));
    return r;
  };
  try {
    await fn();
  } finally {
    Object.assign(c, orig);
  }
  return JSON.stringify(seen, (_k, v) => (typeof v === "bigint" ? String(v) : v));
}

async function neverSent(t: TestApp) {
  const user = await t.json("POST", "/api/users/users/", {
    body: { username: "wo-user", password: "correct horse battery staple" },
  });
  expect(user.status, JSON.stringify(user.body)).toBe(201);
  const hook = await t.json("POST", "/api/extras/webhooks/", {
    body: {
      name: "wo-hook",
      payload_url: "https://hooks.example.com/x",
      secret: "s3cr3t-value-xyz",
    },
  });
  expect(hook.status, JSON.stringify(hook.body)).toBe(201);
  const stored = await t.deps.db.client.execute({
    sql: "SELECT password_hash FROM users WHERE id = ?",
    args: [user.body.id],
  });
  const hash = String(stored.rows[0]!.password_hash);
  expect(hash.length).toBeGreaterThan(20);

  const sent = await returnedDuring(t, async () => {
    for (const query of ["changed_object_type=users.user", "changed_object_type=extras.webhook"]) {
      const r = await t.json("GET", `/api/core/object-changes/?${query}`);
      expect(r.status).toBe(200);
      expect(r.body.count).toBeGreaterThan(0);
    }
  });
  expect(sent).not.toContain(hash);
  expect(sent).not.toContain("s3cr3t-value-xyz");
}
