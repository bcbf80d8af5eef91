/**
 * The docs page in a real browser: Debian's headless Chromium (driven by playwright-core) loads
 * `/api/docs/` from a Bun server, asks for a token, renders the reference from `/api/schema/`
 * and lists a custom object type's paths, without one request leaving the app's origin.
 * Skipped where /usr/bin/chromium is missing (`.ci/run` installs it).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CHROMIUM, renderDocs, startExampleServer } from "../../tools/docs-screenshot";

const hasChromium = existsSync(CHROMIUM);
let server: Awaited<ReturnType<typeof startExampleServer>>;
const dir = mkdtempSync(join(tmpdir(), "host-docs-shot-"));

beforeAll(async () => {
  if (hasChromium) server = await startExampleServer();
});
afterAll(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(!hasChromium)("API docs page in headless Chromium", () => {
  test("renders, asks for a token, lists a custom object type's paths, tries one out, stays offline", async () => {
    const shot = join(dir, "docs.png");
    const result = await renderDocs(server.url, server.token, {
      filter: "circuit",
      waitForPath: "/api/plugins/custom-objects/circuit/",
      execute: "/api/plugins/custom-objects/circuit/",
      screenshot: shot,
    });
    expect(result.statusBeforeToken).toContain("needs a token");
    expect(result.paths).toEqual(
      expect.arrayContaining([
        "/api/plugins/custom-objects/circuit/",
        "/api/plugins/custom-objects/circuit/{id}/",
        "/api/plugins/custom-objects/circuit_provider/",
      ]),
    );
    expect(result.foreignRequests).toEqual([]);
    expect(result.executedStatus).toBe("200"); // "Try it out" reached this server with the token
    // The only console error allowed is the token-less first load of /api/schema/ (403).
    expect(result.pageErrors.filter((e) => !/status of 403/.test(e))).toEqual([]);
    expect(statSync(shot).size).toBeGreaterThan(10_000);
  }, 120_000);

  test("without the filter, the host sections are there", async () => {
    const result = await renderDocs(server.url, server.token, { waitForPath: "/api/status/" });
    expect(result.paths).toEqual(expect.arrayContaining(["/api/", "/api/status/", "/api/schema/"]));
  }, 120_000);
});
