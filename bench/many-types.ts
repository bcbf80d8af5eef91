/**
 * Whole-schema requests with many custom object types (decision 0210): for each route whose cost
 * grows with the number of types, the longest stretch the request held the event loop (the gap
 * between two turns, as another client's `/livez` would wait it) and the answer's size. Types
 * are made by one schema apply as an ordinary account; a reader who may view every other type
 * asks too. In-process (`app.request`); the loop is watched by a `setImmediate` chain. A second
 * gap column counts the main thread's own CPU time instead of the process's (Linux; decision
 * 0217): the process's counts other threads too (the JIT's compiles, the database's reader
 * connections), which do not hold the loop.
 *
 * Usage: npx bun bench/many-types.ts [--types 1000] [--fields 4]
 */
import { parseArgs } from "node:util";
import { loadGraphqlEngine } from "../src/graphql/routes";
import { makeTestApp } from "../tests/helpers/app";

const { values } = parseArgs({
  options: { types: { type: "string", default: "1000" }, fields: { type: "string", default: "4" } },
});
const TYPES = Number(values.types);

/** This thread's CPU time in ms (`clock_gettime(CLOCK_THREAD_CPUTIME_ID)`), or null off Linux. */
const threadCpuMs: () => number | null = await (async () => {
  try {
    const { dlopen, FFIType, ptr } = await import("bun:ffi");
    const libc = dlopen("libc.so.6", {
      clock_gettime: { args: [FFIType.i32, FFIType.ptr], returns: FFIType.i32 },
    });
    const time = new BigInt64Array(2);
    const at = ptr(time);
    return () => {
      libc.symbols.clock_gettime(3, at);
      return Number(time[0]) * 1000 + Number(time[1]) / 1e6;
    };
  } catch {
    return () => null;
  }
})();
const FIELDS = Number(values.fields);
const KINDS = ["text", "integer", "date", "boolean", "decimal", "url", "json", "datetime"];
const CO = "/api/plugins/custom-objects";

const doc = (rename = "") => ({
  schema_version: "1",
  types: Array.from({ length: TYPES }, (_, i) => ({
    name: i === 0 && rename ? rename : `kind_${i}`,
    slug: `kind_${i}`,
    fields: Array.from({ length: FIELDS }, (_, f) => ({
      id: f + 1,
      name: `field_${f}`,
      type: KINDS[f % KINDS.length]!,
      primary: f === 0,
    })),
  })),
});

/**
 * The longest gap between two turns of the loop while `fn` runs, and its time in all. A gap counts
 * the process's CPU time in it where that is less than its wall time: on a loaded machine a
 * process waiting for a core is not holding its loop (decision 0205 measured the same way).
 */
async function watched<T>(
  fn: () => Promise<T>,
): Promise<{ out: T; gap: number; own: number | null; ms: number }> {
  let gap = 0;
  let own: number | null = null;
  let last = performance.now();
  let lastCpu = process.cpuUsage();
  let lastOwn = threadCpuMs();
  let on = true;
  const tick = () => {
    const now = performance.now();
    const cpu = process.cpuUsage(lastCpu);
    gap = Math.max(gap, Math.min(now - last, (cpu.user + cpu.system) / 1000));
    const mine = threadCpuMs();
    if (mine !== null && lastOwn !== null)
      own = Math.max(own ?? 0, Math.min(now - last, mine - lastOwn));
    last = now;
    lastCpu = process.cpuUsage();
    lastOwn = threadCpuMs();
    if (on) setImmediate(tick);
  };
  setImmediate(tick);
  const t0 = performance.now();
  const out = await fn();
  const ms = performance.now() - t0;
  on = false;
  await new Promise((r) => setImmediate(r));
  return { out, gap, own, ms };
}

const t = await makeTestApp();
// GraphQL's engine loaded and run once before serving, as the server does (decision 0217)
await loadGraphqlEngine();
const maker = await t.user("maker", [
  [["view", "add", "change"], "custom_objects.customobjecttype"],
  [["view", "add", "change"], "custom_objects.customobjecttypefield"],
]);
const rows: string[] = [];
async function measure(label: string, token: string, method: string, path: string, body?: unknown) {
  const { out, gap, own, ms } = await watched(async () => {
    const res = await t.req(method, path, { token, body });
    // read a chunk at a time, as a socket would be written: joining them is the client's work
    let bytes = 0;
    const reader = res.body!.getReader();
    for (let r = await reader.read(); !r.done; r = await reader.read()) bytes += r.value.byteLength;
    return { status: res.status, bytes };
  });
  const row = `| ${label} | ${out.status} | ${gap.toFixed(1)} | ${own?.toFixed(1) ?? "–"} | ${ms.toFixed(0)} | ${(out.bytes / 1024).toFixed(0)} |`;
  rows.push(row);
  console.log(row);
}

{
  const { out, gap, ms } = await watched(() =>
    t.json("POST", `${CO}/schema/apply/`, { token: maker, body: doc() }),
  );
  if (out.status !== 200) throw new Error(JSON.stringify(out.body).slice(0, 400));
  console.log(`apply ${TYPES} × ${FIELDS}: ${ms.toFixed(0)} ms, longest gap ${gap.toFixed(1)} ms`);
}
// a reader who may view every type but kind_0 (a permission constrained to the others' names)
const reader = await t.user("reader", [[["view"], "custom_objects.customobjecttype"]]);
{
  const r = await t.json("POST", "/api/users/permissions/", {
    body: {
      name: "reader-others",
      actions: ["view"],
      object_types: Array.from({ length: TYPES - 1 }, (_, i) => `custom_objects.kind_${i + 1}`),
      users: [(await t.json("GET", "/api/users/users/?username=reader")).body.results[0].id],
    },
  });
  if (r.status !== 201) throw new Error(JSON.stringify(r.body).slice(0, 300));
}

console.log(
  "| request | status | longest loop gap ms | the same, main thread CPU ms | total ms | KiB |",
);
console.log("|:--|--:|--:|--:|--:|--:|");
for (const [who, token] of [
  ["maker", maker],
  ["reader", reader],
] as const) {
  await measure(`export, all (${who})`, token, "GET", `${CO}/schema/export/`);
  await measure(
    `type list limit=1000 (${who})`,
    token,
    "GET",
    `${CO}/custom-object-types/?limit=1000`,
  );
  // the largest page the response budget lets through at 4 fields a type
  await measure(
    `type list limit=800 (${who})`,
    token,
    "GET",
    `${CO}/custom-object-types/?limit=800`,
  );
  await measure(
    `field list limit=1000 (${who})`,
    token,
    "GET",
    `${CO}/custom-object-type-fields/?limit=1000`,
  );
  await measure(`plugin root (${who})`, token, "GET", `${CO}/`);
  await measure(`OPTIONS types (${who})`, token, "OPTIONS", `${CO}/custom-object-types/`);
  await measure(`OPTIONS a type (${who})`, token, "OPTIONS", `${CO}/kind_1/`);
}
for (const [who, token] of [
  ["admin", t.admin],
  ["reader", reader],
] as const) {
  await measure(`OpenAPI json, first (${who})`, token, "GET", "/api/schema/?format=json");
  await measure(`OpenAPI json, again (${who})`, token, "GET", "/api/schema/?format=json");
  await measure(`OpenAPI yaml, first (${who})`, token, "GET", "/api/schema/?format=yaml");
  await measure(`OpenAPI yaml, again (${who})`, token, "GET", "/api/schema/?format=yaml");
  await measure(`GraphQL first query (${who})`, token, "POST", "/graphql/", {
    query: "{ __typename }",
  });
  await measure(`GraphQL introspection (${who})`, token, "POST", "/graphql/", {
    query: "{ __schema { types { name fields { name } } } }",
  });
}
const exported = (await t.json("GET", `${CO}/schema/export/`, { token: maker })).body;
await measure("preview, all types unchanged (maker)", maker, "POST", `${CO}/schema/preview/`, {
  schema: exported,
});
exported.types[0].name = "renamed";
await measure("preview, one renamed (maker)", maker, "POST", `${CO}/schema/preview/`, {
  schema: exported,
});
await measure("apply, one renamed (maker)", maker, "POST", `${CO}/schema/apply/`, {
  schema: exported,
});
await measure("OpenAPI json after a change (admin)", t.admin, "GET", "/api/schema/?format=json");
await measure("GraphQL after a change (admin)", t.admin, "POST", "/graphql/", {
  query: "{ __typename }",
});
await measure("global search q=kind (reader)", reader, "GET", "/api/search/?q=kind");
await measure("object types list (reader)", reader, "GET", "/api/extras/object-types/?limit=1000");
await t.close();
process.exit(0);
