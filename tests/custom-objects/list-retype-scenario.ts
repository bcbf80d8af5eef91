/**
 * Lists of field updates that change types (decision 0142) as one scenario every backend runs:
 * values SQLite converts and values read and bound, in one read of values and one batch, a lossy
 * item gated (409), a refused item a 400 in its place; nothing written when one fails.
 * Answers a summary without ids or times.
 */
import { expect } from "bun:test";
import type { Json } from "../helpers/three-backends";
import { placed } from "./fixtures";

const CO = "/api/plugins/custom-objects";

export async function listRetypeScenario(json: Json, prefix: string) {
  const fields = `${CO}/custom-object-type-fields/`;
  const [a, b] = (
    await json("POST", `${CO}/custom-object-types/`, [
      { name: `${prefix}_ra`, slug: `${prefix}_ra` },
      { name: `${prefix}_rb`, slug: `${prefix}_rb` },
    ])
  ).body;
  const made = await json("POST", fields, [
    { custom_object_type: a.id, name: "code", type: "text" },
    { custom_object_type: a.id, name: "size", type: "integer" },
    { custom_object_type: a.id, name: "label", type: "text" },
    { custom_object_type: b.id, name: "flag", type: "boolean" },
  ]);
  expect(made.status, JSON.stringify(made.body)).toBe(201);
  const [code, size, label, flag] = made.body.map((f: { id: number }) => f.id);
  for (const row of [
    { code: "12", size: 1, label: "x" },
    { code: "twelve", size: 2 },
  ])
    expect((await json("POST", `${CO}/${prefix}_ra/`, row)).status).toBe(201);
  expect((await json("POST", `${CO}/${prefix}_rb/`, { flag: true })).status).toBe(201);
  // "twelve" is no integer: gated without allow_destructive, nothing written
  const lossy = await json("PATCH", fields, [
    { id: size, type: "text" },
    { id: code, type: "integer" },
  ]);
  // a relation is no column's new type: 400 on that item, nothing written
  const refusing = [
    { id: size, type: "text" },
    { id: code, type: "object", related_object_type: "dcim.site" },
  ];
  const refused = await json("PATCH", fields, refusing);
  const kept = (await json("GET", `${CO}/${prefix}_ra/?ordering=id`)).body.results;
  const changed = await json("PATCH", `${fields}?allow_destructive=true`, [
    { id: label, name: "tag" },
    { id: code, type: "integer" },
    { id: size, type: "text" },
    { id: flag, type: "text" },
  ]);
  const rowsA = (await json("GET", `${CO}/${prefix}_ra/?ordering=id`)).body.results;
  const rowsB = (await json("GET", `${CO}/${prefix}_rb/`)).body.results;
  const found = await json("GET", `${CO}/${prefix}_ra/?code=12`);
  const changes = await json(
    "GET",
    `/api/core/object-changes/?changed_object_type=custom_objects.customobjecttypefield&limit=1000&ordering=id`,
  );
  const ids = new Set([code, size, label, flag]);
  return {
    lossy: [lossy.status, lossy.body],
    refused: [refused.status, placed(refused.body, refusing)],
    kept: kept.map((r: any) => [r.code, r.size]),
    changed: [
      changed.status,
      Array.isArray(changed.body)
        ? changed.body.map((f: any) => `${f.name}:${f.type}`)
        : changed.body,
    ],
    rows: [
      ...rowsA.map((r: any) => [r.code, r.size, r.tag ?? null]),
      ...rowsB.map((r: any) => [r.flag]),
    ],
    found: found.body.count,
    changes: changes.body.results
      .filter((c: { changed_object_id: number }) => ids.has(c.changed_object_id))
      .map((c: any) => `${c.action.value}:${c.postchange_data?.name}:${c.postchange_data?.type}`),
  };
}

/**
 * A list whose second item retypes a field a compound key holds, the converted values clashing
 * ("1" and "01" both become 1): the transaction's 400 in that item's place, nothing written.
 */
export async function listRetypeKeyScenario(json: Json, prefix: string) {
  const fields = `${CO}/custom-object-type-fields/`;
  const [a, b] = (
    await json("POST", `${CO}/custom-object-types/`, [
      { name: `${prefix}_ka`, slug: `${prefix}_ka` },
      { name: `${prefix}_kb`, slug: `${prefix}_kb` },
    ])
  ).body;
  const made = await json("POST", fields, [
    { custom_object_type: a.id, name: "part", type: "text" },
    { custom_object_type: a.id, name: "queue", type: "text" },
    { custom_object_type: b.id, name: "note", type: "text" },
  ]);
  expect(made.status, JSON.stringify(made.body)).toBe(201);
  const [p, , note] = made.body.map((f: { id: number }) => f.id);
  const keyed = await json("PATCH", `${CO}/custom-object-types/${a.id}/`, {
    unique_together: [["part", "queue"]],
  });
  expect(keyed.status, JSON.stringify(keyed.body)).toBe(200);
  for (const row of [
    { part: "1", queue: "a" },
    { part: "01", queue: "a" },
  ])
    expect((await json("POST", `${CO}/${prefix}_ka/`, row)).status).toBe(201);
  const clashing = [
    { id: note, name: "remark" },
    { id: p, type: "integer" },
  ];
  const clash = await json("PATCH", `${fields}?allow_destructive=true`, clashing);
  const after = await json("GET", `${fields}?id=${p}&id=${note}&ordering=id`);
  const rows = (await json("GET", `${CO}/${prefix}_ka/?ordering=id`)).body.results;
  return {
    clash: [clash.status, placed(clash.body, clashing)],
    fields: after.body.results.map((f: any) => `${f.name}:${f.type}`),
    rows: rows.map((r: any) => r.part),
  };
}

/**
 * A list whose last item retypes a field a compound key and a check read, after earlier items
 * of the same list already changed that type: a key field renamed and retyped (its values read
 * and converted: "7" and "07" both 7), another field retyped by SQLite. The last item's 400 is
 * counted over the table as the earlier items leave it (the key clashes only on the converted
 * values), in its place; then the same list passes. Nothing is written by a refused list.
 */
export async function listRetypeAfterEarlierScenario(json: Json, prefix: string) {
  const fields = `${CO}/custom-object-type-fields/`;
  const slug = `${prefix}_ea`;
  const [a] = (await json("POST", `${CO}/custom-object-types/`, [{ name: slug, slug }])).body;
  const made = await json("POST", fields, [
    { custom_object_type: a.id, name: "part", type: "text" },
    { custom_object_type: a.id, name: "queue", type: "text" },
    { custom_object_type: a.id, name: "size", type: "integer" },
  ]);
  expect(made.status, JSON.stringify(made.body)).toBe(201);
  const [part, queue, size] = made.body.map((f: { id: number }) => f.id);
  const keyed = await json("PATCH", `${CO}/custom-object-types/${a.id}/`, {
    unique_together: [["part", "queue"]],
    checks: [{ name: "parted", condition: { part__isnull: false } }],
  });
  expect(keyed.status, JSON.stringify(keyed.body)).toBe(200);
  const one = await json("POST", `${CO}/${slug}/`, { part: "1", queue: "7", size: 1 });
  const two = await json("POST", `${CO}/${slug}/`, { part: "x", queue: "07", size: 2 });
  expect([one.status, two.status]).toEqual([201, 201]);
  const sent = [
    { id: queue, name: "lane", type: "integer" },
    { id: size, type: "text" },
    { id: part, type: "integer" },
  ];
  const list = () => json("PATCH", `${fields}?allow_destructive=true`, sent);
  const state = async () => ({
    fields: (
      await json("GET", `${fields}?custom_object_type=${a.id}&ordering=id`)
    ).body.results.map((f: any) => `${f.name}:${f.type}`),
    rows: (await json("GET", `${CO}/${slug}/?ordering=id`)).body.results.map((r: any) => [
      r.part,
      r.queue ?? r.lane,
      r.size,
    ]),
  });
  // "x" is lost (allowed): the check refuses its row
  const check = await list();
  const afterCheck = await state();
  // "01" and "1" both 1, "07" and "7" both 7 (the first item's conversion): the key clashes
  expect((await json("PATCH", `${CO}/${slug}/${two.body.id}/`, { part: "01" })).status).toBe(200);
  const clash = await list();
  const afterClash = await state();
  expect((await json("PATCH", `${CO}/${slug}/${two.body.id}/`, { part: "2" })).status).toBe(200);
  const done = await list();
  const type = (await json("GET", `${CO}/custom-object-types/${a.id}/`)).body;
  // both hold on the new columns
  const twice = await json("POST", `${CO}/${slug}/`, { part: 1, lane: 7 });
  const partless = await json("POST", `${CO}/${slug}/`, { lane: 3 });
  return {
    check: [check.status, placed(check.body, sent)],
    afterCheck,
    clash: [clash.status, placed(clash.body, sent)],
    afterClash,
    done: [
      done.status,
      Array.isArray(done.body) ? done.body.map((f: any) => `${f.name}:${f.type}`) : done.body,
    ],
    afterDone: await state(),
    keys: [type.unique_together, type.checks],
    refused: [twice.status, twice.body, partless.status, partless.body],
  };
}

/**
 * A list retyping `k` fields whose values are read (text to integer) and then a field a compound
 * key holds, the converted values clashing: its 400 is counted over a table holding all of them
 * converted (one statement whatever `k`: it was nested a level per field, and SQLite's parser
 * overflowed at 6).
 */
export async function listManyRetypesScenario(json: Json, prefix: string, k: number) {
  const slug = `${prefix}_many`;
  const cot = (await json("POST", `${CO}/custom-object-types/`, { name: slug, slug })).body;
  const names = Array.from({ length: k }, (_, i) => `f${i}`);
  const made = await json(
    "POST",
    `${CO}/custom-object-type-fields/`,
    ["a", "b", ...names].map((name) => ({ custom_object_type: cot.id, name, type: "text" })),
  );
  expect(made.status, JSON.stringify(made.body)).toBe(201);
  const ids: number[] = made.body.map((f: { id: number }) => f.id);
  const keyed = await json("PATCH", `${CO}/custom-object-types/${cot.id}/`, {
    unique_together: [["a", "b"]],
  });
  expect(keyed.status, JSON.stringify(keyed.body)).toBe(200);
  for (const a of ["1", "01"]) {
    const row = Object.fromEntries([["a", a], ["b", "x"], ...names.map((n, i) => [n, `${i}`])]);
    expect((await json("POST", `${CO}/${slug}/`, row)).status).toBe(201);
  }
  const sent = [
    ...ids.slice(2).map((id) => ({ id, type: "integer" })),
    { id: ids[0]!, type: "integer" },
  ];
  const list = await json("PATCH", `${CO}/custom-object-type-fields/?allow_destructive=true`, sent);
  const rows = (await json("GET", `${CO}/${slug}/?ordering=id`)).body.results;
  return {
    list: [list.status, placed(list.body, sent)],
    rows: rows.map((r: Record<string, unknown>) => [r.a, r.f0]),
  };
}
