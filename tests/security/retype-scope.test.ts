/**
 * An attacker's view of staged retypes and keys (decisions 0126, 0135, 0136): a caller whose type
 * permissions are constrained to some types retypes fields of types outside them, alone or beside
 * one inside, or puts a key over values of a type they may not view. Refused (403) with nothing
 * converted, and the refusal names no value, count or type they did not submit; a retype inside
 * their constraints converts as anyone's. Local file (the transaction) and remote (the batch).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { userWith } from "../helpers/grants";
import { appOn, type BackendApp } from "../helpers/remote-db";
import { CO, create } from "../custom-objects/fixtures";

const SCHEMA = `${CO}/schema`;
const TYPE = "custom_objects.customobjecttype";
const doc = (types: unknown[]) => ({
  schema: { schema_version: "1", types },
  allow_destructive: true,
});
const code = (type = "text", extra: Record<string, unknown> = {}) => ({
  id: 1,
  name: "code",
  type,
  ...extra,
});
const note = { id: 2, name: "note", type: "text" };
const lab = (slug: string, fields: unknown[], extra: Record<string, unknown> = {}) => ({
  name: slug,
  slug,
  group_name: "lab",
  fields,
  ...extra,
});

for (const backend of ["local", "remote"] as const)
  describe(backend, () => {
    let on: BackendApp;
    let token: string;
    beforeAll(async () => {
      on = await appOn(backend, `retype-scope-${backend}`);
      const setup = await on.t.json("POST", `${SCHEMA}/apply/`, {
        body: doc([
          lab("ok_box", [code(), note]),
          lab("theirs", [code(), note]),
          { name: "secret", slug: "secret", fields: [code(), note] },
        ]),
      });
      if (setup.status !== 200) throw new Error(JSON.stringify(setup.body));
      for (const slug of ["ok_box", "theirs", "secret"])
        for (const v of ["12", "x-hidden-value", "12"])
          await create(on.t, slug, { code: v, note: `n-${slug}` });
      token = (
        await userWith(on.t, `shaper-${backend}`, [
          [["view"], TYPE, { group_name: "lab" }],
          [["add", "delete"], TYPE, { slug__startswith: "ok" }],
          [["change"], TYPE, { slug__startswith: "ok", group_name: "lab" }],
          [["view", "add", "change", "delete"], "custom_objects.customobjecttypefield", null],
        ])
      ).token;
    });
    afterAll(() => on.close());

    const apply = (body: unknown) => on.t.json("POST", `${SCHEMA}/apply/`, { token, body });
    const values = async (slug: string) =>
      (await on.t.json("GET", `${CO}/${slug}/?limit=50`)).body.results.map(
        (o: { code: unknown }) => o.code,
      );
    const refusedQuietly = (r: { status: number; body: unknown }) => {
      expect(r.status, JSON.stringify(r.body)).toBe(403);
      const text = JSON.stringify(r.body);
      for (const hidden of ["x-hidden-value", "n-secret", "n-theirs", "lost", "duplicate"])
        expect(text).not.toContain(hidden);
    };

    test("a retype of a type outside the change constraints, alone or beside one inside", async () => {
      const before = { theirs: await values("theirs"), ok: await values("ok_box") };
      refusedQuietly(await apply(doc([lab("theirs", [code("integer"), note])])));
      refusedQuietly(
        await apply(
          doc([lab("ok_box", [code("integer"), note]), lab("theirs", [code("integer"), note])]),
        ),
      );
      // retyped and keyed at once (staged with its key, 0135)
      refusedQuietly(await apply(doc([lab("theirs", [code("integer", { unique: true }), note])])));
      expect(await values("theirs")).toEqual(before.theirs);
      expect(await values("ok_box")).toEqual(before.ok);
    });

    test("a retype or a key over a type the caller may not view", async () => {
      const before = await values("secret");
      for (const fields of [
        [code("integer"), note],
        [code("text", { unique: true }), note],
        [code("integer", { unique: true }), { ...note, name: "renamed" }],
      ]) {
        const r = await apply(doc([{ name: "secret", slug: "secret", fields }]));
        expect([403, 404]).toContain(r.status);
        const text = JSON.stringify(r.body);
        for (const hidden of ["x-hidden-value", "n-secret", "lost", "duplicate", "value(s)"])
          expect(text).not.toContain(hidden);
      }
      expect(await values("secret")).toEqual(before);
    });

    test("inside the constraints a retype converts as anyone's", async () => {
      const r = await apply(doc([lab("ok_box", [code("integer"), note])]));
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect((await values("ok_box")).sort()).toEqual([12, 12, null].sort());
    });
  });
