/**
 * A delete put back from the change log (`POST /api/core/object-changes/<id>/revert/`) returns
 * the object as it was: its old id and its original `created` (the delete's record holds it);
 * only `last_updated` is the restore's (decision 0171). The dry run's preview shows the same
 * `created` (decision 0162: the stamps the write would set). A site and a custom object; on a
 * local file and a remote database; the record looked at first (the plan's path) or never seen
 * by this process (the path built from the record alone, 0139).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { servicesOf } from "../../src/app";
import { forgetChange } from "../../src/core/changes/seen";
import { appOn, type BackendApp } from "../helpers/remote-db";
import { addField, CO, create, makeCot } from "../custom-objects/fixtures";

/** A creation time long before the test: a restore stamping its own moment cannot match it. */
const ORIGINAL = "2021-03-04T05:06:07.089Z";

for (const backend of ["local", "remote"] as const)
  for (const mode of ["looked-at", "unseen"] as const)
    describe(`a delete put back keeps its created (${backend}, ${mode})`, () => {
      let on: BackendApp;
      const t = () => on.t;
      let slug: string;
      let table: string;
      beforeAll(async () => {
        on = await appOn(backend, `restore-created-${backend}-${mode}`);
        const cot = await makeCot(t(), `rc${mode === "unseen" ? "u" : "l"}`);
        slug = cot.slug;
        table = `co_${cot.id}`;
        await addField(t(), cot.id, { name: "title", type: "text", primary: true });
      });
      afterAll(() => on.close());

      const lastChange = async () =>
        Number(
          ((await t().deps.db.orm.all(sql`SELECT max(id) AS id FROM object_changes`)) as any[])[0]
            .id,
        );
      /** Plants `ORIGINAL` as the row's `created`, so the delete's record holds it. */
      async function backdate(tableName: string, url: string, id: number) {
        await t().deps.db.orm.run(
          sql`UPDATE ${sql.identifier(tableName)} SET created = ${ORIGINAL} WHERE id = ${id}`,
        );
        expect((await t().json("GET", url)).body.created).toBe(ORIGINAL);
      }
      const revert = async (change: number, query = "") => {
        if (mode === "looked-at")
          expect((await t().json("GET", `/api/core/object-changes/${change}/`)).status).toBe(200);
        else forgetChange(servicesOf(t().app), change);
        return t().json("POST", `/api/core/object-changes/${change}/revert/${query}`);
      };

      /** Deletes the object at `url`, then dry-runs and reverts the delete: `created` kept. */
      async function deleteAndRestore(url: string, id: number) {
        expect((await t().json("DELETE", url)).status).toBe(204);
        const change = await lastChange();
        const dry = await revert(change, "?dry_run=true");
        expect(dry.status, JSON.stringify(dry.body)).toBe(200);
        expect(dry.body.object).toMatchObject({ id, created: ORIGINAL });
        expect((await t().json("GET", url)).status).toBe(404);
        const real = await revert(change);
        expect(real.status, JSON.stringify(real.body)).toBe(200);
        expect(real.body.object).toMatchObject({ id, created: ORIGINAL });
        expect(real.body.object.last_updated > ORIGINAL).toBe(true);
        const got = await t().json("GET", url);
        expect(got.body).toMatchObject({ id, created: ORIGINAL });
        expect(got.body.last_updated).toBe(real.body.object.last_updated);
      }

      test("a site", async () => {
        const r = await t().json("POST", "/api/dcim/sites/", {
          body: { name: `rc ${mode}`, slug: `rc-${mode}` },
        });
        expect(r.status).toBe(201);
        const url = `/api/dcim/sites/${r.body.id}/`;
        await backdate("sites", url, r.body.id);
        await deleteAndRestore(url, r.body.id);
      });

      test("a custom object", async () => {
        const o = await create(t(), slug, { title: `rc ${mode}` });
        const url = `${CO}/${slug}/${o.id}/`;
        await backdate(table, url, o.id);
        await deleteAndRestore(url, o.id);
      });

      // a record read afresh (a remembered copy would no longer prove it): its `created` altered;
      // registered only on that path, so nothing is skipped elsewhere
      if (mode === "unseen")
        test("a record without a valid created: the restore's own", async () => {
          const o = await create(t(), slug, { title: `rc bad ${mode}` });
          const url = `${CO}/${slug}/${o.id}/`;
          await backdate(table, url, o.id);
          expect((await t().json("DELETE", url)).status).toBe(204);
          const change = await lastChange();
          await t().deps.db.orm.run(
            sql`UPDATE object_changes SET prechange_data = json_set(prechange_data, '$.created', ${"2021-03-04 junk"}) WHERE id = ${change}`,
          );
          const real = await revert(change);
          expect(real.status, JSON.stringify(real.body)).toBe(200);
          const got = (await t().json("GET", url)).body;
          expect(got.created).toBe(real.body.object.created);
          expect(got.created).toBe(new Date(Date.parse(got.created)).toISOString());
          expect(got.created > ORIGINAL).toBe(true);
        });
    });
