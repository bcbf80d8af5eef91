/**
 * An Upstash-compatible REST server (the protocol `@upstash/redis` speaks) in front of a real
 * redis-server, for local development and tests. Bun only: uses Bun.serve and Bun's Redis client.
 */
import { RedisClient } from "bun";
import type { Server, Socket } from "bun";
import { createHash, timingSafeEqual } from "node:crypto";
import { redactUrl } from "../config";

/** Options of {@link startRedisBridge}. */
export interface RedisBridgeOptions {
  /** TCP port to listen on; 0 (the default) picks a free one. */
  port?: number;
  /** The redis-server behind the bridge, e.g. `redis://127.0.0.1:6379`. */
  redisUrl: string;
  /** The bearer token clients must send (the Upstash REST token). */
  token: string;
  /** Interface to listen on; loopback unless told otherwise. */
  hostname?: string;
}

/** A running bridge. */
export interface RedisBridge {
  /** Base URL to give `@upstash/redis` as `url`. */
  url: string;
  port: number;
  /** Stops listening and closes every Redis connection. */
  stop(): Promise<void>;
}

type Reply = { result: unknown } | { error: string };

const CONNECT_TIMEOUT_MS = 5_000;
const MAX_IDLE_EXCLUSIVE = 8;

// Commands that change connection state: they would corrupt the shared connection.
const REFUSED = new Set([
  "AUTH",
  "HELLO",
  "SELECT",
  "QUIT",
  "RESET",
  "MONITOR",
  "SYNC",
  "PSYNC",
  "REPLCONF",
  "MULTI",
  "EXEC",
  "DISCARD",
  "WATCH",
  "UNWATCH",
  "SUBSCRIBE",
  "PSUBSCRIBE",
  "SSUBSCRIBE",
  "UNSUBSCRIBE",
  "PUNSUBSCRIBE",
  "SUNSUBSCRIBE",
]);

// Commands that may block the connection: they get a connection of their own.
const BLOCKING = new Set([
  "BLPOP",
  "BRPOP",
  "BLMOVE",
  "BRPOPLPUSH",
  "BLMPOP",
  "BZPOPMIN",
  "BZPOPMAX",
  "BZMPOP",
  "WAIT",
  "WAITAOF",
]);

class CommandError extends Error {}

// Owns the Redis connections: one shared (auto-pipelined) and a pool of exclusive ones.
class Connections {
  readonly #url: string;
  #shared: RedisClient | null = null;
  #sharedPending: Promise<RedisClient> | null = null;
  readonly #idle: RedisClient[] = [];
  readonly #all = new Set<RedisClient>();
  readonly #closers = new Set<() => void>();
  #closed = false;

  constructor(url: string) {
    this.#url = url;
  }

  // Opens a connection that answers in RESP2, the reply shapes Upstash returns.
  async #open(): Promise<RedisClient> {
    if (this.#closed) throw new Error("bridge is stopping");
    const client = new RedisClient(this.#url, {
      autoReconnect: false,
      enableOfflineQueue: false,
      connectionTimeout: CONNECT_TIMEOUT_MS,
    });
    this.#all.add(client);
    client.onclose = () => {
      this.#all.delete(client);
      if (this.#shared === client) this.#shared = null;
    };
    try {
      await client.connect();
      try {
        await client.send("HELLO", ["2"]);
      } catch (e) {
        if (!/unknown command/i.test(String((e as Error).message))) throw e;
      }
    } catch (e) {
      client.close();
      this.#all.delete(client);
      throw e;
    }
    return client;
  }

  // The shared connection, reopened when it was lost.
  async shared(): Promise<RedisClient> {
    if (this.#shared?.connected) return this.#shared;
    this.#sharedPending ??= this.#open()
      .then((client) => {
        this.#shared = client;
        return client;
      })
      .finally(() => {
        this.#sharedPending = null;
      });
    return this.#sharedPending;
  }

  async acquire(): Promise<RedisClient> {
    for (let c = this.#idle.pop(); c; c = this.#idle.pop()) if (c.connected) return c;
    return this.#open();
  }

  release(client: RedisClient, reusable: boolean): void {
    if (reusable && !this.#closed && client.connected && this.#idle.length < MAX_IDLE_EXCLUSIVE) {
      this.#idle.push(client);
    } else {
      client.close();
    }
  }

  // Registers something (a pub/sub socket) to close on stop; returns the unregister function.
  track(close: () => void): () => void {
    this.#closers.add(close);
    return () => this.#closers.delete(close);
  }

  close(): void {
    this.#closed = true;
    for (const client of this.#all) client.close();
    this.#all.clear();
    this.#idle.length = 0;
    this.#shared = null;
    for (const close of [...this.#closers]) close();
    this.#closers.clear();
  }
}

function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

// True when the failure is a Redis error reply rather than a connection problem.
function isReplyError(e: unknown): boolean {
  return (
    e instanceof CommandError ||
    (e instanceof Error && (e as { code?: string }).code === "ERR_REDIS_SERVER_ERROR")
  );
}

// Converts a reply to the RESP2 shapes Upstash answers with (maps become flat arrays).
function toPlain(value: unknown): unknown {
  if (value === null || value === undefined) return null;
  switch (typeof value) {
    case "string":
    case "number":
      return value;
    case "boolean":
      return value ? 1 : 0;
    case "bigint":
      return value.toString();
  }
  if (value instanceof Error) return value.message;
  if (value instanceof Uint8Array) return new TextDecoder().decode(value);
  if (Array.isArray(value)) return value.map(toPlain);
  if (typeof value === "object") return Object.entries(value).flatMap(([k, v]) => [k, toPlain(v)]);
  return String(value);
}

// Upstash-Encoding: base64 — every string is base64 (UTF-8 bytes) except a top-level "OK".
function encodeBase64(value: unknown, topLevel: boolean): unknown {
  if (typeof value === "string") {
    return topLevel && value === "OK" ? value : Buffer.from(value, "utf8").toString("base64");
  }
  if (Array.isArray(value)) return value.map((v) => encodeBase64(v, false));
  return value;
}

function encodeReply(reply: Reply, base64: boolean): Reply {
  return base64 && "result" in reply ? { result: encodeBase64(reply.result, true) } : reply;
}

// Turns one JSON command (array of scalars) into Redis arguments.
function parseCommand(raw: unknown): string[] {
  if (!Array.isArray(raw) || raw.length === 0)
    throw new CommandError("ERR command must be a non-empty JSON array");
  return raw.map((arg) => {
    if (typeof arg === "string") return arg;
    if (typeof arg === "number" || typeof arg === "boolean") return String(arg);
    if (arg === null) throw new CommandError("ERR null is not a valid argument");
    return JSON.stringify(arg);
  });
}

function commandName(args: string[]): string {
  return args[0]!.toUpperCase();
}

function checkAllowed(args: string[]): void {
  const name = commandName(args);
  if (REFUSED.has(name) || (name === "CLIENT" && args[1]?.toUpperCase() === "REPLY")) {
    throw new CommandError(
      `ERR command ${name} is not supported over REST; use /multi-exec or /subscribe`,
    );
  }
}

function isBlocking(args: string[]): boolean {
  const name = commandName(args);
  if (BLOCKING.has(name)) return true;
  return (
    (name === "XREAD" || name === "XREADGROUP") && args.some((a) => a.toUpperCase() === "BLOCK")
  );
}

// Sends every command at once on one connection, in order, and collects the replies.
async function sendAll(
  client: RedisClient,
  commands: string[][],
): Promise<PromiseSettledResult<unknown>[]> {
  return Promise.allSettled(commands.map((args) => client.send(args[0]!, args.slice(1))));
}

function settledToReply(s: PromiseSettledResult<unknown>): Reply {
  return s.status === "fulfilled"
    ? { result: toPlain(s.value) }
    : { error: errorMessage(s.reason) };
}

// Runs commands in order (a pipeline): the shared connection unless one of them blocks.
async function runPipeline(conns: Connections, commands: string[][]): Promise<Reply[]> {
  const replies: (Reply | null)[] = commands.map((args) => {
    try {
      checkAllowed(args);
      return null;
    } catch (e) {
      return { error: errorMessage(e) };
    }
  });
  const runnable = commands.filter((_, i) => replies[i] === null);
  if (runnable.length > 0) {
    let settled: PromiseSettledResult<unknown>[];
    if (runnable.some(isBlocking)) {
      const client = await conns.acquire();
      settled = await sendAll(client, runnable);
      conns.release(client, client.connected);
    } else {
      settled = await sendAll(await conns.shared(), runnable);
    }
    let next = 0;
    for (let i = 0; i < replies.length; i++)
      if (replies[i] === null) replies[i] = settledToReply(settled[next++]!);
  }
  return replies as Reply[];
}

// MULTI/EXEC on an exclusive connection. Queue-time errors (unknown command, wrong arity)
// discard the whole transaction and answer one error; run-time errors answer per command.
async function runTransaction(conns: Connections, commands: string[][]): Promise<Reply[]> {
  for (const args of commands) checkAllowed(args);
  const client = await conns.acquire();
  let reusable = false;
  try {
    const all = [["MULTI"], ...commands, ["EXEC"]];
    const settled = await sendAll(client, all);
    const exec = settled[settled.length - 1]!;
    if (exec.status === "rejected") {
      if (!isReplyError(exec.reason)) throw exec.reason;
      reusable = true;
      const queued = settled.slice(1, -1);
      const first = queued.findIndex((s) => s.status === "rejected");
      const detail =
        first >= 0
          ? `: command ${first + 1} [ ${commands[first]![0]} ] ${errorMessage((queued[first] as PromiseRejectedResult).reason)}`
          : "";
      throw new CommandError(`${errorMessage(exec.reason)}${detail}`);
    }
    reusable = true;
    if (!Array.isArray(exec.value)) throw new CommandError("ERR transaction aborted");
    return exec.value.map((v: unknown) =>
      v instanceof Error ? { error: v.message } : { result: toPlain(v) },
    );
  } finally {
    conns.release(client, reusable);
  }
}

// One command; a lost connection throws (HTTP 503) while an error reply answers `{error}`.
async function runSingle(conns: Connections, args: string[]): Promise<Reply> {
  checkAllowed(args);
  const blocking = isBlocking(args);
  const client = blocking ? await conns.acquire() : await conns.shared();
  try {
    return { result: toPlain(await client.send(args[0]!, args.slice(1))) };
  } catch (e) {
    if (isReplyError(e)) return { error: errorMessage(e) };
    throw e;
  } finally {
    if (blocking) conns.release(client, client.connected);
  }
}

// ---- pub/sub over a raw socket (Bun's client cannot deliver pattern messages) ----

type RespValue = string | number | null | Error | RespValue[];

// Parses one RESP2 value from `buf` at `at`; null when more bytes are needed.
function parseResp(buf: Uint8Array, at: number): [RespValue, number] | null {
  const lineEnd = buf.indexOf(13, at);
  if (lineEnd < 0 || lineEnd + 1 >= buf.length) return null;
  const line = new TextDecoder().decode(buf.subarray(at + 1, lineEnd));
  const next = lineEnd + 2;
  switch (buf[at]) {
    case 43: // +
      return [line, next];
    case 45: // -
      return [new Error(line), next];
    case 58: // :
      return [Number(line), next];
    case 36: {
      // $
      const len = Number(line);
      if (len < 0) return [null, next];
      if (buf.length < next + len + 2) return null;
      return [new TextDecoder().decode(buf.subarray(next, next + len)), next + len + 2];
    }
    case 42: {
      // *
      const count = Number(line);
      if (count < 0) return [null, next];
      const items: RespValue[] = [];
      let pos = next;
      for (let i = 0; i < count; i++) {
        const parsed = parseResp(buf, pos);
        if (!parsed) return null;
        items.push(parsed[0]);
        pos = parsed[1];
      }
      return [items, pos];
    }
    default:
      throw new Error(`unexpected RESP type byte ${buf[at]}`);
  }
}

function encodeResp(args: string[]): Uint8Array {
  const parts = [`*${args.length}\r\n`];
  for (const arg of args) parts.push(`$${Buffer.byteLength(arg, "utf8")}\r\n${arg}\r\n`);
  return Buffer.from(parts.join(""), "utf8");
}

// Opens a subscriber socket and reports events as Upstash's SSE lines
// (`subscribe,<channel>,<count>`, `message,<channel>,<message>`, `pmessage,<pattern>,<channel>,<message>`).
async function openSubscriber(
  redisUrl: string,
  kind: "subscribe" | "psubscribe",
  names: string[],
  onLine: (line: string) => void,
  onEnd: () => void,
): Promise<() => void> {
  const u = new URL(redisUrl);
  if (u.protocol !== "redis:" && u.protocol !== "rediss:")
    throw new Error(`pub/sub needs a redis:// or rediss:// URL`);
  let pending: Uint8Array = new Uint8Array(0);
  let ended = false;
  const end = () => {
    if (!ended) {
      ended = true;
      onEnd();
    }
  };
  const socket: Socket = await Bun.connect({
    hostname: u.hostname.replace(/^\[|\]$/g, ""),
    port: Number(u.port || 6379),
    tls: u.protocol === "rediss:",
    socket: {
      data(_s, chunk) {
        const merged = new Uint8Array(pending.length + chunk.length);
        merged.set(pending);
        merged.set(chunk, pending.length);
        let pos = 0;
        for (let parsed = parseResp(merged, pos); parsed; parsed = parseResp(merged, pos)) {
          pos = parsed[1];
          const value = parsed[0];
          if (value instanceof Error) {
            onLine(`error,${value.message}`);
            _s.end();
            end();
            return;
          }
          if (Array.isArray(value)) onLine(value.map((v) => String(v)).join(","));
        }
        pending = merged.slice(pos);
      },
      close: end,
      error: end,
      connectError: end,
    },
  });
  const password = decodeURIComponent(u.password);
  const username = decodeURIComponent(u.username);
  if (password)
    socket.write(encodeResp(username ? ["AUTH", username, password] : ["AUTH", password]));
  socket.write(encodeResp([kind.toUpperCase(), ...names]));
  return () => {
    socket.end();
    end();
  };
}

// ---- HTTP ----

const JSON_HEADERS = { "content-type": "application/json" };

function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), { status, headers: JSON_HEADERS });
}

function digest(s: string): Buffer {
  return createHash("sha256").update(s, "utf8").digest();
}

function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new CommandError("ERR malformed percent-encoding in the path");
  }
}

async function readJson(req: Request): Promise<unknown> {
  const text = await req.text();
  try {
    return JSON.parse(text);
  } catch {
    throw new CommandError("ERR failed to parse the JSON request body");
  }
}

/** Whether the request carries the token (a Bearer header, or `_token` in the query). */
function authorized(req: Request, url: URL, expected: Buffer): boolean {
  const header = req.headers.get("authorization") ?? "";
  const match = /^Bearer\s+(.+)$/i.exec(header.trim());
  const given = match?.[1] ?? url.searchParams.get("_token");
  return given !== null && given !== undefined && timingSafeEqual(digest(given), expected);
}

/** What a request handler needs: the redis address and the shared connections. */
interface BridgeState {
  redisUrl: string;
  conns: Connections;
}

/** `/subscribe/<channel>` and `/psubscribe/<pattern>`: the messages as a server-sent stream. */
async function subscribe(
  state: BridgeState,
  server: Server<undefined>,
  req: Request,
  kind: "subscribe" | "psubscribe",
  names: string[],
): Promise<Response> {
  if (names.length === 0)
    return json({ error: `ERR wrong number of arguments for '${kind}' command` }, 400);
  server.timeout(req, 0);
  const encoder = new TextEncoder();
  let close: (() => void) | null = null;
  let untrack = () => {};
  let open = true;
  const stream = new ReadableStream<Uint8Array>({
    async start(controller) {
      const finish = () => {
        untrack();
        if (open) {
          open = false;
          try {
            controller.close();
          } catch {
            // already closed by the reader
          }
        }
      };
      try {
        close = await openSubscriber(
          state.redisUrl,
          kind,
          names,
          (line) => {
            if (open)
              controller.enqueue(encoder.encode(`data: ${line.replace(/\r?\n/g, " ")}\n\n`));
          },
          finish,
        );
        untrack = state.conns.track(() => close?.());
        if (!open || req.signal.aborted) close(); // the caller left while we were connecting
      } catch (e) {
        controller.enqueue(encoder.encode(`data: error,${errorMessage(e)}\n\n`));
        finish();
      }
    },
    cancel() {
      open = false;
      untrack();
      close?.();
    },
  });
  req.signal.addEventListener("abort", () => close?.());
  return new Response(stream, {
    headers: {
      "content-type": "text/event-stream",
      "cache-control": "no-cache",
      connection: "keep-alive",
    },
  });
}

/** `POST /pipeline` and `POST /multi-exec`: a JSON array of commands, one reply each. */
async function runBatch(
  state: BridgeState,
  req: Request,
  head: "pipeline" | "multi-exec",
  base64: boolean,
): Promise<Response> {
  if (req.method !== "POST" && req.method !== "PUT")
    return json({ error: "Method Not Allowed" }, 405);
  const body = await readJson(req);
  if (!Array.isArray(body) || body.length === 0)
    throw new CommandError("ERR the body must be a non-empty JSON array of commands");
  const commands = body.map(parseCommand);
  const replies =
    head === "pipeline"
      ? await runPipeline(state.conns, commands)
      : await runTransaction(state.conns, commands);
  return json(replies.map((r) => encodeReply(r, base64)));
}

/** One command's arguments: a JSON body on `/`, else the path, a POST body and query pairs. */
async function commandArgs(req: Request, url: URL, segments: string[]): Promise<string[]> {
  if (segments.length === 0) {
    if (req.method === "GET" || req.method === "HEAD")
      throw new CommandError("ERR no command given");
    return parseCommand(await readJson(req));
  }
  const args = [...segments];
  if (req.method === "POST" || req.method === "PUT") {
    const body = await req.text();
    if (body.length > 0) args.push(body);
  }
  for (const [key, value] of url.searchParams) {
    if (key === "_token") continue;
    args.push(key);
    if (value !== "") args.push(value);
  }
  return args;
}

/** One HTTP request: checks the method and token, then routes it to its command form. */
async function handle(
  state: BridgeState,
  expected: Buffer,
  req: Request,
  server: Server<undefined>,
): Promise<Response> {
  const url = new URL(req.url);
  if (!["GET", "POST", "PUT", "HEAD"].includes(req.method))
    return json({ error: "Method Not Allowed" }, 405);
  if (!authorized(req, url, expected)) return json({ error: "Unauthorized" }, 401);
  const base64 = (req.headers.get("upstash-encoding") ?? "").toLowerCase() === "base64";
  try {
    const segments = url.pathname.split("/").filter(Boolean).map(decodeSegment);
    const head = segments[0]?.toLowerCase();
    if (head === "pipeline" || head === "multi-exec")
      return await runBatch(state, req, head, base64);
    if (head === "subscribe" || head === "psubscribe")
      return await subscribe(state, server, req, head, segments.slice(1));
    const args = await commandArgs(req, url, segments);
    if (isBlocking(args)) server.timeout(req, 0);
    const reply = await runSingle(state.conns, args);
    return json(encodeReply(reply, base64), "error" in reply ? 400 : 200);
  } catch (e) {
    if (isReplyError(e)) return json({ error: errorMessage(e) }, 400);
    return json({ error: `bridge: redis unavailable: ${errorMessage(e)}` }, 503);
  }
}

/**
 * Starts the bridge. It answers what `@upstash/redis` sends: `POST /` with a JSON command,
 * the path form (`GET|POST /set/k/v`), `POST /pipeline`, `POST /multi-exec`, and the SSE
 * endpoints `/subscribe/<channel>` and `/psubscribe/<pattern>`. Replies are `{result}` or
 * `{error}` (HTTP 400); `Upstash-Encoding: base64` is honoured.
 * @example const bridge = await startRedisBridge({ redisUrl: "redis://127.0.0.1:6379", token: "t" });
 */
export async function startRedisBridge(options: RedisBridgeOptions): Promise<RedisBridge> {
  if (!options.token) throw new Error("redis bridge: a token is required");
  const state: BridgeState = {
    redisUrl: options.redisUrl,
    conns: new Connections(options.redisUrl),
  };
  const expected = digest(options.token);
  const server = Bun.serve({
    port: options.port ?? 0,
    hostname: options.hostname ?? "127.0.0.1",
    fetch: (req, srv) => handle(state, expected, req, srv),
  });
  const port = server.port ?? 0;
  const host = (options.hostname ?? "127.0.0.1").includes(":")
    ? `[${options.hostname}]`
    : (options.hostname ?? "127.0.0.1");
  return {
    url: `http://${host}:${port}`,
    port,
    async stop() {
      state.conns.close();
      await server.stop(true);
    },
  };
}

function argValue(argv: string[], name: string): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === `--${name}`) return argv[i + 1];
    if (arg.startsWith(`--${name}=`)) return arg.slice(name.length + 3);
  }
  return undefined;
}

if (import.meta.main) {
  const argv = process.argv.slice(2);
  const port = Number(argValue(argv, "port") ?? process.env.REDIS_BRIDGE_PORT ?? 8079);
  const redisUrl =
    argValue(argv, "redis-url") ?? process.env.REDIS_BRIDGE_REDIS_URL ?? "redis://127.0.0.1:6379";
  const token = argValue(argv, "token") ?? process.env.REDIS_BRIDGE_TOKEN ?? "";
  if (!token) {
    console.error("redis-bridge: set --token or REDIS_BRIDGE_TOKEN");
    process.exit(2);
  }
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error("redis-bridge: --port must be a whole number between 0 and 65535");
    process.exit(2);
  }
  const bridge = await startRedisBridge({ port, redisUrl, token });
  console.log(`redis-bridge listening on ${bridge.url} -> ${redactUrl(redisUrl)}`);
  const shutdown = () => void bridge.stop().then(() => process.exit(0));
  process.on("SIGINT", shutdown);
  process.on("SIGTERM", shutdown);
}
