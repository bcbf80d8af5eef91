/**
 * GraphQL vs REST: a page of 50 custom objects with an object field (→ dcim.site) and a
 * multiobject field (→ dcim.device), fetched through `/graphql/` and through the REST list of
 * the same type, in one run over the same database, alternating in rounds. Prints median and
 * p95 latency, requests per second and SQL statements per request, and the GraphQL/REST ratio.
 *
 *   npx bun bench/graphql.ts                 # 2000 rows, 400 requests per side
 *   npx bun bench/graphql.ts --rows 500 --requests 100
 *
 * Requests are sequential and in-process (`app.request`), so the figures are the app's own cost.
 */
import { parseArgs } from "node:util";
import { makeTestApp } from "../tests/helpers/app";
import { addField, CO, makeCot } from "../tests/custom-objects/fixtures";
import { countStatements } from "../tests/helpers/statements";

const { values: opt } = parseArgs({
  options: { rows: { type: "string" }, requests: { type: "string" }, rounds: { type: "string" } },
});
const ROWS = Number(opt.rows ?? 2000);
const REQUESTS = Number(opt.requests ?? 400);
const ROUNDS = Number(opt.rounds ?? 4);

const t = await makeTestApp();
const sites: number[] = [];
for (let i = 0; i < 20; i++)
  sites.push(
    (await t.json("POST", "/api/dcim/sites/", { body: { name: `Site ${i}`, slug: `s${i}` } })).body
      .id,
  );
const devices: number[] = [];
const devRes = await t.json("POST", "/api/dcim/devices/", {
  body: Array.from({ length: 100 }, (_, i) => ({ name: `dev${i}`, site: sites[i % 20] })),
});
for (const d of devRes.body) devices.push(d.id);
const cot = await makeCot(t, "bench_gql");
await addField(t, cot.id, { name: "name", type: "text", primary: true });
await addField(t, cot.id, { name: "size", type: "integer" });
await addField(t, cot.id, { name: "site", type: "object", related_object_type: "dcim.site" });
await addField(t, cot.id, {
  name: "devices",
  type: "multiobject",
  related_object_type: "dcim.device",
});
for (let start = 0; start < ROWS; start += 500) {
  const body = Array.from({ length: Math.min(500, ROWS - start) }, (_, k) => {
    const i = start + k;
    return {
      name: `row${i}`,
      size: i,
      site: sites[i % 20],
      devices: [devices[i % 100], devices[(i + 7) % 100]],
    };
  });
  const r = await t.json("POST", `${CO}/bench_gql/`, { body });
  if (r.status !== 201) throw new Error(JSON.stringify(r.body).slice(0, 300));
}

const offsets = () => Math.floor(Math.random() * Math.max(1, ROWS - 50));
const rest = (offset: number) => t.req("GET", `${CO}/bench_gql/?limit=50&offset=${offset}`);
const QUERY = `query ($o: Int!) { custom_objects_bench_gql_list(pagination: {offset: $o, limit: 50}) { id display name size site { id name } devices { id name } } }`;
const graphql = (offset: number) =>
  t.req("POST", "/graphql/", { body: { query: QUERY, variables: { o: offset } } });

// Correctness first: both answer 50 rows with the relations filled.
{
  const a = await (await rest(0)).json();
  const b = await (await graphql(0)).json();
  if (a.results.length !== 50 || b.data.custom_objects_bench_gql_list.length !== 50)
    throw new Error("unexpected page size");
  if (
    b.data.custom_objects_bench_gql_list[0].devices.length !== 2 ||
    !b.data.custom_objects_bench_gql_list[0].site.name
  )
    throw new Error("relations not resolved");
}

const samples: Record<"rest" | "graphql", number[]> = { rest: [], graphql: [] };
const wall = { rest: 0, graphql: 0 };
for (let i = 0; i < 30; i++) {
  await (await rest(offsets())).arrayBuffer();
  await (await graphql(offsets())).arrayBuffer();
}
for (let round = 0; round < ROUNDS; round++) {
  for (const side of ["rest", "graphql"] as const) {
    const start = performance.now();
    for (let i = 0; i < REQUESTS / ROUNDS; i++) {
      const s = performance.now();
      const res = await (side === "rest" ? rest(offsets()) : graphql(offsets()));
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`${side} answered ${res.status}`);
      samples[side].push(performance.now() - s);
    }
    wall[side] += performance.now() - start;
  }
}
const statements = {
  rest: await countStatements(t.deps.db, () => rest(100)),
  graphql: await countStatements(t.deps.db, () => graphql(100)),
};
const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;
const line = (side: "rest" | "graphql") =>
  `${side.padEnd(8)} median ${pct(samples[side], 0.5).toFixed(2)} ms  p95 ${pct(samples[side], 0.95).toFixed(2)} ms  ${((samples[side].length / wall[side]) * 1000).toFixed(0)} req/s  ${statements[side]} statements`;
console.log(
  `50-row page of a COT with an object and a multiobject field (${ROWS} rows, ${REQUESTS} requests per side, ${ROUNDS} rounds)`,
);
console.log(line("rest"));
console.log(line("graphql"));
console.log(
  `graphql / rest: median ${(pct(samples.graphql, 0.5) / pct(samples.rest, 0.5)).toFixed(2)}×, throughput ${(samples.graphql.length / wall.graphql / (samples.rest.length / wall.rest)).toFixed(2)}×`,
);

// Hostile documents (tests/graphql/robustness.test.ts) are refused before they are parsed to the
// end: the median refusal against the median 50-row GraphQL page of this same run.
const hostile = {
  "20,000 fields (token limit)": `{ ${Array.from({ length: 20_000 }, () => "site_list { id }").join(" ")} }`,
  "40,000 nested braces": "{".repeat(40_000) + "}".repeat(40_000),
};
for (const [label, query] of Object.entries(hostile)) {
  const times: number[] = [];
  for (let i = 0; i < 20; i++) {
    const s = performance.now();
    const res = await t.req("POST", "/graphql/", { body: { query } });
    await res.arrayBuffer();
    if (res.status >= 500) throw new Error(`${label}: ${res.status}`);
    times.push(performance.now() - s);
  }
  console.log(
    `refusing ${label}: median ${pct(times, 0.5).toFixed(2)} ms (${(pct(times, 0.5) / pct(samples.graphql, 0.5)).toFixed(2)}× a 50-row page)`,
  );
}
await t.close();
