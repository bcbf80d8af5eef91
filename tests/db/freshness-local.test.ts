/**
 * Writes stay exact across app instances on one local file (issue 28 item 5, decision 0096): a
 * custom-object write runs in a transaction, so its token guard is settled before it, by the
 * token look-up that concurrent requests share while the change stamp holds. Two apps on one
 * file, each with its own caches (another process, as far as the caches can tell): a token
 * revoked or a permission removed through A refuses B's next write with nothing written, also
 * when B's writes run concurrently and share that look-up.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { BASE, makeTestApp, type TestApp } from "../helpers/app";
import { anotherInstance, revokeTokensOf } from "../helpers/instances";
import { addField, CO, makeCot } from "../custom-objects/fixtures";

let a: TestApp;
let b: Awaited<ReturnType<typeof anotherInstance>>;

/** A POST of a gadget through instance B with `token`. */
async function createViaB(token: string, title: string) {
  const res = await b.app.request(`${BASE}${CO}/gadget/`, {
    method: "POST",
    headers: { authorization: `Token ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ title }),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

/** How many gadgets whose title starts with `prefix` the database holds (read through A). */
async function gadgetsTitled(prefix: string) {
  return (await a.json("GET", `${CO}/gadget/?title__isw=${encodeURIComponent(prefix)}`)).body.count;
}

/** Removes the permission named `name` through instance A. */
async function removePermission(name: string) {
  const perms = await a.json("GET", `/api/users/permissions/?name=${name}`);
  expect(perms.body.count).toBe(1);
  expect(
    (await a.req("DELETE", `/api/users/permissions/${perms.body.results[0].id}/`)).status,
  ).toBe(204);
}

beforeAll(async () => {
  a = await makeTestApp();
  const url = a.deps.config.database.url;
  expect(url.startsWith("file:")).toBe(true);
  b = await anotherInstance(url);
  const cot = await makeCot(a, "gadget");
  await addField(a, cot.id, { name: "title", type: "text", primary: true });
});
afterAll(async () => {
  await b.close();
  await a.close();
});

describe("a change through instance A holds for B's next custom-object write (local file)", () => {
  test("a token revoked: B's next write is refused and writes nothing", async () => {
    const token = await a.user("co-revoked", [[["view", "add"], "custom_objects.gadget"]]);
    expect((await createViaB(token, "rv-0")).status).toBe(201); // warm: B holds the token
    await revokeTokensOf(a, "co-revoked");
    const after = await createViaB(token, "rv-1");
    expect(after.status).toBe(403);
    expect(after.body.error).toBe("invalid_token");
    expect(await gadgetsTitled("rv-1")).toBe(0);
  });

  test("a permission removed: B's next write is checked on the fresh grants", async () => {
    const token = await a.user("co-unpermitted", [
      [["view"], "custom_objects.gadget"],
      [["add"], "custom_objects.gadget"],
    ]);
    expect((await createViaB(token, "pm-0")).status).toBe(201); // warm
    await removePermission("co-unpermitted-custom_objects.gadget-add");
    const after = await createViaB(token, "pm-1");
    expect(after.status).toBe(403);
    expect(after.body.error).not.toBe("invalid_token");
    expect(await gadgetsTitled("pm-1")).toBe(0);
  });

  test("concurrent writes through B share the look-up and all see the revocation", async () => {
    const token = await a.user("co-crowd", [[["view", "add"], "custom_objects.gadget"]]);
    // warm, with concurrent writes that share one look-up under one stamp
    const warm = await Promise.all(
      Array.from({ length: 8 }, (_, i) => createViaB(token, `cr-warm-${i}`)),
    );
    expect(warm.map((r) => r.status)).toEqual(Array(8).fill(201));
    await revokeTokensOf(a, "co-crowd");
    const after = await Promise.all(
      Array.from({ length: 8 }, (_, i) => createViaB(token, `cr-late-${i}`)),
    );
    expect(after.map((r) => r.status)).toEqual(Array(8).fill(403));
    expect(await gadgetsTitled("cr-late-")).toBe(0);
  });
});
