/** The access log in real workerd: one JSON line per request on the Worker's console, no secrets. */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import {
  startRemoteDatabase,
  startWorker,
  type RemoteDatabase,
  type RunningWorker,
} from "../helpers/worker";
import { waitFor } from "../helpers/wait";

setDefaultTimeout(30_000);
const SECRET = "tok-9d1e0b77aa";

let db: RemoteDatabase;
let w: RunningWorker;
const output: string[] = [];
const requestLines = () =>
  output.flatMap((l) => {
    const json = l.slice(l.indexOf("{"));
    try {
      const parsed = JSON.parse(json);
      return parsed.msg === "request" ? [parsed] : [];
    } catch {
      return [];
    }
  });

beforeAll(async () => {
  db = await startRemoteDatabase();
  w = await startWorker({
    bindings: { DATABASE_URL: db.url, LOG_LEVEL: "info" },
    onOutput: (l) => output.push(l),
  });
});
afterAll(async () => {
  await w?.stop();
  await db?.stop();
});

/** The first value `probe` finds in the output (its timeout is a failure bound only). */
function until<T>(probe: () => T | undefined): Promise<T> {
  return waitFor(probe, {
    message: () => `a line logged; output:\n${output.join("\n")}`,
  }) as Promise<T>;
}

describe("access log on Workers", () => {
  test("one line per request with route, status, user id and the echoed request id; secrets redacted", async () => {
    const token = await db.superuserToken();
    const res = await w.fetch(`/api/dcim/sites/?token=${SECRET}&name=HQ`, {
      headers: { authorization: `Token ${token}` },
    });
    expect(res.status).toBe(200);
    const id = res.headers.get("x-request-id")!;
    const line = await until(() => requestLines().find((l) => l.request_id === id));
    expect(line).toMatchObject({
      level: "info",
      method: "GET",
      route: "/api/dcim/sites",
      path: "/api/dcim/sites/",
      status: 200,
      query: "token=***&name=HQ",
    });
    expect(line.user_id).toBeGreaterThan(0);
    expect(typeof line.duration_ms).toBe("number");
    const anon = await w.fetch("/api/dcim/sites/");
    expect(anon.status).toBe(403);
    const denied = await until(() =>
      requestLines().find((l) => l.request_id === anon.headers.get("x-request-id")),
    );
    expect(denied).toMatchObject({ status: 403, user_id: null });
    expect(output.join("\n")).not.toContain(SECRET);
  });
});
