/**
 * Row 15 of issue 27: uploads abandoned by slow clients were logged as `error` 500s. A real
 * server, a client that sends headers and part of a body, then closes the connection: the
 * access log has one client event (status 499, "client closed the request"), no error line.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { connect } from "node:net";
import { makeTestApp, type TestApp } from "../helpers/app";
import type { Logger } from "../../src/services/logger";
import { waitFor } from "../helpers/wait";

const lines: Array<Record<string, unknown>> = [];
const logger = {} as Record<string, unknown>;
for (const level of ["debug", "info", "warn", "error"])
  logger[level] = (msg: string, extra: Record<string, unknown> = {}) =>
    lines.push({ level, msg, ...extra });
logger.child = () => logger;

let t: TestApp;
let server: ReturnType<typeof Bun.serve>;
/** Requests whose headers reached the app. */
let arrived = 0;

beforeAll(async () => {
  t = await makeTestApp({}, { logger: logger as unknown as Logger });
  server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: (req, s) => {
      arrived++;
      return t.app.fetch(req, s);
    },
  });
});
afterAll(async () => {
  server.stop(true);
  await t.close();
});

/** Sends headers and part of a declared body, waits until the server reads it, then hangs up. */
async function abandon(path: string, token: string): Promise<void> {
  const socket = connect({ host: "127.0.0.1", port: server.port! });
  await new Promise((resolve) => socket.once("connect", resolve));
  socket.write(
    `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Token ${token}\r\n` +
      'Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"name": "half',
  );
  // Hang up once the server has the request (headers in, body still coming).
  const before = arrived;
  await waitFor(() => arrived !== before, {
    intervalMs: 5,
    message: "the server to take the request",
  });
  socket.destroy();
}

test("abandoned uploads are client events (499, info), never error 500s", async () => {
  for (const path of ["/api/dcim/sites/", "/graphql/"]) await abandon(path, t.admin);
  // Wait for both requests' access-log lines (the server notices the close on its own).
  await waitFor(() => lines.filter((l) => l.request_id && l.status !== undefined).length >= 2, {
    message: "two access-log lines",
  });
  const access = lines.filter((l) => l.request_id && l.status !== undefined);
  expect(access).toHaveLength(2);
  for (const line of access)
    expect(line).toMatchObject({ level: "info", msg: "client closed the request", status: 499 });
  expect(lines.filter((l) => l.level === "error")).toEqual([]);
});
