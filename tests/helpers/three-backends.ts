/**
 * One app on each backend — a local file, a remote database behind the counting proxy, and
 * miniflare's D1 — for tests that run one scenario on all three and compare the answers.
 */
import { makeTestApp, type TestApp } from "./app";
import { type D1App, startD1App } from "./d1-app";
import { type RemoteDb, startRemoteDb } from "./remote-db";

export interface ThreeBackends {
  local: TestApp;
  remote: TestApp;
  /** The remote app's database: its proxy counts round trips. */
  db: RemoteDb;
  d1: D1App;
  /** `Database.read` calls made on D1 so far (each one round trip). */
  readonly d1Reads: number;
  stop(): Promise<void>;
}

/** Starts the three apps, each on a fresh database named after `name`. */
export async function startThreeBackends(name: string): Promise<ThreeBackends> {
  let reads = 0;
  const d1 = await startD1App(name, (base) => ({
    ...base,
    read: (queries) => {
      reads++;
      return base.read(queries);
    },
  }));
  const db = await startRemoteDb(name);
  const local = await makeTestApp();
  const remote = await makeTestApp({ DATABASE_URL: db.url });
  return {
    local,
    remote,
    db,
    d1,
    get d1Reads() {
      return reads;
    },
    async stop() {
      await local.close();
      await remote.close();
      await db.stop();
      await d1.stop();
    },
  };
}

/** A request in the shape the scenarios take: method, path, body; its status and JSON body. */
export type Json = (
  method: string,
  path: string,
  body?: unknown,
) => Promise<{ status: number; body: any }>;

/** A test app's requests in the shape the scenarios take: method, path, body. */
export const jsonOf = (t: TestApp) => (method: string, path: string, body?: unknown) =>
  t.json(method, path, { body });
