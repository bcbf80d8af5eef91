/**
 * Two writers racing for one reverse relation name (`related_name`) on one related object type
 * (decision 0156): writer A's batch is held after its read phase while writer B takes the name
 * and commits, then A's batch goes. The database refuses A's batch (its unique index); A answers
 * what the same write sent afterwards answers (the read check's 400), and one field holds the name. A REST update, a REST create and a
 * schema apply, each raced by a REST update; every backend runs the same scenario.
 */
import { expect } from "bun:test";
import type { HeldWrite } from "../helpers/hold-write";
import type { Json } from "../helpers/three-backends";

const CO = "/api/plugins/custom-objects";
const FIELDS = `${CO}/custom-object-type-fields/`;
const APPLY = `${CO}/schema/apply/`;

/** Holds writer A's next write whose statements match (`holdNextWrite` on A's database). */
type Hold = (match: (sql: string[]) => boolean) => HeldWrite;

const touches = (verb: "insert into" | "update") => (sql: string[]) =>
  sql.some((s) => s.toLowerCase().startsWith(`${verb} "custom_object_type_fields"`));

const siteField = (name: string, related_name: string) => ({
  name,
  type: "object",
  related_object_type: "dcim.site",
  related_name,
});
/** The same field in a schema document (`id` is its schema id). */
const documentField = (id: number, name: string, related_name: string) => ({
  ...siteField(name, related_name),
  id,
  related_object_type: "dcim/site",
});

/** Runs `write` (A's) held at its batch while `meanwhile` (B's) answers, then lets it go. */
async function raced(
  hold: Hold,
  match: (sql: string[]) => boolean,
  write: () => Promise<{ status: number; body: any }>,
  meanwhile: () => Promise<{ status: number; body: any }>,
) {
  const held = hold(match);
  try {
    const writing = write();
    await held.arrived;
    const between = await meanwhile();
    expect(between.status, JSON.stringify(between.body)).toBe(200);
    held.release();
    return await writing;
  } finally {
    held.release();
  }
}

/**
 * Per race: A's answer, the answer to A's write sent again unraced, and the fields holding the name
 * afterwards (as `type.field`).
 */
export async function reverseNameRaces(
  a: Json,
  b: Json,
  hold: Hold,
  prefix: string,
  /** A local file's apply is a long write: its reads run under the write lock, nothing to race. */
  { apply = true } = {},
) {
  const made = async (path: string, body: unknown) => {
    const r = await a("POST", path, body);
    expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
    return r.body;
  };
  const typeA = await made(`${CO}/custom-object-types/`, {
    name: `${prefix}_a`,
    slug: `${prefix}_a`,
  });
  const typeB = await made(`${CO}/custom-object-types/`, {
    name: `${prefix}_b`,
    slug: `${prefix}_b`,
  });
  const home = await made(FIELDS, {
    custom_object_type: typeA.id,
    ...siteField("home", `${prefix}_ra`),
  });
  const base = await made(FIELDS, {
    custom_object_type: typeB.id,
    ...siteField("base", `${prefix}_rb`),
  });
  const slugC = `${prefix}_c`;
  const typeC = (fields: unknown[]) => ({
    schema: { schema_version: "1", types: [{ name: slugC, slug: slugC, fields }] },
  });
  await made(APPLY, typeC([documentField(1, "home", `${prefix}_rc`)]));
  const takeForB = (name: string) => () =>
    b("PATCH", `${FIELDS}${base.id}/`, { related_name: name });
  const holders = async (name: string) => {
    const types = (await a("GET", `${CO}/custom-object-types/?slug__isw=${prefix}_`)).body.results;
    const slugOf = new Map(types.map((t: { id: number; slug: string }) => [t.id, t.slug]));
    return (await a("GET", `${FIELDS}?related_name=${name}&limit=100`)).body.results.map(
      (f: { custom_object_type: number; name: string }) =>
        `${slugOf.get(f.custom_object_type)}.${f.name}`,
    );
  };
  const race = async (
    name: string,
    match: (sql: string[]) => boolean,
    write: () => Promise<any>,
  ) => {
    const answer = await raced(hold, match, write, takeForB(name));
    // the same write sent again, unraced: the read check's answer, which the raced one must be
    const again = await write();
    return {
      status: answer.status,
      body: answer.body,
      again: { status: again.status, body: again.body },
      holders: await holders(name),
    };
  };
  return {
    update: await race(`${prefix}_one`, touches("update"), () =>
      a("PATCH", `${FIELDS}${home.id}/`, { related_name: `${prefix}_one` }),
    ),
    create: await race(`${prefix}_two`, touches("insert into"), () =>
      a("POST", FIELDS, { custom_object_type: typeA.id, ...siteField("work", `${prefix}_two`) }),
    ),
    apply: !apply
      ? null
      : await race(`${prefix}_three`, touches("insert into"), () =>
          a(
            "POST",
            APPLY,
            typeC([
              documentField(1, "home", `${prefix}_rc`),
              documentField(2, "work", `${prefix}_three`),
            ]),
          ),
        ),
  };
}
