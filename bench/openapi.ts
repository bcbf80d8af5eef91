/**
 * OpenAPI document with many custom object types: first build (JSON and YAML), cached answers,
 * and a filtered answer for a user who may view one type. Baseline: the same app's
 * `GET /api/status/` in the same run. `npx bun bench/openapi.ts` (OPENAPI_TYPES=100 by default).
 */
import { makeTestApp } from "../tests/helpers/app";

const TYPES = Number(process.env.OPENAPI_TYPES ?? 100);
const FIELDS = 10;
const t = await makeTestApp();
const FIELD_TYPES = [
  "text",
  "integer",
  "decimal",
  "boolean",
  "date",
  "url",
  "json",
  "longtext",
  "datetime",
];
const types = Array.from({ length: TYPES }, (_, i) => ({
  name: `bench_type_${i}`,
  slug: `bench_type_${i}`,
  fields: [
    { id: 1, name: "name", type: "text", primary: true, required: true },
    ...Array.from({ length: FIELDS - 2 }, (_, j) => ({
      id: j + 2,
      name: `f${j}`,
      type: FIELD_TYPES[j % FIELD_TYPES.length],
    })),
    {
      id: FIELDS,
      name: "site",
      type: "object",
      related_object_type: i ? `custom-objects/bench_type_${i - 1}` : "dcim/site",
    },
  ],
}));
const applied = await t.json("POST", "/api/plugins/custom-objects/schema/apply/", {
  body: { schema: { schema_version: "1", types } },
});
if (applied.status !== 200) throw new Error(JSON.stringify(applied.body).slice(0, 500));
const viewer = await t.user("viewer", [[["view"], "custom_objects.bench_type_7"]]);

async function time(label: string, fn: () => Promise<Response>, runs = 1): Promise<number> {
  const samples: number[] = [];
  let size = 0;
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    const res = await fn();
    const body = await res.arrayBuffer();
    samples.push(performance.now() - start);
    size = body.byteLength;
    if (res.status !== 200) throw new Error(`${label}: ${res.status}`);
  }
  samples.sort((a, b) => a - b);
  const median = samples[Math.floor(samples.length / 2)]!;
  console.log(
    `${label.padEnd(44)} ${median.toFixed(1).padStart(8)} ms  ${(size / 1024).toFixed(0).padStart(6)} KiB`,
  );
  return median;
}

const base = await time(
  "baseline GET /api/status/ (median of 20)",
  () => t.req("GET", "/api/status/"),
  20,
);
const first = await time(`first JSON build, ${TYPES} types`, () => t.req("GET", "/api/schema/"));
await time("YAML of the built document", () => t.req("GET", "/api/schema/?format=yaml"));
const cached = await time("cached JSON (median of 20)", () => t.req("GET", "/api/schema/"), 20);
await time("cached YAML (median of 20)", () => t.req("GET", "/api/schema/?format=yaml"), 20);
await time("viewer of 1 type, first (JSON)", () => t.req("GET", "/api/schema/", { token: viewer }));
await time("viewer of 1 type, YAML", () =>
  t.req("GET", "/api/schema/?format=yaml", { token: viewer }),
);
await time(
  "viewer of 1 type, cached (median of 20)",
  () => t.req("GET", "/api/schema/", { token: viewer }),
  20,
);
// A type change: the next call rebuilds.
await t.json("PATCH", "/api/plugins/custom-objects/custom-object-types/1/", {
  body: { description: "changed" },
});
await time("after a type change: rebuild (JSON)", () => t.req("GET", "/api/schema/"));
await time("after a type change: YAML", () => t.req("GET", "/api/schema/?format=yaml"));
console.log(
  `first build / baseline: ${(first / base).toFixed(0)}x; cached / baseline: ${(cached / base).toFixed(1)}x`,
);
await t.close();
