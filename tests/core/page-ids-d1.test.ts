/**
 * A page's ids ride as one JSON value (decision 0192, after 0188): on Cloudflare D1 (miniflare's),
 * a page of 300 objects loaded by id (`Resource.load`: the rows, their tags, their many-to-many
 * links; their nested forms; the response budget's row sizes) sends D1 the same statement texts
 * as a page of 3, and a GraphQL answer's choice sets read for three fields in the same text as
 * for one. (A REST list on D1 reads its page through `loadPlan`; a local file's through `load`.)
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { servicesOf } from "../../src/app";
import { ResponseBudget, chargeRows } from "../../src/core/rest/budget";
import type { ReadContext } from "../../src/core/rest/resource";
import { d1Database } from "../../src/db/d1";
import { BASE } from "../helpers/app";
import { type D1App, startD1App, statementRecorder } from "../helpers/d1-app";
import { settleBeforeCounting } from "../helpers/settle";

// wrangler's migration run takes 10–30 s on a busy machine
setDefaultTimeout(180_000);

const CO = "/api/plugins/custom-objects";
const MANY = 300;
let d1: D1App;
/** The statement texts the app prepares on D1. */
const statements = statementRecorder();

beforeAll(async () => {
  d1 = await startD1App("page-ids", (_db, binding) => d1Database(statements.wrap(binding)));
  await d1.made("/api/extras/tags/", { name: "pi tag", slug: "pi-tag" });
  const sites = Array.from({ length: MANY }, (_, i) => ({
    name: `pi site ${i}`,
    slug: `pi-site-${i}`,
    description: "x".repeat(i % 200),
    tags: [{ slug: "pi-tag" }],
  }));
  await d1.made("/api/dcim/sites/", sites);
  const group = await d1.made("/api/users/groups/", { name: "pi group" });
  await d1.made(
    "/api/users/owners/",
    Array.from({ length: MANY }, (_, i) => ({ name: `pi owner ${i}`, user_groups: [group.id] })),
  );
  const sets: number[] = [];
  for (const name of ["a", "b", "c"])
    sets.push(
      (
        await d1.made("/api/extras/custom-field-choice-sets/", {
          name: `pi ${name}`,
          extra_choices: [[name, `label ${name}`]],
        })
      ).id,
    );
  const cot = await d1.made(`${CO}/custom-object-types/`, { name: "pi_obj", slug: "pi_obj" });
  for (const [i, set] of sets.entries())
    await d1.made(`${CO}/custom-object-type-fields/`, {
      custom_object_type: cot.id,
      name: `s${i}`,
      type: "select",
      choice_set: set,
    });
  await d1.made(`${CO}/pi_obj/`, { s0: "a", s1: "b", s2: "c" });
});
afterAll(() => d1?.stop());

/** The answer to a request and the statement texts it sent D1 (background settled). */
async function sent(method: string, path: string, body?: unknown) {
  const { answer: r, texts: sentTexts } = await texts(() => d1.json(method, path, body));
  if (r.status !== 200) throw new Error(`${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return { body: r.body, texts: sentTexts };
}

/** What a page's load does with `ids`: the rows and their links, nested forms, row sizes. */
async function loadPage(appLabel: string, model: string, ids: number[]) {
  const services = servicesOf(d1.app);
  const ctx: ReadContext = {
    db: services.db.reader,
    services,
    baseUrl: BASE,
    budget: new ResponseBudget(1e9),
  };
  const info = (await services.models.get(appLabel, model, ctx))!;
  const resource = info.resource!;
  await chargeRows(ctx, resource, ids);
  const records = await resource.load(ctx, ids);
  const nested = await info.nested(ctx, ids);
  return { records, nested: [...nested.keys()], used: ctx.budget!.used };
}

/** The answer of `work` and the statement texts it sent D1 (background settled). */
async function texts<T>(work: () => Promise<T>) {
  await settleBeforeCounting(d1.app, () => d1.json("GET", "/api/status/"));
  return statements.sent(work);
}

for (const [what, path, appLabel, model] of [
  ["sites (rows, tags, row sizes, nested forms)", "/api/dcim/sites/", "dcim", "site"],
  ["owners (rows, many-to-many groups)", "/api/users/owners/", "users", "owner"],
] as const)
  test(`a page of ${MANY} ${what} loaded by id sends D1 the statement texts a page of 3 does`, async () => {
    const listed = await d1.json("GET", `${path}?limit=${MANY}&ordering=id&fields=id`);
    const ids = listed.body.results.map((r: { id: number }) => r.id) as number[];
    expect(ids).toHaveLength(MANY);
    await texts(() => loadPage(appLabel, model, ids.slice(0, 3))); // warm the caches
    const few = await texts(() => loadPage(appLabel, model, ids.slice(0, 3)));
    const many = await texts(() => loadPage(appLabel, model, ids));
    expect(few.answer.records.map((r) => r.id)).toEqual(ids.slice(0, 3));
    expect(many.answer.records.map((r) => r.id)).toEqual(ids);
    expect(many.answer.nested).toHaveLength(MANY);
    expect(many.answer.records.slice(0, 3)).toEqual(few.answer.records);
    expect(many.answer.used).toBeGreaterThan(few.answer.used);
    expect(few.texts.length).toBeGreaterThan(0);
    expect(many.texts).toEqual(few.texts);
  });

test("a GraphQL answer reads three fields' choice sets in the statement text it reads one in", async () => {
  const ask = (fields: string) =>
    sent("POST", "/graphql/", { query: `{ custom_objects_pi_obj_list { ${fields} } }` });
  const choiceSetReads = (texts: string[]) =>
    texts.filter((t) => /from "custom_field_choice_sets" where/i.test(t));
  await ask("s0 { label }");
  const one = await ask("s0 { label }");
  const three = await ask("s0 { label } s1 { label } s2 { label }");
  expect(one.body.data.custom_objects_pi_obj_list[0].s0.label).toBe("label a");
  expect(three.body.data.custom_objects_pi_obj_list[0].s2.label).toBe("label c");
  expect(choiceSetReads(one.texts)).toHaveLength(1);
  expect(choiceSetReads(three.texts)).toEqual(choiceSetReads(one.texts));
});
