/**
 * A custom object type the caller holds no permission on does not exist to them at its own
 * endpoints (decision 0178): `<slug>/` and `<slug>/<id>/` answered 403 for such a type and 404 for
 * a slug no type has, and linked-objects 404 "No custom_objects.<slug> with id 1." against 400
 * "Unknown object type", so any account, even with a read-only token, could enumerate the slugs
 * of types kept from it. Every method now answers as for a missing slug; a caller with any
 * permission on the type's objects, and a superuser, are answered as before.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { userWith } from "../helpers/grants";
import { makeTestApp, type TestApp } from "../helpers/app";
import { CO, create, namedCot } from "../custom-objects/fixtures";

let t: TestApp;
const who = { writer: "", reader: "", adder: "" };
beforeAll(async () => {
  t = await makeTestApp();
  await namedCot(t, "openbox");
  await namedCot(t, "hiddenbox");
  await create(t, "openbox", { name: "open one" });
  await create(t, "hiddenbox", { name: "hidden one" });
  const grants: Array<[string[], string, unknown]> = [
    [["view", "add", "change", "delete"], "custom_objects.openbox", null],
  ];
  who.writer = (await userWith(t, "hte-writer", grants)).token;
  who.reader = (await userWith(t, "hte-reader", grants, { writeEnabled: false })).token;
  who.adder = (
    await userWith(t, "hte-adder", [[["add"], "custom_objects.hiddenbox", null], ...grants])
  ).token;
});
afterAll(() => t.close());

/** Every route of a type's endpoints, with a body where the method takes one. */
const probes = (slug: string): Array<[string, string, unknown]> => [
  ["GET", `${CO}/${slug}/`, undefined],
  ["GET", `${CO}/${slug}/1/`, undefined],
  ["GET", `${CO}/${slug}/?q=hidden&brief=1`, undefined],
  ["HEAD", `${CO}/${slug}/`, undefined],
  ["POST", `${CO}/${slug}/`, { name: "x" }],
  ["POST", `${CO}/${slug}/`, [{ name: "x" }]],
  ["PATCH", `${CO}/${slug}/1/`, { name: "x" }],
  ["PUT", `${CO}/${slug}/1/`, { name: "x" }],
  ["PATCH", `${CO}/${slug}/`, [{ id: 1, name: "x" }]],
  ["DELETE", `${CO}/${slug}/1/`, undefined],
  ["DELETE", `${CO}/${slug}/`, [{ id: 1 }]],
  ["POST", `${CO}/${slug}/1/`, { name: "x" }],
  ["POST", `${CO}/${slug}/?background=true`, [{ name: "x" }]],
];

const answer = async (method: string, path: string, body: unknown, token: string) => {
  const r = await t.req(method, path, { token, body });
  return `${r.status} ${await r.text()}`;
};

describe("a type the caller holds no permission on answers as a missing slug", () => {
  for (const name of ["writer", "reader"] as const)
    test(`${name}: every method of <slug>/ and <slug>/<id>/`, async () => {
      for (const [method, path, body] of probes("hiddenbox")) {
        const missing = path.replace("hiddenbox", "nosuchbox");
        const hidden = await answer(method, path, body, who[name]);
        expect(hidden, `${method} ${path}`).toBe(await answer(method, missing, body, who[name]));
        expect(hidden.startsWith("404"), `${method} ${path}: ${hidden}`).toBe(true);
      }
      // nothing was written
      const left = await t.json("GET", `${CO}/hiddenbox/`);
      expect(left.body.results.map((r: { display: string }) => r.display)).toEqual(["hidden one"]);
    });

  for (const name of ["writer", "reader"] as const)
    test(`${name}: linked-objects names the type as unknown, as a missing one`, async () => {
      const linked = (slug: string) =>
        answer(
          "GET",
          `${CO}/linked-objects/?object_type=custom_objects.${slug}&object_id=1`,
          undefined,
          who[name],
        );
      const hidden = await linked("hiddenbox");
      expect(hidden.startsWith("400"), hidden).toBe(true);
      expect(hidden.replaceAll("hiddenbox", "nosuchbox")).toBe(await linked("nosuchbox"));
    });
});

describe("callers who know the type are answered as before", () => {
  test("its own objects' endpoint and linked-objects for a type the caller may view", async () => {
    expect((await t.json("GET", `${CO}/openbox/1/`, { token: who.reader })).status).toBe(200);
    const linked = await t.json(
      "GET",
      `${CO}/linked-objects/?object_type=custom_objects.openbox&object_id=1`,
      { token: who.reader },
    );
    expect(linked.status).toBe(200);
  });

  test("a caller who may add its objects: 403 on a read, the add goes through", async () => {
    expect((await t.json("GET", `${CO}/hiddenbox/`, { token: who.adder })).status).toBe(403);
    const made = await t.json("POST", `${CO}/hiddenbox/`, {
      token: who.adder,
      body: { name: "added" },
    });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
  });

  test("a superuser reads it", async () => {
    expect((await t.json("GET", `${CO}/hiddenbox/1/`)).status).toBe(200);
  });
});
