/**
 * An attacker's view of a write that loses a race (decisions 0134, 0140): its batch fails a guard
 * and the reads explaining why ride in the read settling the request's guards. The object moved
 * meanwhile out of the caller's constraints, to values they may not view: the 409/412 (or the
 * 403/404) names none of them, and the winner's write stands. Remote database, a held batch.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { userWith } from "../helpers/grants";
import { appOn, type BackendApp } from "../helpers/remote-db";
import { waitFor } from "../helpers/wait";
import { addField, CO, create, makeCot } from "../custom-objects/fixtures";

describe("a constrained write losing a race", () => {
  let on: BackendApp;
  let attacker: string;
  beforeAll(async () => {
    on = await appOn("remote", "failed-batch-scope");
    const cot = await makeCot(on.t, "boxes");
    await addField(on.t, cot.id, { name: "name", type: "text", primary: true });
    await addField(on.t, cot.id, { name: "owner", type: "text" });
    await addField(on.t, cot.id, { name: "note", type: "text", unique: true });
    attacker = (
      await userWith(on.t, "racer", [
        [["view", "add", "change", "delete"], "custom_objects.boxes", { owner: "me" }],
        [["view", "add", "change", "delete"], "dcim.site", { description: "mine" }],
        [["view"], "core.objectchange", null],
      ])
    ).token;
  });
  afterAll(() => on.close());

  /** Runs `mine` with its first batch matching `match` held while `theirs` runs to the end. */
  async function lose<T>(match: RegExp, mine: () => Promise<T>, theirs: () => Promise<unknown>) {
    const proxy = on.proxy!;
    let first = true;
    proxy.hold((statements) => {
      if (!first || !statements.some((s) => match.test(s))) return false;
      first = false;
      return true;
    });
    try {
      const running = mine();
      await waitFor(() => proxy.held === 1);
      await theirs(); // not held: only the first matching batch is
      proxy.release();
      return await running;
    } finally {
      proxy.release();
    }
  }
  const hidden = ["n-secret", "elsewhere"];
  const namesNothing = (r: { status: number; body: unknown }) => {
    const text = JSON.stringify(r.body);
    for (const h of hidden) expect(text).not.toContain(h);
  };

  for (const ifMatch of [false, true])
    test(`a custom object PATCH${ifMatch ? " with If-Match" : ""}`, async () => {
      const box = await create(on.t, "boxes", {
        name: `b-${ifMatch}`,
        owner: "me",
        note: `n-${ifMatch}`,
      });
      const headers: Record<string, string> = ifMatch
        ? { "If-Match": `W/"${box.last_updated}"` }
        : {};
      const r = await lose(
        /^update "co_/i,
        () =>
          on.t.json("PATCH", `${CO}/boxes/${box.id}/`, {
            token: attacker,
            body: { name: `mine-${ifMatch}` },
            headers,
          }),
        async () => {
          const w = await on.t.json("PATCH", `${CO}/boxes/${box.id}/`, {
            body: { owner: "elsewhere", note: `n-secret-${ifMatch}` },
          });
          expect(w.status).toBe(200);
        },
      );
      expect(r.status).not.toBe(200);
      expect(r.status).toBeLessThan(500);
      namesNothing(r);
      expect((await on.t.json("GET", `${CO}/boxes/${box.id}/`)).body).toMatchObject({
        owner: "elsewhere",
        name: `b-${ifMatch}`,
      });
    });

  test("a site PATCH", async () => {
    const s = await on.t.json("POST", "/api/dcim/sites/", {
      body: { name: "race-site", slug: "race-site", description: "mine" },
    });
    const r = await lose(
      /^update "sites"/i,
      () =>
        on.t.json("PATCH", `/api/dcim/sites/${s.body.id}/`, {
          token: attacker,
          body: { comments: "mine" },
        }),
      async () => {
        const w = await on.t.json("PATCH", `/api/dcim/sites/${s.body.id}/`, {
          body: { description: "elsewhere", comments: "n-secret-site" },
        });
        expect(w.status).toBe(200);
      },
    );
    expect(r.status).not.toBe(200);
    expect(r.status).toBeLessThan(500);
    namesNothing(r);
  });

  test("a create refused by a unique value of an object the caller may not view", async () => {
    await create(on.t, "boxes", {
      name: "hidden-box",
      owner: "elsewhere",
      note: "n-secret-unique",
    });
    const r = await on.t.json("POST", `${CO}/boxes/`, {
      token: attacker,
      body: { name: "probe", owner: "me", note: "n-secret-unique" },
    });
    expect(r.status).toBe(400);
    const text = JSON.stringify(r.body);
    expect(text).not.toContain("hidden-box");
    expect(text).not.toContain("elsewhere");
  });

  test("a revert whose object moves out of the caller's constraints before its batch", async () => {
    const box = await create(on.t, "boxes", { name: "rv", owner: "me", note: "n-rv" });
    const p = await on.t.json("PATCH", `${CO}/boxes/${box.id}/`, { body: { name: "rv-2" } });
    expect(p.status).toBe(200);
    const log = await on.t.json(
      "GET",
      `/api/core/object-changes/?changed_object_id=${box.id}&ordering=-id&limit=1`,
    );
    const change = log.body.results[0].id as number;
    const r = await lose(
      /^update "co_/i,
      () => on.t.json("POST", `/api/core/object-changes/${change}/revert/`, { token: attacker }),
      async () => {
        const w = await on.t.json("PATCH", `${CO}/boxes/${box.id}/`, {
          body: { owner: "elsewhere", note: "n-secret-rv" },
        });
        expect(w.status).toBe(200);
      },
    );
    expect([403, 404, 409]).toContain(r.status);
    namesNothing(r);
    expect((await on.t.json("GET", `${CO}/boxes/${box.id}/`)).body).toMatchObject({
      owner: "elsewhere",
      name: "rv-2",
    });
  });
});
