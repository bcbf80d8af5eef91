/**
 * A Hrana-over-HTTP server (protocol v2/v3, JSON encoding) backed by `bun:sqlite`: the stand-in for
 * sqld / `turso dev` that `@libsql/client/web`, `@libsql/client` with http: URLs and `db:migrate` talk to.
 */
import { Database, SQLiteError, type Statement } from "bun:sqlite";
import { randomBytes, timingSafeEqual } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { parseArgs } from "node:util";

/** Options of {@link startHranaServer}. */
export interface HranaServerOptions {
  /** TCP port to listen on; 0 (the default) picks a free one. */
  port?: number;
  /** Interface to listen on; 127.0.0.1 unless told otherwise. */
  hostname?: string;
  /** The SQLite file (created, with its directory, if missing), or ":memory:" for a throwaway database. */
  path: string;
  /** When set, every POST must carry `Authorization: Bearer <authToken>` (401 otherwise). */
  authToken?: string;
  /** How long a statement waits for SQLite's write lock before failing with SQLITE_BUSY; default 5000 ms. */
  busyTimeoutMs?: number;
  /** A stream (baton) unused this long expires and its open transaction is rolled back; default 10000 ms. */
  streamIdleTimeoutMs?: number;
  /** `PRAGMA foreign_keys` of every connection; default true, like the app's local client. */
  foreignKeys?: boolean;
}

/** A running server. */
export interface HranaServer {
  /** Base URL to give the libSQL client, `http://127.0.0.1:PORT`. */
  url: string;
  port: number;
  /** Stops listening, rolls back and closes every connection (and deletes a ":memory:" database). */
  stop(): Promise<void>;
}

const DEFAULT_BUSY_TIMEOUT_MS = 5_000;
const DEFAULT_STREAM_IDLE_MS = 10_000;
// Expired batons answer "stream expired" (rather than "invalid baton") this long.
const EXPIRED_MEMORY_MS = 5 * 60_000;
const MAX_IDLE_CONNECTIONS = 8;
const MAX_STORED_SQL = 50;
const HELLO = "Hello, this is HTTP API v2 (Hrana over HTTP)";

// ---------------------------------------------------------------------------------------------
// Errors

// The client broke the protocol: answered with HTTP 400 (text/plain) and the stream is dropped.
class ProtocolError extends Error {}

// A statement-level failure, reported inside the pipeline as a Hrana `Error` ({ message, code }).
class StmtError extends Error {
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
  }
}

// Answered with HTTP 500 and a JSON `Error`, as sqld does.
class StreamExpiredError extends Error {
  readonly code = "STREAM_EXPIRED";
  constructor() {
    super("The stream has expired due to inactivity");
  }
}

interface HranaError {
  message: string;
  code: string;
}

const PRIMARY_CODES: Record<number, string> = {
  1: "SQLITE_ERROR",
  2: "SQLITE_INTERNAL",
  3: "SQLITE_PERM",
  4: "SQLITE_ABORT",
  5: "SQLITE_BUSY",
  6: "SQLITE_LOCKED",
  7: "SQLITE_NOMEM",
  8: "SQLITE_READONLY",
  9: "SQLITE_INTERRUPT",
  10: "SQLITE_IOERR",
  11: "SQLITE_CORRUPT",
  12: "SQLITE_NOTFOUND",
  13: "SQLITE_FULL",
  14: "SQLITE_CANTOPEN",
  15: "SQLITE_PROTOCOL",
  16: "SQLITE_EMPTY",
  17: "SQLITE_SCHEMA",
  18: "SQLITE_TOOBIG",
  19: "SQLITE_CONSTRAINT",
  20: "SQLITE_MISMATCH",
  21: "SQLITE_MISUSE",
  22: "SQLITE_NOLFS",
  23: "SQLITE_AUTH",
  24: "SQLITE_FORMAT",
  25: "SQLITE_RANGE",
  26: "SQLITE_NOTADB",
};

// sqld's shape: primary code name, message prefixed "SQLite error: " (SQLite's own text kept intact).
function toHranaError(e: unknown): HranaError | undefined {
  if (e instanceof StmtError) return { message: e.message, code: e.code };
  if (e instanceof SQLiteError) {
    return {
      message: `SQLite error: ${e.message}`,
      code: PRIMARY_CODES[e.errno & 0xff] ?? "SQLITE_UNKNOWN",
    };
  }
  return undefined;
}

const SQLITE_BUSY = 5;
const SQLITE_BUSY_SNAPSHOT = 517;

// Busy errors worth waiting out; BUSY_SNAPSHOT (a stale read snapshot wanting to write) never clears.
function isRetryableBusy(e: unknown): boolean {
  return (
    e instanceof SQLiteError && (e.errno & 0xff) === SQLITE_BUSY && e.errno !== SQLITE_BUSY_SNAPSHOT
  );
}

// ---------------------------------------------------------------------------------------------
// A small SQL lexer: enough to split statements, classify them and name their parameters.

interface Token {
  kind: "word" | "ident" | "param" | "semi" | "open" | "close" | "other";
  text: string;
  start: number;
  end: number;
}

const WORD_START = /[A-Za-z_\u0080-\uffff]/;
const WORD_PART = /[A-Za-z0-9_$\u0080-\uffff]/;

function tokenize(sql: string): Token[] {
  const out: Token[] = [];
  const n = sql.length;
  let i = 0;
  const closeQuote = (q: string, from: number): number => {
    let j = from + 1;
    for (;;) {
      const k = sql.indexOf(q, j);
      if (k < 0) return n;
      if (q !== "]" && sql[k + 1] === q) {
        j = k + 2;
        continue;
      }
      return k + 1;
    }
  };
  while (i < n) {
    const c = sql[i]!;
    const start = i;
    if (c === " " || c === "\t" || c === "\n" || c === "\r" || c === "\f" || c === "\v") {
      i++;
    } else if (c === "-" && sql[i + 1] === "-") {
      const nl = sql.indexOf("\n", i);
      i = nl < 0 ? n : nl + 1;
    } else if (c === "/" && sql[i + 1] === "*") {
      const e = sql.indexOf("*/", i + 2);
      i = e < 0 ? n : e + 2;
    } else if (c === "'") {
      i = closeQuote("'", i);
      out.push({ kind: "other", text: sql.slice(start, i), start, end: i });
    } else if (c === '"' || c === "`" || c === "[") {
      i = closeQuote(c === "[" ? "]" : c, i);
      out.push({ kind: "ident", text: sql.slice(start, i), start, end: i });
    } else if (c === "?") {
      i++;
      while (i < n && sql[i]! >= "0" && sql[i]! <= "9") i++;
      out.push({ kind: "param", text: sql.slice(start, i), start, end: i });
    } else if ((c === ":" || c === "@" || c === "$") && i + 1 < n && WORD_PART.test(sql[i + 1]!)) {
      i++;
      while (i < n && WORD_PART.test(sql[i]!)) i++;
      out.push({ kind: "param", text: sql.slice(start, i), start, end: i });
    } else if (WORD_START.test(c)) {
      while (i < n && WORD_PART.test(sql[i]!)) i++;
      out.push({ kind: "word", text: sql.slice(start, i), start, end: i });
    } else if ((c >= "0" && c <= "9") || (c === "." && /[0-9]/.test(sql[i + 1] ?? ""))) {
      while (i < n && /[0-9A-Za-z_.]/.test(sql[i]!)) i++;
      out.push({ kind: "other", text: sql.slice(start, i), start, end: i });
    } else {
      i++;
      const kind = c === ";" ? "semi" : c === "(" ? "open" : c === ")" ? "close" : "other";
      out.push({ kind, text: c, start, end: i });
    }
  }
  return out;
}

const keyword = (t: Token | undefined): string => (t?.kind === "word" ? t.text.toUpperCase() : "");

function isCreateTrigger(tokens: Token[]): boolean {
  if (keyword(tokens[0]) !== "CREATE") return false;
  const second = keyword(tokens[1]);
  return (
    second === "TRIGGER" ||
    ((second === "TEMP" || second === "TEMPORARY") && keyword(tokens[2]) === "TRIGGER")
  );
}

interface SqlStatement {
  text: string;
  tokens: Token[];
}

// SQL texts already split, with their tokens: clients send the same few statements again and
// again, and lexing each one every time was a tenth of the server's CPU under load. Bounded; the
// entries are never mutated.
const SPLIT_CACHE_LIMIT = 512;
const splitCache = new Map<string, SqlStatement[]>();

function splitStatementsCached(sql: string): SqlStatement[] {
  let statements = splitCache.get(sql);
  if (statements === undefined) {
    statements = splitStatements(sql);
    if (splitCache.size >= SPLIT_CACHE_LIMIT) splitCache.clear();
    splitCache.set(sql, statements);
  }
  return statements;
}

// Splits on top-level semicolons (a CREATE TRIGGER body ends at `END;`), dropping empty statements.
function splitStatements(sql: string): SqlStatement[] {
  const stmts: SqlStatement[] = [];
  let cur: Token[] = [];
  const flush = () => {
    const first = cur[0];
    const last = cur[cur.length - 1];
    if (first && last) stmts.push({ text: sql.slice(first.start, last.end), tokens: cur });
    cur = [];
  };
  for (const t of tokenize(sql)) {
    if (t.kind === "semi" && !(isCreateTrigger(cur) && keyword(cur[cur.length - 1]) !== "END")) {
      flush();
    } else {
      cur.push(t);
    }
  }
  flush();
  return stmts;
}

interface Analysis {
  isExplain: boolean;
  // INSERT/REPLACE/UPDATE/DELETE (also behind WITH): only those report affected rows, as in sqld.
  isIud: boolean;
  // INSERT/REPLACE: only those report last_insert_rowid, as in sqld.
  isInsert: boolean;
  // libSQL's `BEGIN [TRANSACTION] READONLY` (what the client sends for transaction("read")).
  isReadonlyBegin: boolean;
  // Changes connection state that must not leak into a pooled connection.
  touchesSession: boolean;
}

const MAIN_VERBS = new Set(["SELECT", "VALUES", "INSERT", "REPLACE", "UPDATE", "DELETE"]);

function analyze(tokens: Token[]): Analysis {
  const first = keyword(tokens[0]);
  let verb = first;
  if (first === "WITH") {
    let depth = 0;
    verb = "";
    for (const t of tokens.slice(1)) {
      if (t.kind === "open") depth++;
      else if (t.kind === "close") depth--;
      else if (depth === 0 && MAIN_VERBS.has(keyword(t))) {
        verb = keyword(t);
        break;
      }
    }
  }
  const words = tokens.map(keyword);
  const isReadonlyBegin =
    first === "BEGIN" &&
    tokens.every((t) => t.kind === "word") &&
    (words.join(" ") === "BEGIN READONLY" || words.join(" ") === "BEGIN TRANSACTION READONLY");
  return {
    isExplain: first === "EXPLAIN",
    isIud: verb === "INSERT" || verb === "REPLACE" || verb === "UPDATE" || verb === "DELETE",
    isInsert: verb === "INSERT" || verb === "REPLACE",
    isReadonlyBegin,
    touchesSession:
      first === "PRAGMA" ||
      first === "ATTACH" ||
      first === "DETACH" ||
      (first === "CREATE" && words.some((w) => w === "TEMP" || w === "TEMPORARY")),
  };
}

// Parameter names by index as sqlite3_bind_parameter_name gives them (null for a bare `?`).
function parameterNames(tokens: Token[], count: number): Array<string | null> {
  const names: Array<string | null> = new Array<string | null>(count).fill(null);
  const seen = new Map<string, number>();
  let max = 0;
  for (const t of tokens) {
    if (t.kind !== "param") continue;
    if (t.text === "?") {
      max++;
    } else if (t.text.startsWith("?")) {
      const index = Number(t.text.slice(1));
      if (index >= 1 && index <= count) names[index - 1] = t.text;
      max = Math.max(max, index);
    } else if (!seen.has(t.text)) {
      max++;
      seen.set(t.text, max);
      if (max <= count) names[max - 1] = t.text;
    }
  }
  return names;
}

// ---------------------------------------------------------------------------------------------
// JSON protocol values

type BindValue = null | bigint | number | string | Uint8Array;

interface JsonCol {
  name: string;
  decltype: string | null;
}

interface JsonStmtResult {
  cols: JsonCol[];
  rows: unknown[][];
  affected_row_count: number;
  last_insert_rowid: string | null;
}

// Never-colliding stand-ins for ±Infinity, which JSON cannot spell; swapped for 1e999 after encoding.
const INF_NONCE = randomBytes(12).toString("hex");
const POS_INF = `\u0001+inf:${INF_NONCE}`;
const NEG_INF = `\u0001-inf:${INF_NONCE}`;

function encodeValue(v: unknown): unknown {
  if (v === null || v === undefined) return { type: "null" };
  if (typeof v === "bigint") return { type: "integer", value: v.toString() };
  if (typeof v === "number") {
    if (Number.isFinite(v)) return { type: "float", value: v };
    return { type: "float", value: v > 0 ? POS_INF : NEG_INF };
  }
  if (typeof v === "string") return { type: "text", value: v };
  if (v instanceof Uint8Array) {
    return {
      type: "blob",
      base64: Buffer.from(v.buffer, v.byteOffset, v.byteLength)
        .toString("base64")
        .replace(/=+$/, ""),
    };
  }
  return { type: "text", value: String(v) };
}

function toJson(body: unknown): string {
  const text = JSON.stringify(body);
  if (!text.includes(INF_NONCE)) return text;
  return text
    .replaceAll(JSON.stringify(POS_INF), "1e999")
    .replaceAll(JSON.stringify(NEG_INF), "-1e999");
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

function obj(v: unknown, what: string): Record<string, unknown> {
  if (!isObject(v)) throw new ProtocolError(`Expected ${what} to be an object`);
  return v;
}

function list(v: unknown, what: string): unknown[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new ProtocolError(`Expected ${what} to be an array`);
  return v;
}

function optString(v: unknown, what: string): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string") throw new ProtocolError(`Expected ${what} to be a string`);
  return v;
}

function optInt(v: unknown, what: string): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isInteger(v))
    throw new ProtocolError(`Expected ${what} to be an integer`);
  return v;
}

function decodeValue(raw: unknown): BindValue {
  const v = obj(raw, "a value");
  switch (v.type) {
    case "null":
      return null;
    case "integer":
      try {
        if (
          typeof v.value === "string" ||
          (typeof v.value === "number" && Number.isInteger(v.value))
        ) {
          const n = BigInt(v.value);
          if (n >= -(2n ** 63n) && n < 2n ** 63n) return n;
        }
      } catch {
        // fall through to the protocol error
      }
      throw new ProtocolError("Invalid integer value");
    case "float":
      if (typeof v.value === "number") return v.value;
      if (typeof v.value === "string" && !Number.isNaN(Number(v.value))) return Number(v.value);
      throw new ProtocolError("Invalid float value");
    case "text":
      if (typeof v.value !== "string") throw new ProtocolError("Invalid text value");
      return v.value;
    case "blob": {
      const b64 = v.base64 ?? v.value;
      if (typeof b64 !== "string") throw new ProtocolError("Invalid blob value");
      return new Uint8Array(Buffer.from(b64, "base64"));
    }
    default:
      throw new ProtocolError(`Unknown value type ${JSON.stringify(v.type)}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Connections

// Prepared statements a connection keeps, by SQL text (least recently used dropped first).
const STATEMENT_CACHE_LIMIT = 128;

// One bun:sqlite connection. SQLite's own busy timeout stays 0: waiting happens asynchronously.
class Conn {
  readonly db: Database;
  readonly #stats: Statement;
  // Preparing every statement anew was the server's largest cost (sqld keeps them too). SQLite
  // re-prepares a kept statement itself after a schema change, and bun:sqlite refreshes its
  // column names; each statement runs to completion synchronously, so one is never shared.
  readonly #statements = new Map<string, Statement>();
  // Inside `BEGIN READONLY` (emulated with PRAGMA query_only until the transaction ends).
  readonlyTx = false;
  // Ran something (PRAGMA, ATTACH, TEMP objects) that makes it unfit for reuse by another stream.
  dirty = false;
  #closed = false;

  constructor(file: string, foreignKeys: boolean) {
    this.db = new Database(file, { create: true, readwrite: true, safeIntegers: true });
    // A SQLite-level busy wait would block the event loop, and with it the request that would
    // release the lock; busy statements are retried asynchronously instead (see Backend.retryBusy).
    this.db.run("PRAGMA busy_timeout = 0");
    this.db.run("PRAGMA synchronous = NORMAL");
    this.db.run(`PRAGMA foreign_keys = ${foreignKeys ? "ON" : "OFF"}`);
    this.#stats = this.db.prepare("SELECT changes(), last_insert_rowid()");
  }

  get inTransaction(): boolean {
    return this.db.inTransaction;
  }

  // The prepared statement for `sql`, kept for the next use.
  statement(sql: string): Statement {
    let stmt = this.#statements.get(sql);
    if (stmt) {
      this.#statements.delete(sql); // re-inserted below: the Map's order is the LRU order
    } else {
      stmt = this.db.prepare(sql);
      if (this.#statements.size >= STATEMENT_CACHE_LIMIT) {
        const [oldest, evicted] = this.#statements.entries().next().value!;
        this.#statements.delete(oldest);
        evicted.finalize();
      }
    }
    this.#statements.set(sql, stmt);
    return stmt;
  }

  stats(): { changes: bigint; lastRowid: bigint } {
    const row = this.#stats.values()[0] ?? [0n, 0n];
    return { changes: BigInt(row[0] as bigint), lastRowid: BigInt(row[1] as bigint) };
  }

  // Ends an emulated read-only transaction once SQLite left the transaction.
  settle(): void {
    if (this.readonlyTx && !this.db.inTransaction) {
      this.db.run("PRAGMA query_only = 0");
      this.readonlyTx = false;
    }
  }

  // Rolls back whatever is open; false if the connection is unusable.
  reset(): boolean {
    try {
      if (this.db.inTransaction) this.db.run("ROLLBACK");
      this.settle();
      return !this.dirty && !this.db.inTransaction;
    } catch {
      return false;
    }
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    try {
      if (this.db.inTransaction) this.db.run("ROLLBACK");
    } catch {
      // closing rolls back anyway
    }
    this.#stats.finalize();
    for (const stmt of this.#statements.values()) stmt.finalize();
    this.#statements.clear();
    this.db.close();
  }
}

// ---------------------------------------------------------------------------------------------
// Streams and request handling

interface HranaStream {
  id: string;
  // Sequence number the next baton must carry.
  seq: number;
  conn: Conn | undefined;
  sqls: Map<number, string>;
  acquired: boolean;
  closed: boolean;
  timer: ReturnType<typeof setTimeout> | undefined;
}

interface PreparedStmt {
  sql: string;
  analysis: Analysis;
  tokens: Token[];
  positional: BindValue[];
  named: Array<[string, BindValue]>;
  wantRows: boolean;
}

type Cond =
  | { type: "ok" | "error"; step: number }
  | { type: "not"; cond: Cond }
  | { type: "and" | "or"; conds: Cond[] }
  | { type: "is_autocommit" };

type StepOutcome =
  | { result: JsonStmtResult; error?: undefined }
  | { result?: undefined; error: HranaError }
  | undefined;

const NAMED_PREFIXES = [":", "@", "$"];

class Backend {
  readonly #file: string;
  readonly #foreignKeys: boolean;
  readonly #busyTimeoutMs: number;
  readonly #idleMs: number;
  readonly #idle: Conn[] = [];
  readonly #streams = new Map<string, HranaStream>();
  readonly #expired = new Map<string, number>();
  #stopped = false;

  constructor(file: string, foreignKeys: boolean, busyTimeoutMs: number, idleMs: number) {
    this.#file = file;
    this.#foreignKeys = foreignKeys;
    this.#busyTimeoutMs = busyTimeoutMs;
    this.#idleMs = idleMs;
  }

  async init(): Promise<void> {
    const conn = new Conn(this.#file, this.#foreignKeys);
    try {
      await this.retryBusy(() => conn.db.run("PRAGMA journal_mode = WAL"));
    } finally {
      this.#release(conn);
    }
  }

  stop(): void {
    this.#stopped = true;
    for (const s of this.#streams.values()) {
      clearTimeout(s.timer);
      s.conn?.close();
      s.conn = undefined;
    }
    this.#streams.clear();
    for (const c of this.#idle.splice(0)) c.close();
  }

  // Runs `fn`, retrying while SQLite reports the database busy, up to the busy timeout.
  async retryBusy<T>(fn: () => T): Promise<T> {
    const deadline = performance.now() + this.#busyTimeoutMs;
    let delay = 1;
    for (;;) {
      try {
        return fn();
      } catch (e) {
        const left = deadline - performance.now();
        if (!isRetryableBusy(e) || this.#stopped || left <= 0) throw e;
        await Bun.sleep(Math.min(delay, left));
        delay = Math.min(delay * 2, 20);
      }
    }
  }

  #acquireConn(): Conn {
    return this.#idle.pop() ?? new Conn(this.#file, this.#foreignKeys);
  }

  #release(conn: Conn): void {
    if (!this.#stopped && conn.reset() && this.#idle.length < MAX_IDLE_CONNECTIONS)
      this.#idle.push(conn);
    else conn.close();
  }

  // -- streams ----------------------------------------------------------------------------------

  #acquireStream(baton: string | undefined): HranaStream {
    if (baton === undefined) {
      const stream: HranaStream = {
        id: crypto.randomUUID(),
        seq: 0,
        conn: undefined,
        sqls: new Map(),
        acquired: true,
        closed: false,
        timer: undefined,
      };
      this.#streams.set(stream.id, stream);
      return stream;
    }
    const m = /^([A-Za-z0-9_-]+)\.(\d+)$/.exec(baton);
    const stream = m ? this.#streams.get(m[1]!) : undefined;
    if (!m || !stream) {
      if (m && this.#expired.has(m[1]!)) throw new StreamExpiredError();
      throw new ProtocolError("Received an invalid baton");
    }
    if (stream.acquired || String(stream.seq) !== m[2]) {
      throw new ProtocolError("Received a baton that has already been used");
    }
    clearTimeout(stream.timer);
    stream.timer = undefined;
    stream.acquired = true;
    stream.seq++;
    return stream;
  }

  // Hands the stream back after a request; returns the next baton, or null once it is closed.
  #releaseStream(stream: HranaStream): string | null {
    stream.acquired = false;
    if (stream.closed || this.#stopped) {
      this.#dropStream(stream);
      return null;
    }
    stream.timer = setTimeout(() => this.#expire(stream), this.#idleMs);
    stream.timer.unref?.();
    return `${stream.id}.${stream.seq}`;
  }

  #dropStream(stream: HranaStream): void {
    clearTimeout(stream.timer);
    stream.closed = true;
    if (stream.conn) this.#release(stream.conn);
    stream.conn = undefined;
    this.#streams.delete(stream.id);
  }

  #expire(stream: HranaStream): void {
    if (stream.acquired || !this.#streams.has(stream.id)) return;
    this.#dropStream(stream);
    const now = Date.now();
    for (const [id, at] of this.#expired) if (at <= now) this.#expired.delete(id);
    this.#expired.set(stream.id, now + EXPIRED_MEMORY_MS);
  }

  #conn(stream: HranaStream): Conn {
    if (stream.closed) throw new ProtocolError("The stream has already been closed");
    stream.conn ??= this.#acquireConn();
    return stream.conn;
  }

  // -- endpoints -------------------------------------------------------------------------------

  async pipeline(body: unknown, version: number): Promise<Response> {
    const req = obj(body, "the request body");
    const stream = this.#acquireStream(optString(req.baton, "baton"));
    try {
      const results: unknown[] = [];
      for (const r of list(req.requests, "requests"))
        results.push(await this.#streamRequest(stream, r, version));
      const baton = this.#releaseStream(stream);
      return jsonResponse(200, { baton, base_url: null, results });
    } catch (e) {
      this.#dropStream(stream);
      throw e;
    }
  }

  async cursor(body: unknown, version: number): Promise<Response> {
    const req = obj(body, "the request body");
    const stream = this.#acquireStream(optString(req.baton, "baton"));
    try {
      const entries: unknown[] = [];
      try {
        const outcomes = await this.#batch(stream, req.batch, version);
        outcomes.forEach((o, step) => {
          if (o?.error) entries.push({ type: "step_error", step, error: o.error });
          else if (o?.result) {
            entries.push({ type: "step_begin", step, cols: o.result.cols });
            for (const row of o.result.rows) entries.push({ type: "row", row });
            entries.push({
              type: "step_end",
              affected_row_count: o.result.affected_row_count,
              last_insert_rowid: o.result.last_insert_rowid,
            });
          }
        });
      } catch (e) {
        const error = toHranaError(e);
        if (!error) throw e;
        entries.push({ type: "error", error });
      }
      const baton = this.#releaseStream(stream);
      const text = [{ baton, base_url: null }, ...entries].map((x) => `${toJson(x)}\n`).join("");
      return new Response(text, { status: 200, headers: { "content-type": "text/plain" } });
    } catch (e) {
      this.#dropStream(stream);
      throw e;
    }
  }

  async #streamRequest(stream: HranaStream, raw: unknown, version: number): Promise<unknown> {
    try {
      return {
        type: "ok",
        response: await this.#handle(stream, obj(raw, "a stream request"), version),
      };
    } catch (e) {
      const error = toHranaError(e);
      if (error) return { type: "error", error };
      throw e;
    }
  }

  async #handle(
    stream: HranaStream,
    req: Record<string, unknown>,
    version: number,
  ): Promise<unknown> {
    switch (req.type) {
      case "close":
        if (stream.conn) this.#release(stream.conn);
        stream.conn = undefined;
        stream.closed = true;
        return { type: "close" };
      case "execute": {
        const conn = this.#conn(stream);
        const prepared = this.#prepare(stream, obj(req.stmt, "stmt"));
        const result = await this.retryBusy(() => this.#execute(conn, prepared));
        return { type: "execute", result };
      }
      case "batch": {
        const outcomes = await this.#batch(stream, req.batch, version);
        return {
          type: "batch",
          result: {
            step_results: outcomes.map((o) => o?.result ?? null),
            step_errors: outcomes.map((o) => o?.error ?? null),
          },
        };
      }
      case "sequence": {
        const conn = this.#conn(stream);
        const sql = this.#sqlText(stream, req.sql, req.sql_id);
        for (const s of splitStatements(sql)) {
          const prepared: PreparedStmt = {
            sql: s.text,
            tokens: s.tokens,
            analysis: analyze(s.tokens),
            positional: [],
            named: [],
            wantRows: false,
          };
          await this.retryBusy(() => this.#execute(conn, prepared));
        }
        return { type: "sequence" };
      }
      case "describe": {
        const conn = this.#conn(stream);
        const sql = this.#sqlText(stream, req.sql, req.sql_id);
        return { type: "describe", result: this.#describe(conn, sql) };
      }
      case "store_sql": {
        const id = optInt(req.sql_id, "sql_id");
        const sql = optString(req.sql, "sql");
        if (id === undefined || sql === undefined)
          throw new ProtocolError("store_sql needs sql_id and sql");
        if (stream.sqls.has(id)) throw new ProtocolError(`SQL text with id ${id} already exists`);
        if (stream.sqls.size >= MAX_STORED_SQL) {
          throw new StmtError(
            `The server already stores ${stream.sqls.size} SQL texts, it cannot store more`,
            "SQL_STORE_TOO_MANY",
          );
        }
        stream.sqls.set(id, sql);
        return { type: "store_sql" };
      }
      case "close_sql": {
        const id = optInt(req.sql_id, "sql_id");
        if (id === undefined) throw new ProtocolError("close_sql needs sql_id");
        stream.sqls.delete(id);
        return { type: "close_sql" };
      }
      case "get_autocommit": {
        if (version < 3)
          throw new ProtocolError(
            "The `get_autocommit` request is supported only in protocol version 3 and higher",
          );
        const conn = this.#conn(stream);
        return { type: "get_autocommit", is_autocommit: !conn.inTransaction };
      }
      default:
        throw new ProtocolError(`Unknown stream request type ${JSON.stringify(req.type)}`);
    }
  }

  #sqlText(stream: HranaStream, sql: unknown, sqlId: unknown): string {
    const text = optString(sql, "sql");
    const id = optInt(sqlId, "sql_id");
    if (text !== undefined && id !== undefined)
      throw new ProtocolError("Both sql and sql_id were given");
    if (text !== undefined) return text;
    if (id === undefined) throw new ProtocolError("Neither sql nor sql_id was given");
    const stored = stream.sqls.get(id);
    if (stored === undefined) throw new ProtocolError(`SQL text with id ${id} was not found`);
    return stored;
  }

  // Validates a statement before anything runs (as sqld does for a whole batch).
  #prepare(stream: HranaStream, stmt: Record<string, unknown>): PreparedStmt {
    const sql = this.#sqlText(stream, stmt.sql, stmt.sql_id);
    const statements = splitStatementsCached(sql);
    if (statements.length === 0)
      throw new StmtError("SQL string does not contain any statement", "SQL_NO_STATEMENT");
    if (statements.length > 1)
      throw new StmtError("SQL string contains more than one statement", "SQL_MANY_STATEMENTS");
    const positional = list(stmt.args, "args").map(decodeValue);
    const named = list(stmt.named_args, "named_args").map((raw): [string, BindValue] => {
      const arg = obj(raw, "a named argument");
      const name = optString(arg.name, "name");
      if (name === undefined) throw new ProtocolError("A named argument has no name");
      return [name, decodeValue(arg.value)];
    });
    if (positional.length > 0 && named.length > 0) {
      throw new StmtError(
        "Specifying both positional and named arguments is not supported",
        "ARGS_BOTH_POSITIONAL_AND_NAMED",
      );
    }
    const wantRows =
      stmt.want_rows === undefined || stmt.want_rows === null ? true : stmt.want_rows === true;
    const only = statements[0]!;
    return {
      sql,
      tokens: only.tokens,
      analysis: analyze(only.tokens),
      positional,
      named,
      wantRows,
    };
  }

  // Runs one statement to completion. Synchronous: a batch never interleaves with other requests.
  #execute(conn: Conn, p: PreparedStmt): JsonStmtResult {
    if (p.analysis.touchesSession) conn.dirty = true;
    if (p.analysis.isReadonlyBegin) {
      conn.db.run("BEGIN DEFERRED");
      conn.db.run("PRAGMA query_only = 1");
      conn.readonlyTx = true;
      return { cols: [], rows: [], affected_row_count: 0, last_insert_rowid: null };
    }
    const stmt = conn.statement(p.sql);
    try {
      let rows: unknown[][];
      if (p.named.length > 0) {
        const bindings: Record<string, BindValue> = {};
        for (const [name, value] of p.named) {
          if (NAMED_PREFIXES.includes(name[0] ?? "")) bindings[name] = value;
          else for (const prefix of NAMED_PREFIXES) bindings[prefix + name] = value;
        }
        rows = stmt.values(bindings as never);
      } else {
        if (p.positional.length > stmt.paramsCount) {
          throw new StmtError(
            `Arguments do not match SQL parameters: the statement takes ${stmt.paramsCount} arguments, ${p.positional.length} were given`,
            "ARGS_INVALID",
          );
        }
        const args: BindValue[] = [...p.positional];
        while (args.length < stmt.paramsCount) args.push(null);
        rows = stmt.values(...(args as never[]));
      }
      const declared = stmt.declaredTypes;
      const cols = stmt.columnNames.map((name, i) => ({ name, decltype: declared[i] ?? null }));
      const { changes, lastRowid } = conn.stats();
      return {
        cols,
        rows: p.wantRows ? (rows ?? []).map((row) => row.map(encodeValue)) : [],
        affected_row_count: p.analysis.isIud ? Number(changes) : 0,
        last_insert_rowid: p.analysis.isInsert ? lastRowid.toString() : null,
      };
    } finally {
      conn.settle();
    }
  }

  async #batch(stream: HranaStream, rawBatch: unknown, version: number): Promise<StepOutcome[]> {
    const conn = this.#conn(stream);
    const steps = list(obj(rawBatch, "batch").steps, "steps").map((raw, i) => {
      const step = obj(raw, "a batch step");
      const cond =
        step.condition === undefined || step.condition === null
          ? undefined
          : parseCond(step.condition, i, version);
      return { cond, stmt: this.#prepare(stream, obj(step.stmt, "stmt")) };
    });
    const outcomes: StepOutcome[] = [];
    for (const step of steps) {
      if (step.cond && !evalCond(step.cond, outcomes, conn)) {
        outcomes.push(undefined);
        continue;
      }
      try {
        outcomes.push({ result: await this.retryBusy(() => this.#execute(conn, step.stmt)) });
      } catch (e) {
        const error = toHranaError(e);
        if (!error) throw e;
        outcomes.push({ error });
      }
    }
    return outcomes;
  }

  #describe(conn: Conn, sql: string): unknown {
    const statements = splitStatements(sql);
    if (statements.length === 0)
      throw new StmtError("SQL string does not contain any statement", "SQL_NO_STATEMENT");
    if (statements.length > 1)
      throw new StmtError("SQL string contains more than one statement", "SQL_MANY_STATEMENTS");
    const only = statements[0]!;
    const analysis = analyze(only.tokens);
    if (analysis.isReadonlyBegin)
      return { params: [], cols: [], is_explain: false, is_readonly: true };
    const stmt = conn.db.prepare(sql);
    try {
      const declared = stmt.declaredTypes;
      return {
        params: parameterNames(only.tokens, stmt.paramsCount).map((name) => ({ name })),
        cols: stmt.columnNames.map((name, i) => ({ name, decltype: declared[i] ?? null })),
        is_explain: analysis.isExplain,
        is_readonly: stmt.readonly,
      };
    } finally {
      stmt.finalize();
    }
  }
}

function parseCond(raw: unknown, stepIndex: number, version: number): Cond {
  const c = obj(raw, "a batch condition");
  switch (c.type) {
    case "ok":
    case "error": {
      const step = optInt(c.step, "step");
      if (step === undefined || step < 0 || step >= stepIndex) {
        throw new ProtocolError("Batch condition refers to an invalid step");
      }
      return { type: c.type, step };
    }
    case "not":
      return { type: "not", cond: parseCond(c.cond, stepIndex, version) };
    case "and":
    case "or":
      return {
        type: c.type,
        conds: list(c.conds, "conds").map((x) => parseCond(x, stepIndex, version)),
      };
    case "is_autocommit":
      if (version < 3)
        throw new ProtocolError(
          "BatchCond of type `is_autocommit` is supported only in protocol version 3 and higher",
        );
      return { type: "is_autocommit" };
    default:
      throw new ProtocolError(`Unknown batch condition type ${JSON.stringify(c.type)}`);
  }
}

function evalCond(cond: Cond, outcomes: StepOutcome[], conn: Conn): boolean {
  switch (cond.type) {
    case "ok":
      return outcomes[cond.step]?.result !== undefined;
    case "error":
      return outcomes[cond.step]?.error !== undefined;
    case "not":
      return !evalCond(cond.cond, outcomes, conn);
    case "and":
      return cond.conds.every((c) => evalCond(c, outcomes, conn));
    case "or":
      return cond.conds.some((c) => evalCond(c, outcomes, conn));
    case "is_autocommit":
      return !conn.inTransaction;
  }
}

// ---------------------------------------------------------------------------------------------
// HTTP

function jsonResponse(status: number, body: unknown): Response {
  // Exactly "application/json": the client compares the header verbatim when it reads an error.
  return new Response(toJson(body), { status, headers: { "content-type": "application/json" } });
}

function textResponse(status: number, text: string): Response {
  return new Response(text, { status, headers: { "content-type": "text/plain" } });
}

function authorized(req: Request, token: Buffer | undefined): boolean {
  if (!token) return true;
  const m = /^Bearer\s+(.+)$/i.exec(req.headers.get("authorization") ?? "");
  if (!m) return false;
  const given = Buffer.from(m[1]!.trim());
  return given.length === token.length && timingSafeEqual(given, token);
}

async function route(backend: Backend, req: Request, token: Buffer | undefined): Promise<Response> {
  const path = new URL(req.url).pathname.replace(/\/+$/, "");
  if (req.method === "GET") {
    if (path === "" || path === "/health" || /\/v[23]$/.test(path)) return textResponse(200, HELLO);
    return textResponse(404, "Not found");
  }
  const endpoint = /\/(v2|v3)\/(pipeline|cursor)$/.exec(path);
  if (!endpoint || (endpoint[1] === "v2" && endpoint[2] === "cursor")) {
    if (/-protobuf\//.test(path))
      return textResponse(404, "Protobuf encoding is not supported; use JSON (v2/v3)");
    return textResponse(404, "Not found");
  }
  if (req.method !== "POST") return textResponse(405, "Method not allowed");
  if (!authorized(req, token)) {
    return jsonResponse(401, { error: "Authentication failed: missing or invalid bearer token" });
  }
  let body: unknown;
  try {
    body = JSON.parse(await req.text());
  } catch (e) {
    return textResponse(400, `Could not deserialize JSON request body: ${(e as Error).message}`);
  }
  const version = endpoint[1] === "v3" ? 3 : 2;
  try {
    return endpoint[2] === "cursor"
      ? await backend.cursor(body, version)
      : await backend.pipeline(body, version);
  } catch (e) {
    if (e instanceof ProtocolError) return textResponse(400, e.message);
    if (e instanceof StreamExpiredError)
      return jsonResponse(500, { message: e.message, code: e.code });
    const error = toHranaError(e);
    if (error) return jsonResponse(500, error);
    return textResponse(500, `Internal server error: ${(e as Error).message}`);
  }
}

/**
 * Starts a Hrana-over-HTTP server on `path`. Clients use it like sqld: `createClient({ url, authToken })`
 * from `@libsql/client/web` or `@libsql/client` (http: URLs). Every stream (baton) gets its own SQLite
 * connection, so interactive transactions on different streams are isolated; writers queue for up to
 * `busyTimeoutMs`, then fail with SQLITE_BUSY.
 */
export async function startHranaServer(options: HranaServerOptions): Promise<HranaServer> {
  const hostname = options.hostname ?? "127.0.0.1";
  const busyTimeoutMs = options.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS;
  let tempDir: string | undefined;
  let file = options.path.replace(/^file:(\/\/)?/, "");
  if (file === ":memory:" || file === "") {
    // Every stream needs its own connection to one shared database: a private temp file does that.
    tempDir = mkdtempSync(join(tmpdir(), "hrana-"));
    file = join(tempDir, "db.sqlite");
  } else {
    mkdirSync(dirname(file) || ".", { recursive: true });
  }
  const backend = new Backend(
    file,
    options.foreignKeys ?? true,
    busyTimeoutMs,
    options.streamIdleTimeoutMs ?? DEFAULT_STREAM_IDLE_MS,
  );
  const token = options.authToken ? Buffer.from(options.authToken) : undefined;
  let server: ReturnType<typeof Bun.serve>;
  try {
    await backend.init();
    server = Bun.serve({
      port: options.port ?? 0,
      hostname,
      // Requests may legitimately wait out the busy timeout before answering.
      idleTimeout: Math.min(255, Math.ceil(busyTimeoutMs / 1000) + 30),
      fetch: (req) => route(backend, req, token),
    });
  } catch (e) {
    backend.stop();
    if (tempDir) rmSync(tempDir, { recursive: true, force: true });
    throw e;
  }
  const port = server.port ?? options.port ?? 0;
  const urlHost =
    hostname === "0.0.0.0" || hostname === "::"
      ? "127.0.0.1"
      : hostname.includes(":")
        ? `[${hostname}]`
        : hostname;
  let stopped: Promise<void> | undefined;
  return {
    url: `http://${urlHost}:${port}`,
    port,
    stop() {
      stopped ??= (async () => {
        await server.stop(true);
        backend.stop();
        if (tempDir) rmSync(tempDir, { recursive: true, force: true });
      })();
      return stopped;
    },
  };
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: {
      port: { type: "string" },
      db: { type: "string" },
      "auth-token": { type: "string" },
      host: { type: "string" },
    },
  });
  const port = Number(values.port ?? process.env.HRANA_PORT ?? 8080);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error("hrana-server: --port must be a whole number between 0 and 65535");
    process.exit(2);
  }
  const server = await startHranaServer({
    port,
    hostname: values.host ?? process.env.HRANA_HOST,
    path: values.db ?? process.env.HRANA_DB ?? ":memory:",
    authToken: values["auth-token"] ?? process.env.HRANA_AUTH_TOKEN ?? undefined,
  });
  console.log(`hrana-server listening on ${server.url}`);
  const shutdown = () => void server.stop().then(() => process.exit(0));
  process.on("SIGINT", shutdown);
  process.on("SIGTERM", shutdown);
}
