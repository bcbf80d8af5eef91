/**
 * The bare client as a service: a plain `Bun.serve` that answers `GET /items/:id` with one
 * `@libsql/client` `execute()` of `SELECT * FROM bare_item WHERE id = ?` through the same link
 * Host uses. `bench/edge.ts` runs it as a child process, as Host runs, so that both answers cross
 * the same HTTP hop: what a bare Worker (or server) reading one row would answer at the edge.
 *
 *   bun bench/bare-service.ts --serve <database url>     # prints READY <port>
 */
import { createClient } from "@libsql/client";

const [flag, url] = process.argv.slice(2);
if (flag !== "--serve" || !url) throw new Error("usage: bun bench/bare-service.ts --serve <url>");
const client = createClient({ url });
const server = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(request) {
    const id = Number(new URL(request.url).pathname.split("/")[2]);
    if (!Number.isInteger(id)) return new Response("bad id", { status: 400 });
    const { rows } = await client.execute({
      sql: "SELECT * FROM bare_item WHERE id = ?",
      args: [id],
    });
    return rows[0] ? Response.json(rows[0]) : new Response("not found", { status: 404 });
  },
});
console.log(`READY ${server.port}`);
process.on("SIGTERM", () => {
  server.stop(true);
  client.close();
  process.exit(0);
});
