/**
 * The D1 test app when miniflare's workerd goes away under it (killed by another process on a
 * shared machine, or crashed): the requests that follow fail naming how workerd ended, not as a
 * run of bare 500s. One fresh-clone run saw seven D1 tests answer 500 one after another, each
 * in about 2 ms, with nothing logged: the shape of a workerd gone (ECONNREFUSED on every call).
 * The same for a Miniflare a test starts itself (`startMiniflare`, its bindings `watched`) and
 * for the bundled Worker (`startWorker`).
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { sql } from "drizzle-orm";
import { type D1Binding, d1Database } from "../../src/db/d1";
import { type D1App, startD1App } from "../helpers/d1-app";
import type { KVNamespaceLike } from "../../src/services/cache";
import { startWorker } from "../helpers/worker";
import { startMiniflare } from "../helpers/workerd-watch";
import { waitFor } from "../helpers/wait";

// wrangler's migration run takes 10–30 s on a busy machine
setDefaultTimeout(120_000);

const TYPES = "/api/plugins/custom-objects/custom-object-types/";
let d1: D1App;
beforeAll(async () => {
  d1 = await startD1App("workerd-gone");
});
afterAll(() => d1?.stop());

test("a request after workerd was stopped from outside fails naming how it ended, not as a bare 500", async () => {
  expect((await d1.json("POST", TYPES, { name: "before", slug: "before" })).status).toBe(201);
  expect(d1.workerd.ended()).toBeNull();
  const pid = d1.workerd.pid;
  expect(pid).toBeNumber();
  // what `pkill workerd` sends (its default); workerd answers it by exiting 0, printing nothing
  process.kill(pid!, "SIGTERM");
  await waitFor(() => d1.workerd.ended(), { message: "workerd's exit noticed" });
  expect(d1.workerd.ended()).toContain(`pid ${pid}`);
  const after = d1.json("POST", TYPES, { name: "after", slug: "after" });
  // the app answers its database gone as unavailable (503, decision 0202); the helper names why
  await expect(after).rejects.toThrow(
    /503: miniflare's workerd \(pid \d+, workerd-gone\) exited with code 0 \(as it does on a SIGTERM\)/,
  );
});

/** What a call through a workerd stopped by SIGTERM fails with, for the test named `name`. */
const endedBySigterm = (name: string) =>
  new RegExp(
    `miniflare's workerd \\(pid \\d+, ${name}\\) exited with code 0 \\(as it does on a SIGTERM\\) while the test ran: .*(ECONNREFUSED|ECONNRESET)`,
  );

test("a watched Miniflare's bindings fail naming how workerd ended; other failures stay as they are", async () => {
  const mini = await startMiniflare("bindings-gone", {
    modules: true,
    script: "export default { fetch() { return new Response('') } }",
    d1Databases: ["DB"],
    kvNamespaces: ["KV"],
  });
  try {
    const kv = mini.watched((await mini.mf.getKVNamespace("KV")) as unknown as KVNamespaceLike);
    const db = d1Database(
      mini.watched((await mini.mf.getD1Database("DB")) as unknown as D1Binding),
    );
    await kv.put("k", "v");
    expect(await kv.get("k", "text")).toBe("v");
    // a batch takes the statements it made through the stand-ins
    const [one, two] = await db.read([
      db.orm.all(sql`SELECT 1 AS n`),
      db.orm.all(sql`SELECT 2 AS n`),
    ] as const);
    expect([one, two]).toEqual([[{ n: 1 }], [{ n: 2 }]]);
    await expect(db.execute({ sql: "SELEC 1", args: [] })).rejects.toThrow(/syntax error/);
    expect(mini.workerd.ended()).toBeNull();
    process.kill(mini.workerd.pid!, "SIGTERM");
    // a refused connection is often seen before the exit is: explaining one waits for the exit
    const explained = await mini.workerd.explain(new Error("ECONNREFUSED"));
    expect(String(explained)).toMatch(endedBySigterm("bindings-gone"));
    await expect(kv.get("k", "text")).rejects.toThrow(endedBySigterm("bindings-gone"));
    await expect(db.execute({ sql: "SELECT 1", args: [] })).rejects.toThrow(
      endedBySigterm("bindings-gone"),
    );
  } finally {
    await mini.stop();
  }
});

test("a Worker's request after its workerd ended fails naming how (startWorker)", async () => {
  const worker = await startWorker({
    name: "worker-gone",
    bindings: { DATABASE_URL: "http://127.0.0.1:9/" },
    kv: false,
  });
  try {
    expect((await worker.fetch("/api/")).status).toBeNumber();
    process.kill(worker.workerd.pid!, "SIGTERM");
    // workerd may answer a moment longer after SIGTERM: the requests go once it has ended
    await waitFor(() => worker.workerd.ended(), { message: "workerd's exit noticed" });
    await expect(worker.fetch("/api/")).rejects.toThrow(endedBySigterm("worker-gone"));
    await expect(worker.fetchVia("host", "/api/")).rejects.toThrow(endedBySigterm("worker-gone"));
  } finally {
    await worker.stop();
  }
});
