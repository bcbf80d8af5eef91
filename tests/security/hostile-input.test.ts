/**
 * Hostile input never answers 5xx (DESIGN.md §4, issue 12 item 5): prototype names as query and
 * JSON keys on every endpoint, reserved field names, and the documented input limits of
 * src/core/limits.ts (docs/decisions/0009-input-limits.md), each pinned over HTTP.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, BASE, type TestApp } from "../helpers/app";
import { CO, addField, makeCot } from "../custom-objects/fixtures";
import { CORE_MODELS } from "../../src/core/routes";
import {
  MAX_COLUMNS_PER_TYPE,
  MAX_FILTER_VALUES,
  MAX_JSON_DEPTH,
  MAX_PAGING_VALUE,
} from "../../src/core/limits";

let t: TestApp;
/** Every list endpoint the app serves, with one object's detail path where it can be written. */
const endpoints: {
  list: string;
  detail: string | null;
  make: (() => Record<string, unknown>) | null;
}[] = [];

const PROTOTYPE_KEYS = [
  "constructor",
  "__proto__",
  "toString",
  "hasOwnProperty",
  "valueOf",
  "isPrototypeOf",
  "__defineGetter__",
];

/** A §4 error body: `{detail, error?}`, a DRF field map `{field: [messages]}`, or a list of those. */
function expectErrorShape(body: unknown) {
  const one = (b: unknown) => {
    expect(b !== null && typeof b === "object" && !Array.isArray(b)).toBe(true);
    const o = b as Record<string, unknown>;
    if (typeof o.detail === "string") return;
    for (const value of Object.values(o)) {
      expect(Array.isArray(value) || (value !== null && typeof value === "object")).toBe(true);
    }
  };
  if (Array.isArray(body)) body.forEach(one);
  else one(body);
}

/** Valid create bodies for every writable endpoint; a model added without one fails the loop below. */
async function fixtures(): Promise<Record<string, unknown>> {
  const site = await t.json("POST", "/api/dcim/sites/", {
    body: { name: "Fixture site", slug: "fixture-site" },
  });
  const hook = await t.json("POST", "/api/extras/webhooks/", {
    body: { name: "fixture-hook", payload_url: "https://hooks.example.invalid/" },
  });
  const me = await t.json("GET", "/api/users/users/?username=admin");
  const cot = await makeCot(t, "widget");
  await addField(t, cot.id, { name: "title", type: "text", primary: true });
  await addField(t, cot.id, { name: "size", type: "integer" });
  let n = 0;
  const unique = () => `hostile${++n}`;
  return {
    "dcim/sites": () => ({ name: unique(), slug: unique() }),
    "dcim/devices": () => ({ name: unique(), site: site.body.id }),
    "ipam/prefixes": () => ({ prefix: `10.${++n}.0.0/16` }),
    "ipam/ip-addresses": () => ({ address: `10.0.0.${++n}/24` }),
    "tenancy/tenants": () => ({ name: unique(), slug: unique() }),
    "extras/tags": () => ({ name: unique(), slug: unique() }),
    "extras/custom-field-choice-sets": () => ({ name: unique(), extra_choices: [["a", "A"]] }),
    "users/users": () => ({ username: unique() }),
    "users/groups": () => ({ name: unique() }),
    "users/permissions": () => ({ name: unique(), actions: ["view"], object_types: ["dcim.site"] }),
    "users/tokens": () => ({ user: me.body.results[0].id }),
    "users/owners": () => ({ name: unique() }),
    "users/owner-groups": () => ({ name: unique() }),
    "extras/webhooks": () => ({ name: unique(), payload_url: "https://hooks.example.invalid/" }),
    "extras/event-rules": () => ({
      name: unique(),
      object_types: ["dcim.site"],
      event_types: ["object_created"],
      action_type: "webhook",
      action_object_type: "extras.webhook",
      action_object_id: hook.body.id,
    }),
    "plugins/custom-objects/custom-object-types": () => ({ name: unique(), slug: unique() }),
    "plugins/custom-objects/custom-object-type-fields": () => ({
      custom_object_type: cot.id,
      name: unique(),
      type: "text",
    }),
    "plugins/custom-objects/widget": () => ({ title: unique(), size: 3 }),
  };
}

beforeAll(async () => {
  t = await makeTestApp();
  const bodies = (await fixtures()) as Record<string, () => Record<string, unknown>>;
  const paths = [
    ...CORE_MODELS.map((m) => m.spec.path),
    "plugins/custom-objects/custom-object-types",
    "plugins/custom-objects/custom-object-type-fields",
    "plugins/custom-objects/widget",
  ];
  for (const path of paths) {
    const list = `/api/${path}/`;
    const probe = await t.req("POST", list, { body: {} });
    if (probe.status === 405) {
      endpoints.push({ list, detail: null, make: null });
      continue;
    }
    const make = bodies[path];
    if (!make)
      throw new Error(`no fixture body for the writable endpoint ${list}: add one to fixtures()`);
    const made = await t.json("POST", list, { body: make() });
    if (made.status !== 201)
      throw new Error(`fixture ${list}: ${made.status} ${JSON.stringify(made.body)}`);
    endpoints.push({ list, detail: `${list}${made.body.id}/`, make });
  }
}, 60_000);
afterAll(() => t.close());

describe("prototype names as query keys, on every list", () => {
  test("as filters they are unknown parameters: ignored, 200, nothing filtered away; a custom object list refuses them (0206)", async () => {
    expect(endpoints.length).toBeGreaterThanOrEqual(CORE_MODELS.length + 3);
    for (const { list } of endpoints) {
      const all = await t.json("GET", list);
      expect(all.status).toBe(200);
      // a custom object type's own list: a filter-like parameter naming no field is a 400 naming it
      const ownList = /^\/api\/plugins\/custom-objects\/(?!custom-object-type)[a-z_]+\/$/.test(
        list,
      );
      for (const key of PROTOTYPE_KEYS) {
        // `__proto__` is not shaped like a field's name: no filter, ignored there too
        const refused = ownList && /^[a-z]/i.test(key);
        for (const qs of [`${key}=1`, `${key}__ic=x`, `${key}__n=1`, `${key}_id=1`]) {
          const r = await t.json("GET", `${list}?${qs}`);
          if (r.status !== (refused ? 400 : 200))
            throw new Error(`GET ${list}?${qs} → ${r.status} ${JSON.stringify(r.body)}`);
          if (refused) expect(Object.keys(r.body)).toEqual([qs.split("=")[0]!]);
          else expect(r.body.count).toBe(all.body.count);
        }
      }
    }
  });

  test("as ordering or projection they answer 400 {ordering} / are ignored", async () => {
    for (const { list } of endpoints) {
      for (const key of PROTOTYPE_KEYS) {
        for (const term of [key, `-${key}`]) {
          const r = await t.json("GET", `${list}?ordering=${term}`);
          if (r.status !== 400)
            throw new Error(`GET ${list}?ordering=${term} → ${r.status} ${JSON.stringify(r.body)}`);
          expect(r.body.ordering).toEqual([`Cannot order by "${key}".`]);
        }
        const p = await t.json("GET", `${list}?fields=id,${key}&omit=${key}`);
        expect(p.status).toBe(200);
        for (const rec of p.body.results) expect(Object.keys(rec)).toEqual(["id"]);
      }
    }
  });
});

describe("prototype names as JSON keys, on every create and update", () => {
  test("create: 400 {key: [Unknown field.]}, single and bulk; read-only endpoints 405", async () => {
    for (const { list, detail, make } of endpoints) {
      for (const key of PROTOTYPE_KEYS) {
        // alone, next to a valid body (so validation gets past required fields), nested, in a list
        const valid = make ? `${JSON.stringify(make()).slice(1, -1)},` : "";
        for (const raw of [
          `{"${key}": 1}`,
          `{${valid} "${key}": 1}`,
          `[{${valid} "${key}": 1}]`,
          `{${valid} "${key}": {"${key}": null}}`,
        ]) {
          const alone = !valid || raw === `{"${key}": 1}`;
          const r = await t.req("POST", list, { raw });
          const body = await r.json();
          if (r.status >= 500 || r.status < 400)
            throw new Error(`POST ${list} ${raw} → ${r.status} ${JSON.stringify(body)}`);
          expect(r.status).toBe(detail ? 400 : 405);
          expectErrorShape(body);
          if (detail) {
            const fields = raw.startsWith("[") && body.errors ? body.errors[0].errors : body;
            // tokens are created one per request (their key is shown once): a list is refused as a whole
            if (raw.startsWith("[") && list === "/api/users/tokens/")
              expect(body.non_field_errors).toBeDefined();
            else if (alone) expect(Object.keys(fields).length).toBeGreaterThan(0);
            else if (!Object.hasOwn(fields, key))
              throw new Error(`POST ${list} ${raw} → ${JSON.stringify(body)}`);
            else expect(fields[key]).toEqual(["Unknown field."]);
          }
        }
      }
    }
  });

  test("update: PATCH/PUT of one object and bulk PATCH answer 400 and change nothing", async () => {
    for (const { list, detail } of endpoints) {
      if (!detail) continue;
      const before = await t.json("GET", detail);
      const id = before.body.id;
      for (const key of PROTOTYPE_KEYS) {
        for (const [method, path, raw] of [
          ["PATCH", detail, `{"${key}": 1}`],
          ["PUT", detail, `{"${key}": "x"}`],
          ["PATCH", list, `[{"id": ${id}, "${key}": 1}]`],
        ] as const) {
          const r = await t.req(method, path, { raw });
          const body = await r.json();
          if (r.status !== 400)
            throw new Error(`${method} ${path} ${raw} → ${r.status} ${JSON.stringify(body)}`);
          expectErrorShape(body);
        }
      }
      const after = await t.json("GET", detail);
      expect(after.body.last_updated).toBe(before.body.last_updated);
    }
  });
});

describe("reserved field names", () => {
  const names = [
    "constructor",
    "prototype",
    "__proto__",
    "toString",
    "hasOwnProperty",
    "valueOf",
    "tostring",
    "valueof",
    "isprototypeof",
  ];

  test("custom-object-type-fields/ refuses each with 400 {name}", async () => {
    const cot = await makeCot(t, "reserved_rest");
    for (const name of names) {
      const r = await t.json("POST", `${CO}/custom-object-type-fields/`, {
        body: { custom_object_type: cot.id, name, type: "text" },
      });
      expect(r.status).toBe(400);
      expect(r.body.name[0]).toContain("reserved");
    }
    const field = await addField(t, cot.id, { name: "plain", type: "text" });
    const rename = await t.json("PATCH", `${CO}/custom-object-type-fields/${field.id}/`, {
      body: { name: "constructor" },
    });
    expect(rename.status).toBe(400);
    expect(rename.body.name[0]).toContain("reserved");
  });

  test("schema documents refuse each in preview and apply with 400 invalid_schema", async () => {
    for (const name of names) {
      const doc = {
        schema_version: "1",
        types: [
          { name: "reserved_doc", slug: "reserved_doc", fields: [{ id: 1, name, type: "text" }] },
        ],
      };
      for (const route of ["preview", "apply"]) {
        const r = await t.json("POST", `${CO}/schema/${route}/`, { body: { schema: doc } });
        expect(r.status).toBe(400);
        expect(r.body.error).toBe("invalid_schema");
        expect(r.body.schema_errors.some((e: any) => e.path === "$.types[0].fields[0].name")).toBe(
          true,
        );
      }
    }
    expect((await t.json("GET", `${CO}/reserved_doc/`)).status).toBe(404);
  });

  test("a type that already holds a field named constructor still reads, filters and writes", async () => {
    // Stored before the name was reserved: renamed under the API, the way an old database holds it.
    const cot = await makeCot(t, "legacy");
    await addField(t, cot.id, { name: "title", type: "text", primary: true });
    const field = await addField(t, cot.id, { name: "legacy_ctor", type: "text" });
    const db = t.deps.db.orm as any;
    const { sql } = await import("drizzle-orm");
    await db.run(sql.raw(`ALTER TABLE co_${cot.id} RENAME COLUMN legacy_ctor TO "constructor"`));
    await db.run(
      sql.raw(`UPDATE custom_object_type_fields SET name = 'constructor' WHERE id = ${field.id}`),
    );
    await db.run(
      sql.raw(
        `UPDATE custom_object_types SET shape_version = shape_version + 1 WHERE id = ${cot.id}`,
      ),
    );

    const left = await t.json("POST", `${CO}/legacy/`, { body: { title: "left out" } });
    expect(left.status).toBe(201);
    expect(left.body.constructor).toBeNull();
    const set = await t.json("POST", `${CO}/legacy/`, {
      body: { title: "set", constructor: "yes" },
    });
    expect(set.status).toBe(201);
    expect(set.body.constructor).toBe("yes");
    const filtered = await t.json("GET", `${CO}/legacy/?constructor=yes`);
    expect(filtered.status).toBe(200);
    expect(filtered.body.results.map((r: any) => r.title)).toEqual(["set"]);
    const patched = await t.json("PATCH", `${CO}/legacy/${left.body.id}/`, {
      body: { title: "patched" },
    });
    expect(patched.status).toBe(200);
    expect(patched.body.constructor).toBeNull();
  });
});

describe("numeric filters", () => {
  test("a number with 400 digits answers 400 keyed by the parameter", async () => {
    const big = "9".repeat(400);
    for (const { list } of endpoints) {
      for (const qs of [`id=${big}`, `id__gt=${big}`, `id=-${big}`, `id=0.${big}`]) {
        const r = await t.json("GET", `${list}?${qs}`);
        if (r.status !== 400)
          throw new Error(
            `GET ${list}?${qs.slice(0, 20)}… → ${r.status} ${JSON.stringify(r.body)}`,
          );
        expect(Object.keys(r.body)).toEqual([qs.split("=")[0]!]);
      }
    }
    // custom object filters: integer fields and multiobject ids
    const r = await t.json("GET", `${CO}/widget/?size__lt=${big}`);
    expect(r.status).toBe(400);
    expect(r.body.size__lt[0]).toContain("number");
  });

  test("numbers up to 2^53 - 1 still filter", async () => {
    const r = await t.json("GET", `/api/dcim/sites/?id=${Number.MAX_SAFE_INTEGER}`);
    expect(r.status).toBe(200);
    expect(r.body.count).toBe(0);
  });
});

describe("values per filter", () => {
  test(`${MAX_FILTER_VALUES} values pass; ${MAX_FILTER_VALUES + 1} (or 999) answer 400 naming the limit`, async () => {
    const values = (n: number) => Array.from({ length: n }, (_, i) => `id=${i + 1}`).join("&");
    for (const { list } of endpoints) {
      expect((await t.json("GET", `${list}?${values(MAX_FILTER_VALUES)}`)).status).toBe(200);
      for (const n of [MAX_FILTER_VALUES + 1, 999]) {
        const r = await t.json("GET", `${list}?${values(n)}`);
        if (r.status !== 400)
          throw new Error(
            `GET ${list} with ${n} ids → ${r.status} ${JSON.stringify(r.body).slice(0, 200)}`,
          );
        expect(r.body.id[0]).toContain(`at most ${MAX_FILTER_VALUES} values`);
      }
    }
    const names = Array.from({ length: 999 }, (_, i) => `name__n=x${i}`).join("&");
    const r = await t.json("GET", `/api/dcim/sites/?${names}`);
    expect(r.status).toBe(400);
    expect(r.body.name__n[0]).toContain(`at most ${MAX_FILTER_VALUES} values`);
  });

  test("many different filter parameters and ordering terms answer 400, not SQLite errors", async () => {
    const lookups = [
      "",
      "__n",
      "__ic",
      "__nic",
      "__isw",
      "__nisw",
      "__iew",
      "__niew",
      "__ie",
      "__nie",
    ];
    const many = ["name", "slug", "description", "facility"]
      .flatMap((f) => lookups.map((l) => `${f}${l}=zz`))
      .concat(
        ["", "__n", "__gt", "__gte", "__lt", "__lte"].flatMap((l) => [
          `id${l}=1`,
          `created${l}=2020-01-01`,
        ]),
      )
      .join("&");
    const r = await t.json("GET", `/api/dcim/sites/?${many}`);
    expect(r.status).toBe(400);
    expect(r.body.non_field_errors[0]).toContain("filter parameters");
    const o = await t.json(
      "GET",
      `/api/dcim/sites/?ordering=${Array(1000).fill("name").join(",")}`,
    );
    expect(o.status).toBe(400);
    expect(o.body.ordering[0]).toContain("at most");
  });
});

describe("paging", () => {
  test("an offset above 2^53 or any absurd offset/limit answers 400; links stay exact", async () => {
    for (const { list } of endpoints) {
      for (const qs of [
        "offset=9007199254740993",
        `offset=${"9".repeat(400)}`,
        `limit=${"9".repeat(400)}`,
        `offset=${MAX_PAGING_VALUE + 1}`,
        `limit=${MAX_PAGING_VALUE + 1}`,
      ]) {
        const r = await t.json("GET", `${list}?${qs}`);
        if (r.status !== 400)
          throw new Error(
            `GET ${list}?${qs.slice(0, 30)} → ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`,
          );
        const param = qs.split("=")[0]!;
        expect(r.body[param][0]).toContain(String(MAX_PAGING_VALUE));
      }
    }
    const edge = await t.json("GET", `/api/dcim/sites/?limit=5&offset=${MAX_PAGING_VALUE}`);
    expect(edge.status).toBe(200);
    expect(edge.body.previous).toBe(
      `${BASE}/api/dcim/sites/?limit=5&offset=${MAX_PAGING_VALUE - 5}`,
    );
    expect(JSON.stringify(edge.body)).not.toContain("Infinity");
    // leading zeros are still the same number
    expect((await t.json("GET", `/api/dcim/sites/?offset=${"0".repeat(40)}1`)).status).toBe(200);
  });
});

describe("JSON depth", () => {
  const nested = (n: number, open = "[", close = "]") => open.repeat(n) + close.repeat(n);

  test(`bodies nested 40,000 deep answer 400 naming the limit of ${MAX_JSON_DEPTH}, on every JSON route`, async () => {
    const deepObject = `${'{"a":'.repeat(40_000)}1${"}".repeat(40_000)}`;
    const routes: [string, string][] = [
      ...endpoints.filter((e) => e.detail).map(({ list }) => ["POST", list] as [string, string]),
      ...endpoints
        .filter((e) => e.detail)
        .map(({ detail }) => ["PATCH", detail!] as [string, string]),
      ["POST", `${CO}/schema/preview/`],
      ["POST", `${CO}/schema/apply/`],
      ["POST", "/api/users/tokens/provision/"],
    ];
    for (const [method, path] of routes) {
      for (const raw of [nested(40_000), deepObject, `{"title": "x", "blob": ${deepObject}}`]) {
        const r = await t.req(method, path, { raw });
        const body = await r.json();
        if (r.status !== 400)
          throw new Error(`${method} ${path} → ${r.status} ${JSON.stringify(body).slice(0, 200)}`);
        expect(body).toEqual({
          detail: `JSON nests deeper than the limit of ${MAX_JSON_DEPTH} levels of arrays and objects.`,
          error: "json_too_deep",
          limit: MAX_JSON_DEPTH,
        });
      }
    }
  });

  test(`${MAX_JSON_DEPTH} levels are accepted; brackets inside strings do not count`, async () => {
    const cot = await makeCot(t, "deep_json");
    await addField(t, cot.id, { name: "blob", type: "json" });
    const ok = await t.json("POST", `${CO}/deep_json/`, {
      body: { blob: JSON.parse(nested(MAX_JSON_DEPTH - 1)) },
    });
    expect(ok.status).toBe(201);
    const strings = await t.json("POST", `${CO}/deep_json/`, { body: { blob: "[{".repeat(5000) } });
    expect(strings.status).toBe(201);
    const escaped = await t.req("POST", `${CO}/deep_json/`, { raw: `{"blob": "\\\\\\"[[[[" }` });
    expect(escaped.status).toBe(201);
    const over = await t.json("POST", `${CO}/deep_json/`, {
      body: { blob: JSON.parse(nested(MAX_JSON_DEPTH)) },
    });
    expect(over.status).toBe(400);
    expect(over.body.error).toBe("json_too_deep");
  });
});

describe(`columns per type (limit ${MAX_COLUMNS_PER_TYPE})`, () => {
  const fields = (n: number, extra: Record<string, unknown>[] = []) => [
    ...Array.from({ length: n }, (_, i) => ({ id: i + 1, name: `f${i}`, type: "text" })),
    ...extra,
  ];
  const doc = (fs: unknown[]) => ({
    schema: { schema_version: "1", types: [{ name: "wide", slug: "wide", fields: fs }] },
  });

  test("schema preview and apply refuse a type above the limit at once, naming it", async () => {
    const polymorphic = {
      id: MAX_COLUMNS_PER_TYPE,
      name: "poly",
      type: "object",
      is_polymorphic: true,
      related_object_types: ["dcim/site", "dcim/device"],
    };
    for (const fs of [
      fields(MAX_COLUMNS_PER_TYPE + 1),
      fields(MAX_COLUMNS_PER_TYPE - 1, [polymorphic]),
      fields(2100),
    ]) {
      for (const route of ["preview", "apply"]) {
        const r = await t.json("POST", `${CO}/schema/${route}/`, { body: doc(fs) });
        expect(r.status).toBe(400);
        expect(r.body.error).toBe("invalid_schema");
        expect(r.body.schema_errors[0].path).toBe("$.types[0].fields");
        expect(r.body.schema_errors[0].message).toContain(
          `at most ${MAX_COLUMNS_PER_TYPE} columns`,
        );
      }
    }
    expect((await t.json("GET", `${CO}/wide/`)).status).toBe(404);
  });

  test("at the limit: one more field (REST or a document keeping the others) answers 400", async () => {
    const applied = await t.json("POST", `${CO}/schema/apply/`, {
      body: doc(fields(MAX_COLUMNS_PER_TYPE)),
    });
    expect(applied.status).toBe(200);
    const cot = (await t.json("GET", `${CO}/custom-object-types/?slug=wide`)).body.results[0];
    const r = await t.json("POST", `${CO}/custom-object-type-fields/`, {
      body: { custom_object_type: cot.id, name: "extra", type: "integer" },
    });
    expect(r.status).toBe(400);
    expect(r.body.non_field_errors[0]).toContain(`at most ${MAX_COLUMNS_PER_TYPE} columns`);
    // a document listing only a new field keeps the 500 in the database: 501 in all
    const kept = doc([{ id: MAX_COLUMNS_PER_TYPE + 1, name: "extra", type: "text" }]);
    for (const route of ["preview", "apply"]) {
      const p = await t.json("POST", `${CO}/schema/${route}/`, { body: kept });
      expect(p.status).toBe(400);
      expect(p.body.schema_errors[0].message).toContain(`at most ${MAX_COLUMNS_PER_TYPE} columns`);
    }
    // the wide type itself works
    const made = await t.json("POST", `${CO}/wide/`, {
      body: { f0: "a", [`f${MAX_COLUMNS_PER_TYPE - 1}`]: "z" },
    });
    expect(made.status).toBe(201);
  }, 60_000);
});
