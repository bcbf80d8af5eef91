/**
 * A revert's answer (decision 0088) shows each field it put back as `changes.<field>.to` and the
 * object as written as `object`: the two must agree, links included. A link's brief form as the
 * change record kept it (its target's name then) is not what the object shows once the target was
 * renamed since: `to` is the value as written, the form the object (and the new change record's
 * postchange data) shows (decision 0173). On a local file, a remote database and D1; dry runs too.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import {
  jsonOf,
  startThreeBackends,
  type ThreeBackends,
  type Json,
} from "../helpers/three-backends";

// wrangler's migration run takes 10–30 s on a busy machine
setDefaultTimeout(180_000);

const CO = "/api/plugins/custom-objects";
let apps: ThreeBackends;
beforeAll(async () => {
  apps = await startThreeBackends("revert-diff");
});
afterAll(() => apps?.stop());

async function made(json: Json, path: string, body: unknown) {
  const r = await json("POST", path, body);
  if (r.status !== 201) throw new Error(`${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body as Record<string, any> & { id: number };
}

async function lastChange(json: Json, type: string, id: number) {
  const r = await json(
    "GET",
    `/api/core/object-changes/?changed_object_type=${type}&changed_object_id=${id}&ordering=-id&limit=1`,
  );
  return r.body.results[0] as Record<string, any>;
}

/** The revert of change `id` (dry run first, then done): each answer's fields that disagree. */
async function reverted(json: Json, id: number) {
  const answers = [];
  for (const query of ["?dry_run=true", ""]) {
    const r = await json("POST", `/api/core/object-changes/${id}/revert/${query}`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    answers.push(r.body);
  }
  // the write's own record shows what it wrote as the answer's object does
  const written = await json("GET", `/api/core/object-changes/${answers[1].change}/`);
  for (const field of Object.keys(answers[1].changes))
    expect([field, written.body.postchange_data[field]]).toEqual([field, answers[1].object[field]]);
  return answers as Array<{ changes: Record<string, { to: unknown }>; object: any }>;
}

/** `changes.<field>.to` beside `object.<field>`, for each field the answer changed. */
const pairs = (answer: { changes: Record<string, { to: unknown }>; object: any }) =>
  Object.entries(answer.changes).map(([field, c]) => [field, c.to, answer.object[field]]);
const agreeing = (answer: { changes: Record<string, { to: unknown }>; object: any }) =>
  pairs(answer).map(([field, , shown]) => [field, shown, shown]);

/** Deletes, renames the links' targets, and reverts: custom object links and a host relation. */
async function scenario(json: Json) {
  const cot = async (slug: string) => {
    const t = await made(json, `${CO}/custom-object-types/`, { name: slug, slug });
    await made(json, `${CO}/custom-object-type-fields/`, {
      custom_object_type: t.id,
      name: "name",
      type: "text",
      primary: true,
    });
    return t.id as number;
  };
  await cot("cog");
  const crate = await cot("crate");
  const link = (name: string, type: string, to: string) =>
    made(json, `${CO}/custom-object-type-fields/`, {
      custom_object_type: crate,
      name,
      type,
      related_object_type: to,
    });
  await link("cog", "object", "custom_objects.cog");
  await link("cogs", "multiobject", "custom_objects.cog");
  await link("site", "object", "dcim.site");
  const tenant = await made(json, "/api/tenancy/tenants/", { name: "Tn", slug: "tn" });
  const site = await made(json, "/api/dcim/sites/", { name: "St", slug: "st", tenant: tenant.id });
  const [c1, c2] = [
    await made(json, `${CO}/cog/`, { name: "c1" }),
    await made(json, `${CO}/cog/`, { name: "c2" }),
  ];
  const box = await made(json, `${CO}/crate/`, {
    name: "box",
    cog: c1!.id,
    cogs: [c1!.id, c2!.id],
    site: site.id,
  });
  expect((await json("DELETE", `${CO}/crate/${box.id}/`)).status).toBe(204);
  const boxGone = await lastChange(json, "custom_objects.crate", box.id);
  // the links' targets renamed since the delete: the record's brief forms name them as they were
  expect((await json("PATCH", `${CO}/cog/${c1!.id}/`, { name: "c1 renamed" })).status).toBe(200);
  expect((await json("PATCH", `/api/dcim/sites/${site.id}/`, { name: "St renamed" })).status).toBe(
    200,
  );
  const custom = await reverted(json, boxGone.id);
  // a host model's relation: a site deleted, its tenant renamed, the site put back
  expect((await json("DELETE", `/api/dcim/sites/${site.id}/`)).status).toBe(204);
  const siteGone = await lastChange(json, "dcim.site", site.id);
  expect(
    (await json("PATCH", `/api/tenancy/tenants/${tenant.id}/`, { name: "Tn new" })).status,
  ).toBe(200);
  const host = await reverted(json, siteGone.id);
  // an update's revert: the tenant cleared, renamed again, the clearing reverted
  expect((await json("PATCH", `/api/dcim/sites/${site.id}/`, { tenant: null })).status).toBe(200);
  const cleared = await lastChange(json, "dcim.site", site.id);
  expect(
    (await json("PATCH", `/api/tenancy/tenants/${tenant.id}/`, { name: "Tn last" })).status,
  ).toBe(200);
  const updated = await reverted(json, cleared.id);
  return { custom, host, updated };
}

test("a revert's changes.<link>.to is the link as the object shows it: locally, remotely and on D1", async () => {
  const runs = {
    local: await scenario(jsonOf(apps.local)),
    remote: await scenario(jsonOf(apps.remote)),
    d1: await scenario((m, p, b) => apps.d1.json(m, p, b)),
  };
  for (const [where, run] of Object.entries(runs)) {
    for (const answer of [...run.custom, ...run.host, ...run.updated])
      expect([where, pairs(answer)]).toEqual([where, agreeing(answer)]);
    const [dry, done] = run.custom;
    expect(done!.changes.cog!.to).toMatchObject({ display: "c1 renamed" });
    expect(done!.changes.cogs!.to).toMatchObject([{ display: "c1 renamed" }, { display: "c2" }]);
    expect(dry!.changes.site!.to).toMatchObject({ display: "St renamed" });
    expect(run.host[1]!.changes.tenant!.to).toMatchObject({ name: "Tn new" });
    expect(run.updated[0]!.changes.tenant!.to).toMatchObject({ name: "Tn last" });
  }
});
