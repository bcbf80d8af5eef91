/**
 * A bulk write's event deliveries (decision 0197): one account's webhooks and rules (one each,
 * on site creates and deletes), then a bulk create and a bulk delete of sites by the superuser,
 * on a temp libSQL file through `app.request`. Per write: the statements of its atomic batches,
 * the heap's growth and the longest stretch without an event-loop turn (a chain of immediates;
 * wall time, so it moves with the machine's load: figures, not assertions).
 *
 *   npx bun bench/bulk-deliveries.ts [webhooks=50] [sites=1000]
 */
import { makeTestApp } from "../tests/helpers/app";
import { userWith } from "../tests/helpers/grants";

const WEBHOOKS = Number(process.argv[2] ?? 50);
const SITES = Number(process.argv[3] ?? 1000);
const t = await makeTestApp({ WEBHOOK_ALLOWED_NETWORKS: "127.0.0.0/8" });
const eve = (
  await userWith(t, "eve", [
    [["view", "add", "change"], "extras.webhook", null],
    [["view", "add", "change"], "extras.eventrule", null],
    [["view"], "dcim.site", null],
  ])
).token;
const hooks = await t.json("POST", "/api/extras/webhooks/", {
  token: eve,
  body: Array.from({ length: WEBHOOKS }, (_, i) => ({
    name: `h${i}`,
    payload_url: `http://127.0.0.1:9/${i}`,
  })),
});
const rules = await t.json("POST", "/api/extras/event-rules/", {
  token: eve,
  body: (hooks.body as Array<{ id: number }>).map((h, i) => ({
    name: `r${i}`,
    object_types: ["dcim.site"],
    event_types: ["object_created", "object_deleted"],
    action_object_type: "extras.webhook",
    action_object_id: h.id,
  })),
});
console.log(`${WEBHOOKS} webhooks ${hooks.status}, rules ${rules.status}`);

const db = t.deps.db;
const write = db.write;
let statements = 0;
db.write = ((queries: Parameters<typeof write>[0]) => {
  statements += queries.length;
  return write(queries);
}) as unknown as typeof write;

/** `work`'s write statements, heap growth (MB) and longest loop stretch (ms). */
async function measure(label: string, work: () => Promise<{ status: number }>) {
  statements = 0;
  let last = performance.now();
  let gap = 0;
  let running = true;
  const tick = () => {
    const now = performance.now();
    gap = Math.max(gap, now - last);
    last = now;
    if (running) setImmediate(tick);
  };
  setImmediate(tick);
  Bun.gc(true);
  const before = process.memoryUsage().heapUsed;
  let peak = before;
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().heapUsed);
  }, 1);
  const r = await work();
  peak = Math.max(peak, process.memoryUsage().heapUsed);
  running = false;
  clearInterval(sampler);
  const heap = Math.round((peak - before) / 1e5) / 10;
  console.log(
    `${label}: ${r.status}, ${statements} statements, heap +${heap} MB, longest stretch ${Math.round(gap)} ms`,
  );
}

let ids: number[] = [];
await measure(`create ${SITES} sites`, async () => {
  const r = await t.json("POST", "/api/dcim/sites/", {
    body: Array.from({ length: SITES }, (_, i) => ({ name: `b${i}`, slug: `b${i}` })),
  });
  ids = (r.body as Array<{ id: number }>).map((s) => s.id);
  return r;
});
await measure(`delete ${SITES} sites`, () =>
  t.req("DELETE", "/api/dcim/sites/", { body: ids.map((id) => ({ id })) }),
);
const outbox = await db.execute({ sql: "SELECT count(*) AS n FROM outbox", args: [] });
console.log(`outbox rows: ${outbox.rows[0]!.n}`);
await t.close();
