/**
 * A real `bun src/server.ts` process on a free port, for tests of what a person running the
 * server sees: its log lines, its answers over HTTP, its exit.
 */
import { join, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "../..");

export interface ServerProcess {
  url: string;
  /** Log lines (JSON parsed where they are JSON, else `{ text }`) printed so far. */
  lines: Array<Record<string, unknown>>;
  stop(): Promise<number>;
}

/** Starts the server on `dir/host.db` (no local Redis unless asked) and waits until it listens. */
export async function startServerProcess(
  dir: string,
  env: Record<string, string> = {},
): Promise<ServerProcess> {
  const proc = Bun.spawn([process.execPath, "src/server.ts"], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? dir,
      PORT: "0",
      HOST_LOCAL_REDIS: "off",
      DATABASE_URL: `file:${join(dir, "host.db")}`,
      ...env,
    },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const lines: Array<Record<string, unknown>> = [];
  const listening = new Promise<string>((resolveUrl, reject) => {
    void (async () => {
      const decoder = new TextDecoder();
      let buffer = "";
      for await (const chunk of proc.stdout as ReadableStream<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        for (let nl = buffer.indexOf("\n"); nl >= 0; nl = buffer.indexOf("\n")) {
          const text = buffer.slice(0, nl);
          buffer = buffer.slice(nl + 1);
          let line: Record<string, unknown>;
          try {
            line = JSON.parse(text);
          } catch {
            line = { text };
          }
          lines.push(line);
          if (line.msg === "listening") resolveUrl(String(line.url).replace(/\/$/, ""));
        }
      }
      const stderr = await new Response(proc.stderr as ReadableStream<Uint8Array>).text();
      reject(new Error(`server exited before listening: ${stderr}`));
    })();
  });
  const url = await listening;
  return {
    url,
    lines,
    async stop() {
      proc.kill("SIGTERM");
      return proc.exited;
    },
  };
}
