/**
 * An attacker's view of the one shared full-text index (decision 0130): every type's entries live
 * in one FTS5 table, told apart by rowid ranges. A `?q=` or `__ic` on one type never returns,
 * counts or pages another type's objects or objects outside the caller's view constraints, and hostile needles
 * (FTS5 syntax, the entry separators, NUL, very long) answer 200 or a clear 4xx, never a 500.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { servicesOf } from "../../src/app";
import { flushSearchIndexesNow } from "../../src/plugins/custom-objects/search/flush";
import { userWith } from "../helpers/grants";
import { appOn, type BackendApp } from "../helpers/remote-db";
import { addField, CO, create, makeCot } from "../custom-objects/fixtures";

for (const backend of ["local", "remote"] as const) {
  describe(`${backend}`, () => {
    let app: BackendApp;
    const t = () => app.t;
    let viewer: string;
    let narrow: string;
    beforeAll(async () => {
      app = await appOn(backend, `search-shared-${backend}`);
      for (const slug of ["alpha", "beta"]) {
        const cot = await makeCot(t(), slug);
        await addField(t(), cot.id, { name: "name", type: "text", primary: true });
        await addField(t(), cot.id, { name: "note", type: "longtext" });
      }
      for (let i = 0; i < 3; i++) await create(t(), "alpha", { name: `shared-a${i}`, note: "x" });
      for (let i = 0; i < 4; i++)
        await create(t(), "beta", { name: `shared-b${i}`, note: "secretbeta" });
      await flushSearchIndexesNow(servicesOf(t().app));
      viewer = (
        await userWith(t(), `alpha-viewer-${backend}`, [[["view"], "custom_objects.alpha", null]])
      ).token;
      narrow = (
        await userWith(t(), `alpha-narrow-${backend}`, [
          [["view"], "custom_objects.alpha", { name: "shared-a1" }],
        ])
      ).token;
    });
    afterAll(() => app.close());

    const get = (path: string, token?: string) => t().json("GET", path, token ? { token } : {});

    test("a search on one type never counts or returns another's objects", async () => {
      for (const token of [undefined, viewer]) {
        const r = await get(`${CO}/alpha/?q=shared&limit=50`, token);
        expect(r.status).toBe(200);
        expect(r.body.count).toBe(3);
        expect(JSON.stringify(r.body)).not.toContain("shared-b");
        const ic = await get(`${CO}/alpha/?name__ic=shared&limit=50`, token);
        expect(ic.body.count).toBe(3);
        const gone = await get(`${CO}/alpha/?q=secretbeta`, token);
        expect(gone.body.count).toBe(0);
      }
      // the viewer may not search beta at all: holding nothing on it, it is unknown (0178)
      expect((await get(`${CO}/beta/?q=shared`, viewer)).status).toBe(404);
    });

    test("view constraints hold on the index's count and page", async () => {
      const r = await get(`${CO}/alpha/?q=shared&limit=50`, narrow);
      expect(r.status).toBe(200);
      expect(r.body.count).toBe(1);
      expect(r.body.results.map((o: { name: string }) => o.name)).toEqual(["shared-a1"]);
      const off = await get(`${CO}/alpha/?q=shared&limit=1&offset=1`, narrow);
      expect(off.body.count).toBe(1);
      expect(off.body.results).toEqual([]);
      // whoever asks first, each count is the asker's (a count kept for one is not another's)
      for (const [token, n] of [
        [narrow, 1],
        [viewer, 3],
        [narrow, 1],
        [undefined, 3],
        [narrow, 1],
      ] as const)
        expect((await get(`${CO}/alpha/?q=hared-a&limit=1`, token)).body.count).toBe(n);
    });

    const hostile = [
      '"',
      '"""',
      "sha*",
      "^sha",
      "body:shared",
      "name:shared",
      "shared NEAR x",
      "NEAR(shared x)",
      "shared OR secretbeta",
      "shared AND NOT x",
      "(shared)",
      "{name}:shared",
      "- shared",
      "sh\u001ear",
      "\u001fshared",
      "\u001e\u001e\u001e",
      "a\u0000bc",
      "\u0000\u0000\u0000",
      "\\\\\\",
      "%%%",
      "___",
      "x".repeat(5000),
      "😀😀😀",
    ].map(encodeURIComponent);
    // bytes that are not UTF-8, sent as they are
    hostile.push("%ED%A0%80%ED%A0%80%ED%A0%80", "%FF%FE%FD", "%C0%80%C0%80%C0%80");
    test("hostile needles answer 200 or a clear 4xx, never another type's objects", async () => {
      for (const needle of hostile) {
        for (const path of [
          `${CO}/alpha/?q=${needle}`,
          `${CO}/alpha/?name__ic=${needle}`,
          `${CO}/alpha/?note__ic=${needle}`,
          `${CO}/alpha/?name__isw=${needle}`,
          `${CO}/alpha/?name__iew=${needle}`,
        ]) {
          const r = await get(path, viewer);
          if (r.status >= 500) throw new Error(`${path}: ${r.status} ${JSON.stringify(r.body)}`);
          expect(r.status < 500).toBe(true);
          expect(JSON.stringify(r.body)).not.toContain("shared-b");
          if (r.status === 200 && needle === encodeURIComponent("shared OR secretbeta"))
            expect(r.body.count).toBe(0);
        }
      }
    });

    test("rows not indexed yet (pending) are held to the same type and constraints", async () => {
      await create(t(), "beta", { name: "pending-b", note: "pending-note" });
      await create(t(), "alpha", { name: "pending-a", note: "pending-note" });
      for (const [path, token, n] of [
        ["?q=pending", viewer, 1],
        ["?q=pending", narrow, 0],
        ["?note__ic=pending-note", viewer, 1],
        ["?note__ic=pending-note", narrow, 0],
      ] as const) {
        const r = await get(`${CO}/alpha/${path}`, token);
        expect(r.body.count).toBe(n);
        expect(JSON.stringify(r.body)).not.toContain("pending-b");
      }
    });

    test("paging the index's answer at hostile offsets and limits never errs", async () => {
      for (const offset of [
        "0",
        "2",
        "1000000",
        "999999999999999",
        "9007199254740993",
        "-1",
        "1e3",
      ])
        for (const limit of ["1", "0", "1000", "9007199254740993", "-5"]) {
          const r = await get(`${CO}/alpha/?q=shared&offset=${offset}&limit=${limit}`, viewer);
          if (r.status >= 500) throw new Error(`${offset}/${limit}: ${JSON.stringify(r.body)}`);
          if (r.status === 200) {
            expect(r.body.count).toBe(3);
            expect(JSON.stringify(r.body)).not.toContain("shared-b");
          }
        }
    });
  });
}

/**
 * A type through the trash and back (its triggers dropped, every row pending, then its id and
 * rows restored): no other type ever finds its rows, and restored it finds exactly its own.
 */
describe("a type trashed and restored", () => {
  for (const backend of ["local", "remote"] as const)
    test(backend, async () => {
      const app = await appOn(backend, `search-trash-${backend}`);
      try {
        const t = app.t;
        for (const slug of ["kept", "binned"]) {
          const cot = await makeCot(t, slug);
          await addField(t, cot.id, { name: "name", type: "text", primary: true });
        }
        for (let i = 0; i < 3; i++) await create(t, "binned", { name: `bin-item-${i}` });
        await create(t, "kept", { name: "kept-item" });
        await flushSearchIndexesNow(servicesOf(t.app));
        const SCHEMA = `${CO}/schema`;
        const doc = (await t.json("GET", `${SCHEMA}/export/?slug=binned`)).body;
        const removed = await t.json("POST", `${SCHEMA}/apply/`, {
          body: {
            schema: { ...doc, types: [], removed_types: [{ slug: "binned" }] },
            allow_destructive: true,
          },
        });
        expect(removed.status, JSON.stringify(removed.body)).toBe(200);
        const viewer = (await userWith(t, "kept-viewer", [[["view"], "custom_objects.kept", null]]))
          .token;
        const kept = async () => {
          for (const path of ["?q=bin-item", "?name__ic=bin-item", "?q=item"]) {
            const r = await t.json("GET", `${CO}/kept/${path}`, { token: viewer });
            expect(r.body.count).toBe(path === "?q=item" ? 1 : 0);
            expect(JSON.stringify(r.body)).not.toContain("bin-item");
          }
        };
        await kept();
        await flushSearchIndexesNow(servicesOf(t.app));
        await kept();
        const entry = (await t.json("GET", `${SCHEMA}/trash/`)).body.results.find(
          (e: { kind: string }) => e.kind === "type",
        );
        const restored = await t.json("POST", `${SCHEMA}/trash/${entry.id}/restore/`);
        expect(restored.status, JSON.stringify(restored.body)).toBe(200);
        for (let round = 0; round < 2; round++) {
          await kept();
          const r = await t.json("GET", `${CO}/binned/?q=bin-item`);
          expect(r.body.count).toBe(3);
          await flushSearchIndexesNow(servicesOf(t.app));
        }
      } finally {
        await app.close();
      }
    });
});
