/**
 * `npm start`'s bundle keeps the GraphQL engine out of the file that starts (decision 0117): the
 * engine and its libraries (graphql, graphql-yoga, graphql-armor) sit in a chunk beside it that
 * the first query loads, so a server nobody asks GraphQL of never evaluates them. The bundled
 * server still answers a query, its engine loaded from that chunk.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { bundle } from "../../tools/bundle";
import { HOST_ENGINE_ENV } from "../../bench/child-server";
import { type BundledServer, startBundledServer } from "../helpers/server-process";

setDefaultTimeout(120_000);

const dir = mkdtempSync(join(tmpdir(), "host-bundle-split-"));
let entry: string;
let port: number;
let server: BundledServer | null = null;

/** The sources a bundled file was built from, as its source map names them. */
const sourcesOf = (file: string): string[] =>
  (JSON.parse(readFileSync(`${file}.map`, "utf8")) as { sources: string[] }).sources;

beforeAll(async () => {
  entry = await bundle("src/server.ts", "split-check");
  server = await startBundledServer(entry, {
    ...HOST_ENGINE_ENV,
    DATABASE_URL: `file:${join(dir, "host.db")}`,
    LOG_LEVEL: "warn",
    LOGIN_REQUIRED: "false",
    HOST_LOCAL_REDIS: "off",
  });
  port = server.port;
});

afterAll(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("the bundled server loads GraphQL on first use", () => {
  test("the entry file carries neither the engine nor the graphql libraries; a chunk beside it does", () => {
    const graphqlCode = (s: string) =>
      s.includes("src/graphql/engine.ts") || /node_modules\/(graphql|graphql-yoga)\//.test(s);
    expect(sourcesOf(entry).filter(graphqlCode)).toEqual([]);
    const chunks = readdirSync(dirname(entry)).filter((f) => /^chunk-.*\.js$/.test(f));
    const holding = chunks.filter((c) =>
      sourcesOf(join(dirname(entry), c)).some((s) => s.includes("src/graphql/engine.ts")),
    );
    expect(holding.length).toBeGreaterThan(0);
  });

  test("a query to the bundled server is answered, the engine loaded from its chunk", async () => {
    const query = () =>
      fetch(`http://127.0.0.1:${port}/graphql/`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json" },
        body: JSON.stringify({ query: "{ __typename }" }),
      });
    for (const _ of [1, 2]) {
      const r = await query();
      expect({ status: r.status, body: await r.json(), log: server?.log() }).toEqual({
        status: 200,
        body: { data: { __typename: "Query" } },
        log: "",
      });
    }
  });
});
