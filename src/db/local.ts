/** Opens a local libSQL database on Bun: file (WAL, synchronous=NORMAL, busy timeout) or :memory:. */
import { createClient } from "@libsql/client";
import { AsyncLocalStorage } from "node:async_hooks";
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { serializeClient, wrapClient, type Database } from "./client";
import { installStatementCache } from "./statement-cache";

const BUSY_TIMEOUT_MS = 5000;

export async function openDatabase(url: string, authToken?: string): Promise<Database> {
  if (!url.startsWith("file:") && url !== ":memory:") {
    const client = createClient({ url, authToken });
    return wrapClient(client, "remote");
  }
  const path = url.replace(/^file:(\/\/)?/, "").split("?")[0]!;
  const inMemory = url === ":memory:" || path === ":memory:";
  if (!inMemory) mkdirSync(dirname(path) || ".", { recursive: true });
  installStatementCache();
  // One connection, so the PRAGMAs below hold for every statement (see serializeClient).
  const raw = createClient({ url: inMemory ? ":memory:" : url, concurrency: 1, timeout: BUSY_TIMEOUT_MS });
  if (!inMemory) {
    await raw.execute("PRAGMA journal_mode=WAL");
    await raw.execute("PRAGMA synchronous=NORMAL");
  }
  await raw.execute(`PRAGMA busy_timeout=${BUSY_TIMEOUT_MS}`);
  await raw.execute("PRAGMA foreign_keys=ON");
  // Marks the work of a write transaction, so a query that bypasses it fails instead of hanging.
  const scope = new AsyncLocalStorage<boolean>();
  const db = wrapClient(serializeClient(raw, { insideTransaction: () => scope.getStore() === true }), "local");
  db.transactionScope = (fn) => scope.run(true, fn);
  return db;
}
