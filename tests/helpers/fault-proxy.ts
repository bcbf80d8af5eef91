/**
 * An HTTP proxy on 127.0.0.1 that forwards to a server (the Hrana stand-in, the Upstash REST
 * bridge) and misbehaves on demand: hangs, resets the connection before or in the middle of an
 * answer, answers a 5xx or malformed JSON, or lets the request reach the server and holds the
 * answer back until the client gave up (`late`: the server did the work, the client never hears).
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export type FaultKind =
  /** Never answers (until `release()` or `stop()`); the request does not reach the server. */
  | "hang"
  /** Closes the connection without an answer; the request does not reach the server. */
  | "reset"
  /** Forwards, then sends the status line and half the body, then closes the connection. */
  | "reset-mid"
  /** Answers `status` (default 503) with a plain-text body; the server never sees it. */
  | "status"
  /** Answers 200 with a body that is not JSON; the server never sees it. */
  | "malformed"
  /** Forwards (the server does the work), holds the answer until the client hangs up, then drops it. */
  | "late";

interface FaultRule {
  kind: FaultKind;
  /** Which requests it hits (path and body text); default every POST. */
  match?: (path: string, body: string) => boolean;
  /** How many matching requests it hits; default every one until `clear()`. */
  times?: number;
  /** The status of `status`. */
  status?: number;
}

export interface FaultProxy {
  readonly url: string;
  /** Requests that reached the proxy, and how many of them the current rule hit. */
  readonly requests: number;
  readonly hits: number;
  /** The bodies (first 300 characters) of the requests the current rule hit. */
  readonly hitLog: readonly string[];
  /** `late` answers the server gave that the proxy held back and dropped. */
  readonly dropped: number;
  /** Requests held now (`hang`, `late`). */
  readonly held: number;
  /** Sets the rule (replacing the last one; counts of hits start again). */
  inject(rule: FaultRule): void;
  /** Stops injecting; held `hang` requests are forwarded, held `late` answers dropped. */
  clear(): void;
  stop(): Promise<void>;
}

const DROP = ["host", "connection", "content-length", "transfer-encoding", "keep-alive"];

function bodyOf(req: IncomingMessage): Promise<string> {
  return new Promise((done, fail) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => done(Buffer.concat(chunks).toString("utf8")));
    req.on("error", fail);
  });
}

function headersOf(req: IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.headers))
    if (!DROP.includes(k) && typeof v === "string") out[k] = v;
  return out;
}

/** Starts the proxy in front of `target` (listening when it resolves). */
export async function startFaultProxy(target: string): Promise<FaultProxy> {
  const base = target.replace(/\/+$/, "");
  let rule: FaultRule | null = null;
  let requests = 0;
  let hits = 0;
  let dropped = 0;
  let hitLog: string[] = [];
  const waiting = new Set<() => void>();

  const forward = async (req: IncomingMessage, body: string) =>
    fetch(base + (req.url ?? "/"), {
      method: req.method,
      headers: headersOf(req),
      body: req.method === "GET" || req.method === "HEAD" ? undefined : body,
    });

  const pass = async (req: IncomingMessage, res: ServerResponse, body: string) => {
    try {
      const answer = await forward(req, body);
      const payload = Buffer.from(await answer.arrayBuffer());
      const headers: Record<string, string> = {};
      answer.headers.forEach((v, k) => {
        if (!DROP.includes(k)) headers[k] = v;
      });
      res.writeHead(answer.status, { ...headers, "content-length": String(payload.length) });
      res.end(payload);
    } catch {
      res.socket?.destroy();
    }
  };

  // Parks a request until `clear()`, or until its client hangs up (then `gone` runs).
  const park = (req: IncomingMessage, gone: () => void) =>
    new Promise<boolean>((done) => {
      const go = () => {
        waiting.delete(go);
        done(true);
      };
      waiting.add(go);
      req.socket.once("close", () => {
        if (!waiting.has(go)) return;
        waiting.delete(go);
        gone();
        done(false);
      });
    });

  const faults: Record<
    FaultKind,
    (req: IncomingMessage, res: ServerResponse, body: string, r: FaultRule) => Promise<void>
  > = {
    async hang(req, res, body) {
      if (await park(req, () => {})) await pass(req, res, body);
    },
    async reset(_req, res) {
      res.socket?.destroy();
    },
    async "reset-mid"(req, res, body) {
      const answer = await forward(req, body);
      const payload = Buffer.from(await answer.arrayBuffer());
      res.writeHead(answer.status, {
        "content-type": "application/json",
        "content-length": String(payload.length),
      });
      res.write(payload.subarray(0, Math.floor(payload.length / 2)));
      setImmediate(() => res.socket?.destroy());
    },
    async status(_req, res, _body, r) {
      res.writeHead(r.status ?? 503, { "content-type": "text/plain" });
      res.end("upstream unavailable");
    },
    async malformed(_req, res) {
      res.writeHead(200, { "content-type": "application/json" });
      // cut JSON, then a long tail (as an error page would be): a client must not echo it
      res.end(`{"baton": null, "results": [{"type": "ok", "respo${"x".repeat(4_000)}`);
    },
    async late(req, res, body) {
      const answer = await forward(req, body);
      await answer.arrayBuffer();
      await park(req, () => dropped++);
      res.socket?.destroy();
    },
  };

  const server = createServer(async (req, res) => {
    const body = await bodyOf(req);
    requests++;
    const r = rule;
    const matches = r && (r.match ? r.match(req.url ?? "", body) : req.method === "POST");
    if (r && matches && (r.times === undefined || hits < r.times)) {
      hits++;
      hitLog.push(body.slice(0, 300));
      await faults[r.kind](req, res, body, r);
      return;
    }
    await pass(req, res, body);
  });
  await new Promise<void>((ready) => server.listen(0, "127.0.0.1", ready));
  const port = (server.address() as AddressInfo).port;
  const release = () => {
    for (const go of [...waiting]) go();
  };
  return {
    url: `http://127.0.0.1:${port}`,
    get requests() {
      return requests;
    },
    get hits() {
      return hits;
    },
    get hitLog() {
      return hitLog;
    },
    get dropped() {
      return dropped;
    },
    get held() {
      return waiting.size;
    },
    inject(next) {
      rule = next;
      hits = 0;
      hitLog = [];
    },
    clear() {
      rule = null;
      release();
    },
    async stop() {
      rule = null;
      release();
      server.closeAllConnections();
      await new Promise<void>((done) => server.close(() => done()));
    },
  };
}
