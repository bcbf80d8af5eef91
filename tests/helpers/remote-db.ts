/**
 * A remote database for the round-trip and race tests: the project's Hrana server on a temporary
 * file behind the counting proxy (round trips counted, write batches held on demand).
 */
import { afterAll, beforeAll } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startHranaServer } from "../../tools/hrana-server";
import { makeTestApp, type TestApp } from "./app";
import { type CountingProxy, startCountingProxy } from "./counting-proxy";

export interface RemoteDb {
  proxy: CountingProxy;
  /** The proxy's URL, the app's `DATABASE_URL`. */
  url: string;
  /** The server's file (a local app on it reads as the local path does). */
  path: string;
  /** Stops the proxy and the server and removes the file (close the app on it first). */
  stop(): Promise<void>;
}

/** Starts a Hrana server on a fresh file under a temporary directory named after `name`. */
export async function startRemoteDb(name: string): Promise<RemoteDb> {
  const dir = mkdtempSync(join(tmpdir(), `host-${name}-`));
  const path = join(dir, "remote.db");
  const hrana = await startHranaServer({ path, port: 0 });
  const proxy = startCountingProxy(hrana.url);
  return {
    proxy,
    url: proxy.url,
    path,
    async stop() {
      proxy.stop();
      await hrana.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface BackendApp {
  t: TestApp;
  /** The remote database's proxy; null on a local file. */
  proxy: CountingProxy | null;
  close(): Promise<void>;
}

/** A test app on a local file, or (`remote`) on a remote database of its own. */
export async function appOn(backend: "local" | "remote", name: string): Promise<BackendApp> {
  const remote = backend === "remote" ? await startRemoteDb(name) : null;
  const t = await makeTestApp(remote ? { DATABASE_URL: remote.url } : {});
  return {
    t,
    proxy: remote?.proxy ?? null,
    async close() {
      await t.close();
      await remote?.stop();
    },
  };
}

/**
 * An app on a remote database for every test of the calling file: started before them, stopped
 * after them (held batches let go first, so closing does not wait on one).
 */
export function remoteAppForFile(name: string): {
  readonly t: TestApp;
  readonly proxy: CountingProxy;
} {
  let remote: RemoteDb;
  let t: TestApp;
  beforeAll(async () => {
    remote = await startRemoteDb(name);
    t = await makeTestApp({ DATABASE_URL: remote.url });
  });
  afterAll(async () => {
    remote.proxy.release();
    await t.close();
    await remote.stop();
  });
  return {
    get t() {
      return t;
    },
    get proxy() {
      return remote.proxy;
    },
  };
}
