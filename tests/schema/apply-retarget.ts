/**
 * A schema apply that retargets relations (decision 0142), as one scenario every backend runs:
 * a plain reference and a multi-reference moved to another type, a polymorphic field dropping
 * one of its types, a choice set changed over values it does not offer; gated without
 * `allow_destructive`, applied with it. Answers a summary without ids or times.
 */
import { expect } from "bun:test";
import type { Json } from "../helpers/three-backends";

const CO = "/api/plugins/custom-objects";
const SCHEMA = `${CO}/schema`;

const doc = (types: unknown[]) => ({ schema_version: "1", types });

export async function retargetScenario(json: Json, prefix: string) {
  const slug = `${prefix}_holder`;
  const site = await json("POST", "/api/dcim/sites/", { name: `${prefix} s`, slug: `${prefix}-s` });
  expect(site.status, JSON.stringify(site.body)).toBe(201);
  const other = `custom-objects/${prefix}_other`;
  const otherType = {
    name: `${prefix}_other`,
    slug: `${prefix}_other`,
    fields: [{ id: 1, name: "label", type: "text" }],
  };
  const sets = ["a", "b"].map((v) => ({ name: `${prefix}_${v}`, extra_choices: [[v, v]] }));
  const fields = (home: string, links: string, any: string[], colour: string) => [
    { id: 1, name: "code", type: "text", primary: true },
    { id: 2, name: "home", type: "object", related_object_type: home },
    { id: 3, name: "links", type: "multiobject", related_object_type: links },
    {
      id: 4,
      name: "any",
      type: "object",
      is_polymorphic: true,
      related_object_types: any,
    },
    { id: 5, name: "colour", type: "select", choice_set: colour },
  ];
  const v1 = {
    ...doc([
      otherType,
      {
        name: slug,
        slug,
        fields: fields("dcim/site", "dcim/site", ["dcim/site", other], `${prefix}_a`),
      },
    ]),
    choice_sets: sets,
  };
  const first = await json("POST", `${SCHEMA}/apply/`, { schema: v1 });
  expect(first.status, JSON.stringify(first.body)).toBe(200);
  const made = await json("POST", `${CO}/${slug}/`, {
    code: "one",
    home: site.body.id,
    links: [site.body.id],
    any: { object_type: "dcim.site", object_id: site.body.id },
    colour: "a",
  });
  expect(made.status, JSON.stringify(made.body)).toBe(201);
  const v2 = {
    ...doc([
      otherType,
      {
        name: slug,
        slug,
        fields: fields(other, other, [other], `${prefix}_b`),
      },
    ]),
    choice_sets: sets,
  };
  const gated = await json("POST", `${SCHEMA}/apply/`, { schema: v2 });
  expect(gated.status, JSON.stringify(gated.body)).toBe(409);
  const reasons = (gated.body.destructive_changes ?? [])
    .map((g: { reason: string; field: string }) => `${g.field}:${g.reason}`)
    .sort();
  expect((await json("GET", `${CO}/${slug}/${made.body.id}/`)).body.home?.id).toBe(site.body.id);
  const applied = await json("POST", `${SCHEMA}/apply/`, { schema: v2, allow_destructive: true });
  expect(applied.status, JSON.stringify(applied.body)).toBe(200);
  const after = (await json("GET", `${CO}/${slug}/${made.body.id}/`)).body;
  const type = (await json("GET", `${CO}/custom-object-types/?slug=${slug}`)).body.results[0];
  const flipped = await json("POST", `${SCHEMA}/apply/`, {
    schema: {
      ...doc([
        otherType,
        {
          name: slug,
          slug,
          fields: [
            ...fields(other, other, [other], `${prefix}_b`).slice(0, 1),
            {
              id: 2,
              name: "home",
              type: "object",
              is_polymorphic: true,
              related_object_types: [other],
            },
            ...fields(other, other, [other], `${prefix}_b`).slice(2),
          ],
        },
      ]),
      choice_sets: sets,
    },
    allow_destructive: true,
  });
  return {
    reasons,
    after: { home: after.home, links: after.links, any: after.any, colour: after.colour },
    fields: type.fields.map(
      (f: {
        name: string;
        related_object_type: { model: string } | null;
        related_object_types: Array<{ model: string }>;
      }) => [
        f.name,
        f.related_object_type?.model ?? null,
        f.related_object_types.map((r) => r.model),
      ],
    ),
    flipped: { status: flipped.status, body: flipped.body },
  };
}
