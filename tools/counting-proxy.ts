/**
 * An HTTP proxy on 127.0.0.1 that adds latency each way and counts the requests it forwards: the
 * "edge link" in front of a Hrana server (tools/hrana-server.ts), for benches and for tests that
 * count database round trips (issue 28).
 *
 * API:
 *   const proxy = startCountingProxy({ target: hrana.url, latencyMs: 10 });
 *   // or startCountingProxy(hrana.url): no latency, for tests that count
 *   // give the app DATABASE_URL=proxy.url
 *   const { value, trips } = await proxy.measure(() => fetch(...));  // round trips during fn
 *   proxy.trips            // Hrana round trips (POST …/pipeline or …/cursor) since start/reset
 *   proxy.requests         // every request forwarded, version probes included
 *   proxy.statements       // statements those round trips carried (execute + batch steps,
 *                          // the client's BEGIN/COMMIT of a batch included)
 *   proxy.log              // the last 1,000 round trips: { path, statements, sql[] } (first 200
 *                          // characters of each statement), to see what a handler sent
 *   proxy.count            // the same as trips (the name the round-trip tests use)
 *   proxy.bytesIn          // bytes of the answers to those round trips (what came back)
 *   proxy.hold(sql => …)   // holds every round trip whose statements match until release(): a
 *   proxy.held; proxy.release()  // race staged on purpose (both writers' reads done first)
 *   proxy.reset(); proxy.latencyMs = 0; await proxy.stop();
 *
 *   bun tools/counting-proxy.ts --target http://127.0.0.1:8080 --port 8081 --latency 10
 *
 * A round trip is one HTTP request the client waits for; latency is added before forwarding and
 * again before answering (so one round trip costs 2 × latencyMs). Counts are only meaningful while
 * nothing else talks to the proxy: `measure` counts whatever arrives during `fn`.
 */
import { parseArgs } from "node:util";

/** Options of {@link startCountingProxy}. */
export interface CountingProxyOptions {
  /** The server to forward to, e.g. `http://127.0.0.1:8080`. */
  target: string;
  /** Milliseconds added each way (before forwarding and before answering); default 10. */
  latencyMs?: number;
  /** TCP port; 0 (default) picks a free one. Always listens on 127.0.0.1. */
  port?: number;
}

/** One forwarded Hrana request, as recorded in {@link CountingProxy.log}. */
export interface RoundTrip {
  path: string;
  statements: number;
  sql: string[];
  /** `performance.now()` when the request arrived, and when its answer left (latency included). */
  arrived: number;
  answered?: number;
}

/** A running proxy. */
export interface CountingProxy {
  /** `http://127.0.0.1:PORT`: give this to the client as its database URL. */
  readonly url: string;
  readonly port: number;
  /** Milliseconds added each way; may be changed while running. */
  latencyMs: number;
  /** Hrana round trips (POST to a pipeline or cursor endpoint) since start or the last reset. */
  readonly trips: number;
  /** The same as {@link trips}. */
  readonly count: number;
  /** Bytes of the answers to those round trips. */
  readonly bytesIn: number;
  /** Every request forwarded (version probes and other GETs included). */
  readonly requests: number;
  /** Statements carried by the round trips (a batch counts its steps). */
  readonly statements: number;
  /** The most recent round trips, oldest first (at most 1,000). */
  readonly log: readonly RoundTrip[];
  /** Zeroes the counters and clears the log. */
  reset(): void;
  /** Runs `fn` and returns its value with the round trips and statements seen meanwhile. */
  measure<T>(fn: () => Promise<T>): Promise<{ value: T; trips: number; statements: number }>;
  /**
   * Holds every round trip whose statements `match` accepts until {@link release} (a race staged
   * on purpose: both writers' read phases done before either write arrives).
   */
  hold(match: (sql: string[]) => boolean): void;
  /** Round trips held now. */
  readonly held: number;
  /** Lets every held round trip through and stops holding. */
  release(): void;
  stop(): Promise<void>;
}

const LOG_LIMIT = 1_000;
const SQL_PREVIEW = 200;
// Hop-by-hop and framing headers the proxy must not copy onto its own request or answer.
const DROP_HEADERS = ["host", "connection", "content-length", "transfer-encoding", "keep-alive"];

const sleep = (ms: number) => (ms > 0 ? Bun.sleep(ms) : Promise.resolve());

interface Step {
  type?: string;
  sql_id?: number;
  sql?: string;
  stmt?: { sql?: string; sql_id?: number };
  batch?: { steps?: Array<{ stmt?: { sql?: string; sql_id?: number } }> };
}

/**
 * The statements a Hrana pipeline or cursor body carries (JSON encoding), with stored SQL
 * (`store_sql`, remembered in `stored` across requests) resolved to its text.
 */
function statementsOf(body: string, stored: Map<number, string>): string[] {
  let parsed: { requests?: Step[]; batch?: Step["batch"] };
  try {
    parsed = JSON.parse(body);
  } catch {
    return [];
  }
  const out: string[] = [];
  const add = (stmt: { sql?: string; sql_id?: number } | undefined) => {
    if (!stmt) return;
    const sql = stmt.sql ?? stored.get(stmt.sql_id ?? -1) ?? `<sql_id ${stmt.sql_id}>`;
    out.push(sql.slice(0, SQL_PREVIEW));
  };
  for (const r of parsed.requests ?? []) {
    if (r.type === "store_sql" && r.sql_id !== undefined) stored.set(r.sql_id, r.sql ?? "");
    if (r.type === "execute") add(r.stmt);
    if (r.type === "batch") for (const s of r.batch?.steps ?? []) add(s.stmt);
  }
  for (const s of parsed.batch?.steps ?? []) add(s.stmt); // cursor endpoint
  return out;
}

function copyHeaders(from: Headers): Headers {
  const headers = new Headers(from);
  for (const h of DROP_HEADERS) headers.delete(h);
  return headers;
}

/**
 * Starts the proxy (listening when it returns); see the module header for its use. A bare URL is
 * `{ target, latencyMs: 0 }`.
 */
export function startCountingProxy(options: CountingProxyOptions | string): CountingProxy {
  const opts = typeof options === "string" ? { target: options, latencyMs: 0 } : options;
  const target = opts.target.replace(/\/+$/, "");
  let trips = 0;
  let requests = 0;
  let statements = 0;
  let bytesIn = 0;
  let log: RoundTrip[] = [];
  const stored = new Map<number, string>();
  let holding: ((sql: string[]) => boolean) | null = null;
  const waiting: Array<() => void> = [];

  async function forward(req: Request): Promise<Response> {
    const url = new URL(req.url);
    const body = req.method === "GET" || req.method === "HEAD" ? undefined : await req.text();
    requests++;
    const counted = req.method === "POST" && /\/(pipeline|cursor)$/.test(url.pathname);
    const arrived = performance.now();
    let trip: RoundTrip | undefined;
    if (counted) {
      const sql = statementsOf(body ?? "", stored);
      trips++;
      statements += sql.length;
      trip = { path: url.pathname, statements: sql.length, sql, arrived };
      log.push(trip);
      if (log.length > LOG_LIMIT) log = log.slice(-LOG_LIMIT);
      if (holding?.(sql)) await new Promise<void>((go) => waiting.push(go));
    }
    await sleep(proxy.latencyMs);
    const answer = await fetch(target + url.pathname + url.search, {
      method: req.method,
      headers: copyHeaders(req.headers),
      body,
    });
    const payload = await answer.arrayBuffer();
    if (counted) bytesIn += payload.byteLength;
    await sleep(proxy.latencyMs);
    if (trip) trip.answered = performance.now();
    return new Response(payload, { status: answer.status, headers: copyHeaders(answer.headers) });
  }

  const server = Bun.serve({
    port: opts.port ?? 0,
    hostname: "127.0.0.1",
    idleTimeout: 120,
    fetch: forward,
  });
  const port = server.port ?? 0;
  const proxy: CountingProxy = {
    url: `http://127.0.0.1:${port}`,
    port,
    latencyMs: opts.latencyMs ?? 10,
    get trips() {
      return trips;
    },
    get count() {
      return trips;
    },
    get bytesIn() {
      return bytesIn;
    },
    get held() {
      return waiting.length;
    },
    get requests() {
      return requests;
    },
    get statements() {
      return statements;
    },
    get log() {
      return log;
    },
    reset() {
      trips = 0;
      requests = 0;
      statements = 0;
      bytesIn = 0;
      log = [];
    },
    hold(match) {
      holding = match;
    },
    release() {
      holding = null;
      for (const go of waiting.splice(0)) go();
    },
    async measure(fn) {
      const t0 = trips;
      const s0 = statements;
      const value = await fn();
      return { value, trips: trips - t0, statements: statements - s0 };
    },
    async stop() {
      await server.stop(true);
    },
  };
  return proxy;
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: {
      target: { type: "string" },
      port: { type: "string" },
      latency: { type: "string" },
    },
  });
  if (!values.target) {
    console.error("counting-proxy: --target http://127.0.0.1:PORT is required");
    process.exit(2);
  }
  const proxy = startCountingProxy({
    target: values.target,
    port: Number(values.port ?? 0),
    latencyMs: Number(values.latency ?? 10),
  });
  console.log(`counting-proxy on ${proxy.url} → ${values.target}, +${proxy.latencyMs} ms each way`);
  const report = setInterval(() => console.log(`round trips: ${proxy.trips}`), 10_000);
  const shutdown = () => {
    clearInterval(report);
    void proxy.stop().then(() => process.exit(0));
  };
  process.on("SIGINT", shutdown);
  process.on("SIGTERM", shutdown);
}
