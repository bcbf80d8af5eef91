/**
 * Issue 27's stalling attacks against a real `src/server.ts` child, each with a concurrent
 * `GET /livez` probe: prints the probe's worst latency, the attack's answers and the server's
 * peak RSS (decision 0068). Run: `bun bench/attacks.ts` (ROWS=40 rows of 1 MB by default).
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase } from "../src/db/local";
import { runMigrations } from "../src/migrations";
import { createUser, issueToken } from "../src/core/auth/provisioning";
import { freePort } from "../src/services/local-redis";
import { num } from "./child-server";

const ROWS = num(process.env.ROWS, "ROWS", 40, 150);
const dir = mkdtempSync(join(tmpdir(), "host-attacks-"));
const dbUrl = `file:${join(dir, "host.db")}`;
const db = await openDatabase(dbUrl, undefined, {});
await runMigrations(db);
await createUser(db.orm, { username: "admin", isSuperuser: true });
const admin = (await issueToken(db.orm, { username: "admin" })).key;
await db.close();

const port = await freePort();
const child = Bun.spawn([process.execPath, "src/server.ts"], {
  env: {
    ...process.env,
    DATABASE_URL: dbUrl,
    PORT: String(port),
    HOST_LOCAL_REDIS: "off",
    LOG_LEVEL: "error",
  },
  stdout: "ignore",
  stderr: "inherit",
});
const base = `http://127.0.0.1:${port}`;
for (let i = 0; i < 600; i++) {
  const up = await fetch(`${base}/livez`).then(
    (r) => r.ok,
    () => false,
  );
  if (up) break;
  await Bun.sleep(100);
}

const rssMb = () => {
  const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"));
  return m ? Math.round(Number(m[1]) / 1024) : 0;
};
const call = (method: string, path: string, body?: unknown) =>
  fetch(base + path, {
    method,
    headers: { authorization: `Token ${admin}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

/** Runs `attack` while probing /livez every 10 ms; prints the worst probe and the peak RSS. */
async function measure(name: string, attack: () => Promise<string>) {
  let running = true;
  let worst = 0;
  let peak = rssMb();
  const probe = (async () => {
    while (running) {
      const t0 = performance.now();
      await fetch(`${base}/livez`);
      worst = Math.max(worst, performance.now() - t0);
      peak = Math.max(peak, rssMb());
      await Bun.sleep(10);
    }
  })();
  const t0 = performance.now();
  const outcome = await attack();
  const took = performance.now() - t0;
  running = false;
  await probe;
  console.log(
    `${name.padEnd(44)} ${outcome.padEnd(28)} attack ${took.toFixed(0).padStart(6)} ms  livez worst ${worst.toFixed(1).padStart(6)} ms  peak RSS ${peak} MB`,
  );
}

const CO = "/api/plugins/custom-objects";
await call("POST", `${CO}/custom-object-types/`, { name: "blob", slug: "blob" });
const cot = (await (await call("GET", `${CO}/custom-object-types/?slug=blob`)).json()).results[0];
for (const f of [
  { name: "title", type: "text", primary: true },
  { name: "code", type: "text", validation_regex: "^(a+)+$" },
  { name: "body", type: "longtext" },
])
  await call("POST", `${CO}/custom-object-type-fields/`, { custom_object_type: cot.id, ...f });

/** Each answer's status, with its `error` code (REST) or first GraphQL error code. */
const statuses = async (rs: Promise<Response>[]) =>
  (
    await Promise.all(
      rs.map(async (p) => {
        const r = await p;
        const text = await r.text();
        const body = text.startsWith("{") ? JSON.parse(text) : {};
        const code = body.error ?? body.errors?.[0]?.extensions?.code;
        return code ? `${r.status} ${code}` : String(r.status);
      }),
    )
  ).join(",");
await measure("ReDoS: 5 × ^(a+)+$ against 28 a's + '!'", () =>
  statuses(
    Array.from({ length: 5 }, () =>
      call("POST", `${CO}/blob/`, { title: "x", code: `${"a".repeat(28)}!` }),
    ),
  ),
);
await measure("ReDoS pattern with a lookahead, defined", () =>
  statuses([
    call("POST", `${CO}/custom-object-type-fields/`, {
      custom_object_type: cot.id,
      name: "evil",
      type: "text",
      validation_regex: "^(?=(a+)+$)",
    }),
  ]),
);
await measure(`write ${ROWS} rows of 1 MB text`, async () => {
  const out: number[] = [];
  for (let i = 0; i < ROWS; i++)
    out.push(
      (await call("POST", `${CO}/blob/`, { title: `b${i}`, body: "x".repeat(1_000_000) })).status,
    );
  return [...new Set(out)].join(",");
});
const aliases = (n: number) =>
  `{ ${Array.from({ length: n }, (_, i) => `a${i}: custom_objects_blob_list { id body }`).join(" ")} }`;
await measure("GraphQL: 6 aliases of a 1,000-row list", () =>
  statuses([call("POST", "/graphql/", { query: aliases(6) })]),
);
await measure("GraphQL: 30 aliases of a 1,000-row list", () =>
  statuses([call("POST", "/graphql/", { query: aliases(30) })]),
);
await measure("REST: 4 concurrent limit=1000 lists", () =>
  statuses(Array.from({ length: 4 }, () => call("GET", `${CO}/blob/?limit=1000`))),
);
await measure("REST: 4 concurrent limit=3 lists (within budget)", () =>
  statuses(Array.from({ length: 4 }, () => call("GET", `${CO}/blob/?limit=3`))),
);
await measure("search ?q=ab%00cd and name filters with NUL", () =>
  statuses(
    ["q", "title", "title__ic", "title__isw", "title__iew"].map((p) =>
      call("GET", `${CO}/blob/?${p}=ab%00cd`),
    ),
  ),
);

child.kill("SIGTERM");
await child.exited;
rmSync(dir, { recursive: true, force: true });
