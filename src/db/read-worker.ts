/**
 * One thread of the read pool (`read-pool.ts`, decision 0057): its own read-only connection to
 * the local database file, answering one read at a time. A slow read (a scan of a million rows)
 * holds this thread, not the server's event loop; in WAL mode each read sees the last committed
 * state, whatever the main connection is writing meanwhile.
 *
 * Messages in: `{ type: "open", url, intMode, busyTimeoutMs, generation }` once, then arrays of reads
 * `{ id, sql, args }`, and finally `{ type: "close" }`. Out: `{ type: "ready" }` or
 * `{ type: "failed", error }`, then arrays of answers `{ id, columns, columnTypes, rows,
 * rowsAffected, lastInsertRowid }` (rows as plain arrays of values: the Row objects' indexes do
 * not survive a structured clone) or `{ id, error }`.
 */
import { createClient, type Client, type InArgs, type IntMode } from "@libsql/client";
import { installStatementCache } from "./statement-cache";

declare const self: Worker;

/**
 * An error as plain fields (a structured clone keeps an Error's message, not its code fields);
 * `read-pool.ts` builds the same error back (its `WireError`).
 */
function toWire(e: unknown, depth = 0): Record<string, unknown> {
  const err = (e ?? {}) as { name?: unknown; message?: unknown; code?: unknown; extendedCode?: unknown; rawCode?: unknown; cause?: unknown };
  return {
    name: typeof err.name === "string" ? err.name : "Error",
    message: typeof err.message === "string" ? err.message : String(e),
    libsql: err.name === "LibsqlError",
    code: err.code,
    extendedCode: err.extendedCode,
    rawCode: err.rawCode,
    cause: err.cause !== undefined && depth < 2 ? toWire(err.cause, depth + 1) : undefined,
  };
}

let client: Client | null = null;

async function open(msg: { url: string; intMode?: IntMode; busyTimeoutMs: number; generation: Int32Array }) {
  // The main thread's schema generation: a schema change there clears this cache too.
  installStatementCache({ generation: msg.generation });
  const c = createClient({ url: msg.url, intMode: msg.intMode, concurrency: 1 });
  try {
    await c.execute("PRAGMA query_only=1");
    // This thread may wait for a lock synchronously: it holds no one's event loop.
    await c.execute(`PRAGMA busy_timeout=${msg.busyTimeoutMs}`);
  } catch (e) {
    c.close();
    throw e;
  }
  client = c;
}

/** Answers held back at most this long, so a slow read does not hold the fast ones sent with it. */
const FLUSH_MS = 1;

/**
 * Runs a batch of reads (the ones the main thread sent in one turn) and answers them in as few
 * messages as it can: each message is a task on the main thread, and answers that arrive together
 * let the requests waiting on them go on together (group commit relies on that, decision 0053).
 */
async function readAll(batch: Array<{ id: number; sql: string; args?: InArgs }>) {
  let out: unknown[] = [];
  let since = performance.now();
  for (const { id, sql, args } of batch) {
    try {
      const rs = await client!.execute(args === undefined ? sql : { sql, args });
      const rows = new Array<unknown[]>(rs.rows.length);
      for (let i = 0; i < rows.length; i++) rows[i] = Array.prototype.slice.call(rs.rows[i]);
      out.push({ id, columns: rs.columns, columnTypes: rs.columnTypes, rows, rowsAffected: rs.rowsAffected, lastInsertRowid: rs.lastInsertRowid });
    } catch (e) {
      out.push({ id, error: toWire(e) });
    }
    if (performance.now() - since >= FLUSH_MS) {
      self.postMessage(out);
      out = [];
      since = performance.now();
    }
  }
  if (out.length) self.postMessage(out);
}

self.onmessage = (event: MessageEvent) => {
  const msg = event.data as { type?: string };
  if (msg.type === "open") {
    open(msg as Parameters<typeof open>[0]).then(
      () => self.postMessage({ type: "ready" }),
      (e) => self.postMessage({ type: "failed", error: toWire(e) }),
    );
  } else if (msg.type === "close") {
    client?.close();
    client = null;
    process.exit(0);
  } else {
    void readAll(event.data as Array<{ id: number; sql: string; args?: InArgs }>);
  }
};
