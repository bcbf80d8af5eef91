/**
 * The counting proxy (tools/counting-proxy.ts) that the edge bench and round-trip tests stand
 * between a libSQL client and the Hrana server: it forwards faithfully and counts one round trip
 * per pipeline request, with the statements it carried.
 */
import { createClient } from "@libsql/client";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startCountingProxy, type CountingProxy } from "../../tools/counting-proxy";
import { startHranaServer, type HranaServer } from "../../tools/hrana-server";
import { waitFor } from "../helpers/wait";

let hrana: HranaServer;
let proxy: CountingProxy;
beforeAll(async () => {
  hrana = await startHranaServer({ path: ":memory:" });
  proxy = startCountingProxy({ target: hrana.url, latencyMs: 0 });
});
afterAll(async () => {
  await proxy.stop();
  await hrana.stop();
});

test("one execute is one round trip; a batch of three is one round trip of three statements", async () => {
  const client = createClient({ url: proxy.url });
  await client.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)");
  proxy.reset();
  const one = await proxy.measure(() => client.execute("SELECT 1 AS x"));
  expect(one.value.rows[0]?.x).toBe(1);
  expect(one.trips).toBe(1);
  const batch = await proxy.measure(() =>
    client.batch(
      [
        { sql: "INSERT INTO t (v) VALUES (?)", args: ["a"] },
        { sql: "INSERT INTO t (v) VALUES (?)", args: ["b"] },
        "SELECT count(*) AS n FROM t",
      ],
      "write",
    ),
  );
  expect(batch.trips).toBe(1);
  expect(batch.value[2]?.rows[0]?.n).toBe(2);
  expect(proxy.trips).toBe(2);
  expect(proxy.log.at(-1)?.sql.filter((s) => s.startsWith("INSERT"))).toHaveLength(2);
  client.close();
});

test("an interactive transaction costs a round trip per statement", async () => {
  const client = createClient({ url: proxy.url });
  proxy.reset();
  const { trips } = await proxy.measure(async () => {
    const tx = await client.transaction("write");
    await tx.execute({ sql: "INSERT INTO t (v) VALUES (?)", args: ["c"] });
    await tx.execute({ sql: "INSERT INTO t (v) VALUES (?)", args: ["d"] });
    await tx.commit();
  });
  expect(trips).toBeGreaterThanOrEqual(3);
  client.close();
});

test("hold keeps matching round trips until release, and lets the others through", async () => {
  const client = createClient({ url: proxy.url });
  proxy.reset();
  proxy.hold((sql) => sql.some((s) => s.startsWith("INSERT")));
  let landed = false;
  const insert = client
    .execute({ sql: "INSERT INTO t (v) VALUES (?)", args: ["held"] })
    .then(() => (landed = true));
  await waitFor(() => proxy.held === 1, { message: "the insert held" });
  const read = await client.execute("SELECT count(*) AS n FROM t WHERE v = 'held'");
  expect(read.rows[0]?.n).toBe(0); // the other round trip went through; the insert waits
  expect(landed).toBe(false);
  proxy.release();
  await insert;
  expect(proxy.held).toBe(0);
  expect((await client.execute("SELECT count(*) AS n FROM t WHERE v = 'held'")).rows[0]?.n).toBe(1);
  expect(proxy.bytesIn).toBeGreaterThan(0);
  client.close();
});
