/**
 * `?q=` and `__ic`/`__isw`/`__iew` on a large custom object type, through the full-text index
 * (decision 0050), next to the same list's SQL without the index (a scan) in the same run.
 *
 *   npx bun bench/search.ts                  # 100k and 1M rows (1M takes a few minutes to load)
 *   BENCH_SEARCH_ROWS=10000,100000 npx bun bench/search.ts
 *
 * A COT of 10 fields (text, text, longtext, integer, decimal, boolean, date, datetime, url, json)
 * gets its rows by direct SQL in one transaction per 10,000 rows (the index's triggers mark them
 * pending), the pending rows are indexed (decision 0056: timed apart, as "flush"), then each query
 * runs REQUESTS times in-process (app.fetch, superuser token); medians in ms.
 */
import { servicesOf } from "../src/app";
import { flushSearchIndexesNow } from "../src/plugins/custom-objects/search/flush";
import { makeTestApp } from "../tests/helpers/app";
import { addField, CO, makeCot } from "../tests/custom-objects/fixtures";

const SIZES = (process.env.BENCH_SEARCH_ROWS ?? "100000,1000000").split(",").map(Number);
const REQUESTS = Number(process.env.BENCH_SEARCH_REQUESTS ?? 21);
if (SIZES.some((n) => !Number.isInteger(n) || n < 1000 || n > 2_000_000))
  throw new Error("BENCH_SEARCH_ROWS: sizes from 1000 to 2000000");

const SYLL = [
  "ka",
  "lo",
  "mi",
  "ne",
  "ru",
  "ta",
  "vo",
  "zi",
  "pe",
  "su",
  "ga",
  "do",
  "fe",
  "hu",
  "ji",
  "bo",
];
const word = (n: number) =>
  SYLL[n % 16]! + SYLL[(n >> 4) % 16]! + SYLL[(n >> 8) % 16]! + SYLL[(n >> 12) % 16]!;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const QUERIES: Array<[string, string]> = [
  ["q, selective (SN-12345…)", "q=SN-12345"],
  ["q, a word (~1 in 2,000 rows)", `q=${word(777)}`],
  ["q, a site code in 10% of rows", "q=DC-AMS7"],
  ["description__ic, a word", `description__ic=${word(1234)}`],
  ["name__isw", "name__isw=item-99999"],
  ["serial__iew", "serial__iew=4321"],
];

for (const rows of SIZES) {
  const t = await makeTestApp();
  const db = t.deps.db;
  const cot = await makeCot(t, "search_bench", "search_bench");
  for (const f of [
    { name: "name", type: "text" },
    { name: "serial", type: "text" },
    { name: "description", type: "longtext" },
    { name: "quantity", type: "integer" },
    { name: "weight", type: "decimal" },
    { name: "enabled", type: "boolean" },
    { name: "installed", type: "date" },
    { name: "last_seen", type: "datetime" },
    { name: "homepage", type: "url" },
    { name: "attrs", type: "json" },
  ])
    await addField(t, cot.id, f);
  const table = `co_${cot.id}`;
  const now = new Date().toISOString();
  let t0 = performance.now();
  for (let start = 0; start < rows; start += 10_000) {
    const stmts = [];
    for (let i = start; i < Math.min(rows, start + 10_000); i++) {
      stmts.push({
        sql: `INSERT INTO ${table} (created, last_updated, name, serial, description, quantity, weight, enabled, installed, last_seen, homepage, attrs) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)`,
        args: [
          now,
          now,
          `item-${i}`,
          `SN-${i}`,
          `Bench item ${i}: ${word(i % 2003)} and ${word((i * 7) % 1999)} in a longer text.${i % 10 === 0 ? " Site DC-AMS7." : ""}`,
          i % 1000,
          (i % 977) / 7,
          i % 2,
          "2024-05-06",
          now,
          `https://example.com/items/${i}`,
          JSON.stringify({ rack: i % 42 }),
        ],
      });
    }
    await db.client.batch(stmts, "write");
  }
  const loadSecs = (performance.now() - t0) / 1000;
  // The index itself is measured: every pending row indexed first (a server does this in the background).
  t0 = performance.now();
  await flushSearchIndexesNow(servicesOf(t.app));
  const flushSecs = (performance.now() - t0) / 1000;
  // the type's entries in the shared index (decision 0130): its rowid range
  const typeId = Number(table.slice("co_".length));
  const fts = (
    await db.client.execute(
      `SELECT count(*) AS n FROM co_search_docsize WHERE id BETWEEN ${typeId} * 1099511627776 AND ${typeId} * 1099511627776 + 1099511627775`,
    )
  ).rows[0]!.n;
  const pending = (
    await db.client.execute(`SELECT count(*) AS n FROM co_search_pending WHERE type_id = ${typeId}`)
  ).rows[0]!.n;

  const time = async (path: string) => {
    const ms: number[] = [];
    let count = 0;
    for (let i = 0; i < REQUESTS; i++) {
      t0 = performance.now();
      const r = await t.req("GET", path);
      const body = (await r.json()) as { count: number };
      ms.push(performance.now() - t0);
      if (r.status !== 200) throw new Error(`${path}: ${r.status} ${JSON.stringify(body)}`);
      count = body.count;
    }
    return { ms: median(ms), count };
  };
  // The scan: the list's two statements with the LIKE conditions alone (what it ran before the index).
  const scan = async (where: string, args: string[]) => {
    const ms: number[] = [];
    for (let i = 0; i < Math.min(REQUESTS, 5); i++) {
      t0 = performance.now();
      await db.client.execute({ sql: `SELECT count(*) FROM ${table} WHERE ${where}`, args });
      await db.client.execute({
        sql: `SELECT id FROM ${table} WHERE ${where} ORDER BY id LIMIT 50`,
        args,
      });
      ms.push(performance.now() - t0);
    }
    return median(ms);
  };
  const like = (col: string) => `${col} LIKE ? ESCAPE '\\'`;
  const searchCols = [
    "name",
    "serial",
    "description",
    "quantity",
    "weight",
    "installed",
    "last_seen",
    "homepage",
    "attrs",
  ];
  console.log(
    `\n${rows.toLocaleString("en")} rows: loaded by SQL in ${loadSecs.toFixed(1)} s (${Math.round(rows / loadSecs).toLocaleString("en")} rows/s with the index's triggers), indexed (flush) in ${flushSecs.toFixed(1)} s (${Math.round(rows / flushSecs).toLocaleString("en")} rows/s); index rows ${fts}, pending ${pending}`,
  );
  console.log(
    "| query | rows matched | median ms (index) | median ms (scan SQL alone) |\n|---|---|---|---|",
  );
  for (const [label, qs] of QUERIES) {
    const r = await time(`${CO}/search_bench/?limit=50&${qs}`);
    const [k, v] = qs.split("=") as [string, string];
    const [col, lookup] = k.split("__");
    const pattern = lookup === "isw" ? `${v}%` : lookup === "iew" ? `%${v}` : `%${v}%`;
    const s =
      k === "q"
        ? await scan(
            searchCols.map(like).join(" OR "),
            searchCols.map(() => pattern),
          )
        : await scan(like(col!), [pattern]);
    console.log(`| ${label} | ${r.count} | ${r.ms.toFixed(1)} | ${s.toFixed(1)} |`);
  }
  const plain = await time(`${CO}/search_bench/?limit=50&offset=500`);
  console.log(`| (no filter, offset 500) | ${plain.count} | ${plain.ms.toFixed(1)} | |`);
  const mem = process.memoryUsage();
  console.log(
    `RSS ${(mem.rss / 2 ** 20).toFixed(0)} MB; load average ${(await Bun.file("/proc/loadavg").text()).split(" ").slice(0, 3).join(" ")}`,
  );
  await t.close();
}
process.exit(0);
