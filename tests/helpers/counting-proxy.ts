/**
 * A counting HTTP proxy on 127.0.0.1 in front of the Hrana server: every request the libSQL
 * client sends is one database round trip. Tests read `count` around an operation (a count, not a
 * time) and may look at what each request carried (`log`).
 */
export interface CountingProxy {
  url: string;
  /** Requests forwarded so far (Hrana pipelines and cursors; the version probe is not counted). */
  count: number;
  /** Bytes of the answers to counted requests (what crossed the link back). */
  bytesIn: number;
  /** The SQL of each counted request, for a failing assertion's message. */
  log: string[][];
  reset(): void;
  /**
   * Holds every request whose SQL `match` accepts until `release()` (a race staged on purpose:
   * both writers' read phases done before either write arrives). `held` counts those waiting.
   */
  hold(match: (sql: string[]) => boolean): void;
  held: number;
  release(): void;
  stop(): void;
}

/** The SQL texts of one Hrana pipeline body (JSON), as far as they can be read. */
function sqlOf(body: string): string[] {
  try {
    const out: string[] = [];
    const walk = (v: unknown) => {
      if (!v || typeof v !== "object") return;
      if (Array.isArray(v)) return v.forEach(walk);
      for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
        if (k === "sql" && typeof x === "string") out.push(x.slice(0, 160));
        else walk(x);
      }
    };
    walk(JSON.parse(body));
    return out;
  } catch {
    return [];
  }
}

export function startCountingProxy(target: string): CountingProxy {
  const proxy: CountingProxy = {
    url: "",
    count: 0,
    bytesIn: 0,
    log: [],
    reset() {
      proxy.count = 0;
      proxy.bytesIn = 0;
      proxy.log = [];
    },
    held: 0,
    hold(match) {
      holding = match;
    },
    release() {
      holding = null;
      proxy.held = 0;
      for (const go of waiting.splice(0)) go();
    },
    stop() {
      server.stop(true);
    },
  };
  let holding: ((sql: string[]) => boolean) | null = null;
  const waiting: Array<() => void> = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const url = new URL(req.url);
      const body = req.method === "GET" || req.method === "HEAD" ? undefined : await req.text();
      if (req.method === "POST") {
        proxy.count++;
        const statements = sqlOf(body ?? "");
        proxy.log.push(statements);
        if (holding?.(statements)) {
          proxy.held++;
          await new Promise<void>((go) => waiting.push(go));
        }
      }
      const headers = new Headers(req.headers);
      headers.delete("host");
      const res = await fetch(target + url.pathname + url.search, {
        method: req.method,
        headers,
        body,
      });
      const answer = await res.arrayBuffer();
      if (req.method === "POST") proxy.bytesIn += answer.byteLength;
      return new Response(answer, { status: res.status, headers: res.headers });
    },
  });
  proxy.url = `http://127.0.0.1:${server.port}`;
  return proxy;
}
