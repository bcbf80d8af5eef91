/**
 * CPU per remote GET by id, in process (issue 28 item 3): the app (tests/helpers/app.ts, the real
 * createApp) over a Hrana server in a child process (tools/hrana-server.ts, no added latency), GETs
 * one at a time through `app.request`, and this process's CPU time per GET split by thread (Linux:
 * the scheduler's account in /proc/self/task/<tid>/schedstat; `bun` = the main JS thread, `HTTP
 * Client` = the outbound fetch thread). The test helper's own work (building each Request) is in
 * the main thread's figure, the same for every run.
 *
 *   npx bun bench/get-cpu.ts [--kind site,object,bare-site,bare-object] [--gets 4000] [--warm 1000]
 *   npx bun bench/get-cpu.ts --against /path/to/another/checkout [--rounds 20] [--block 200]
 *   npx bun bench/get-cpu.ts --dump /tmp/a.json     # also writes one answer of each kind
 *
 * site = `GET /api/dcim/sites/<id>/` over 20 sites; object = `GET /api/plugins/custom-objects/
 * get_cpu/<id>/` over 20 objects of a 4-field type (text, longtext, integer, object → dcim.site), the
 * type bench/edge.ts reads; bare-site and bare-object = a bare `@libsql/client` (no fetch wrapper)
 * executing the very statement the app sends for each (read back from one GET's request body), the
 * floor the app's own work stands on.
 *
 * `--against <dir>`: the app of another checkout (its tests/helpers/app.ts; the same node_modules)
 * is set up beside this one in the same process, each over a Hrana server of its own, and the two
 * answer GETs in alternating blocks (`--block` GETs of one kind, the order of the two sides
 * alternating by round): on a machine others load, both sides meet the same load, so their ratio
 * holds where the figures of separate runs move by a third. Prints each side's main-thread ms per
 * GET and the ratio.
 */
import { createClient, type InStatement } from "@libsql/client";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { EDGE_TYPE_FIELDS } from "./child-server";

const { values: opt } = parseArgs({
  options: {
    kind: { type: "string" },
    gets: { type: "string" },
    warm: { type: "string" },
    rounds: { type: "string" },
    block: { type: "string" },
    against: { type: "string" },
    dump: { type: "string" },
  },
});
const AGAINST = opt.against ? resolve(opt.against) : null;
const KINDS = (opt.kind ?? (AGAINST ? "site,object" : "site,object,bare-site,bare-object")).split(
  ",",
);
const GETS = Number(opt.gets ?? 4000);
const WARM = Number(opt.warm ?? 1000);
const ROUNDS = Number(opt.rounds ?? (AGAINST ? 20 : 1));
const BLOCK = Number(opt.block ?? 200);

/** CPU time (ns, the scheduler's own account) of each thread of this process, by thread name. */
function threadCpu(): Map<string, number> {
  const by = new Map<string, number>();
  for (const tid of readdirSync("/proc/self/task")) {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, "utf8");
      const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const ns = Number(readFileSync(`/proc/self/task/${tid}/schedstat`, "utf8").split(" ")[0]);
      by.set(name, (by.get(name) ?? 0) + ns);
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return by;
}

/** CPU time (ns) of the main JS thread alone. */
const mainThreadNs = () =>
  Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, "utf8").split(" ")[0]);

/** The one statement `get` sends to the database (its Hrana pipeline body read back). */
async function statementOf(get: () => Promise<unknown>): Promise<InStatement> {
  const real = globalThis.fetch;
  const bodies: string[] = [];
  globalThis.fetch = (async (input: Request, init?: RequestInit) => {
    bodies.push(await input.clone().text());
    return real(input, init);
  }) as typeof fetch;
  try {
    await get();
  } finally {
    globalThis.fetch = real;
  }
  if (bodies.length !== 1) throw new Error(`${bodies.length} round trips, not 1`);
  const [req] = JSON.parse(bodies[0]!).requests as Array<{ stmt: { sql: string; args: any[] } }>;
  const value = (v: { type: string; value?: string | number }) =>
    v.type === "integer" ? BigInt(v.value!) : v.type === "null" ? null : v.value!;
  return { sql: req!.stmt.sql, args: req!.stmt.args.map(value) };
}

/** A Hrana server in a child process (its CPU is not this process's), on a fresh file. */
async function startHrana(dir: string) {
  const port = 40000 + Math.floor(Math.random() * 10000);
  const child = Bun.spawn(
    [
      process.execPath,
      join(import.meta.dir, "../tools/hrana-server.ts"),
      "--db",
      join(dir, "h.db"),
      "--port",
      String(port),
    ],
    { stdout: "ignore", stderr: "inherit" },
  );
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    const up = await fetch(`${url}/v2`).then(
      () => true,
      () => false,
    );
    if (up) break;
    if (i > 200) throw new Error("the Hrana server did not start");
    await Bun.sleep(50);
  }
  return { url, child };
}

type Once = (i: number) => Promise<{ status: number; arrayBuffer(): Promise<unknown> }>;

/** The app of the checkout at `root` over a Hrana server, seeded; a GET of each kind. */
async function setUp(root: string) {
  const dir = mkdtempSync(join(tmpdir(), "get-cpu-"));
  const hrana = await startHrana(dir);
  const { makeTestApp } = await import(join(root, "tests/helpers/app.ts"));
  const { addField, CO, create, makeCot } = await import(
    join(root, "tests/custom-objects/fixtures.ts")
  );
  const t = await makeTestApp({ DATABASE_URL: hrana.url });
  const sites: number[] = [];
  for (let i = 0; i < 20; i++) {
    const r = await t.json("POST", "/api/dcim/sites/", { body: { name: `S${i}`, slug: `s${i}` } });
    sites.push(r.body.id);
  }
  const cot = await makeCot(t, "get_cpu");
  for (const f of EDGE_TYPE_FIELDS) await addField(t, cot.id, f);
  const objects: number[] = [];
  for (let i = 0; i < 20; i++) {
    const body = { title: `o${i}`, notes: `notes ${i}`, count: i, site: sites[i] };
    objects.push((await create(t, "get_cpu", body)).id);
  }
  const path: Record<string, (i: number) => string> = {
    site: (i) => `/api/dcim/sites/${sites[i % 20]}/`,
    object: (i) => `${CO}/get_cpu/${objects[i % 20]}/`,
  };
  const get: Record<string, Once> = {
    site: (i) => t.req("GET", path.site!(i)),
    object: (i) => t.req("GET", path.object!(i)),
  };
  // each kind's floor: a bare `@libsql/client` sending the very statement the app's GET sends
  const bare = createClient({ url: hrana.url });
  for (const kind of ["site", "object"]) {
    const statement = await statementOf(() => get[kind]!(0).then((r) => r.arrayBuffer()));
    get[`bare-${kind}`] = async () => {
      await bare.execute(statement);
      return { status: 200, arrayBuffer: async () => null };
    };
  }
  return {
    t,
    get,
    async close() {
      bare.close();
      await t.close();
      hrana.child.kill();
      await hrana.child.exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function run(once: Once, n: number, what: string) {
  for (let i = 0; i < n; i++) {
    const r = await once(i);
    if (r.status !== 200) throw new Error(`${what}: ${r.status}`);
    await r.arrayBuffer();
  }
}

const here = await setUp(join(import.meta.dir, ".."));
const there = AGAINST ? await setUp(AGAINST) : null;
try {
  if (opt.dump) {
    const answers: Record<string, string> = {};
    for (const kind of ["site", "object"])
      answers[kind] = await (await here.get[kind]!(0)).arrayBuffer().then((b) => {
        return new TextDecoder().decode(b as ArrayBuffer);
      });
    writeFileSync(opt.dump, JSON.stringify(answers, null, 1));
  }
  if (there) {
    // paired: the two checkouts in alternating blocks, their main thread's CPU summed per kind
    for (const kind of KINDS) {
      await run(here.get[kind]!, WARM, kind);
      await run(there.get[kind]!, WARM, kind);
      const ns = { here: 0, there: 0 };
      for (let round = 0; round < ROUNDS; round++)
        for (const side of round % 2
          ? (["there", "here"] as const)
          : (["here", "there"] as const)) {
          const once = (side === "here" ? here : there).get[kind]!;
          const before = mainThreadNs();
          await run(once, BLOCK, kind);
          ns[side] += mainThreadNs() - before;
        }
      const perGet = (x: number) => x / 1e6 / (ROUNDS * BLOCK);
      console.log(
        `GET ${kind}: main thread ${perGet(ns.here).toFixed(4)} ms here, ${perGet(ns.there).toFixed(4)} ms against ${AGAINST} (${ROUNDS} × ${BLOCK} GETs each): here / there ${(ns.here / ns.there).toFixed(3)}`,
      );
    }
  } else
    for (let round = 0; round < ROUNDS; round++)
      for (const kind of KINDS) {
        const once = here.get[kind]!;
        await run(once, WARM, kind);
        const before = threadCpu();
        const c0 = process.cpuUsage();
        const w0 = performance.now();
        await run(once, GETS, kind);
        const wall = performance.now() - w0;
        const cpu = process.cpuUsage(c0);
        const threads = [...threadCpu()]
          .map(([name, ns]) => [name, ns - (before.get(name) ?? 0)] as const)
          .filter(([, d]) => d > 0.001 * 1e6 * GETS)
          .sort((a, b) => b[1] - a[1])
          .map(([name, d]) => `${name} ${(d / 1e6 / GETS).toFixed(3)}`)
          .join(", ");
        console.log(
          `GET ${kind}: cpu ${((cpu.user + cpu.system) / 1000 / GETS).toFixed(3)} ms, wall ${(wall / GETS).toFixed(3)} ms per GET; by thread (ms): ${threads}`,
        );
      }
} finally {
  await here.close();
  await there?.close();
}
