/**
 * Renders `/api/docs/` in headless Chromium (Debian's `/usr/bin/chromium`, driven by
 * playwright-core) and writes a PNG. Without `--url` it starts a throwaway app on a temp database
 * with the example inventory schema applied, so the page shows custom object type paths.
 *
 * @example bun run tools/docs-screenshot.ts docs.png
 * @example bun run tools/docs-screenshot.ts docs.png --url http://127.0.0.1:8000 --token <key> --filter dcim
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { chromium, type Browser } from "playwright-core";
import { createApp } from "../src/app";
import { loadConfig } from "../src/config";
import { createUser, issueToken } from "../src/core/auth/provisioning";
import { openDatabase } from "../src/db/local";
import { runMigrations } from "../src/migrations";
import { createCache } from "../src/services/cache";

export const CHROMIUM = "/usr/bin/chromium";
/** Offline, quiet, throwaway: no sandbox (root in CI), no GPU, no background traffic. */
export const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
export const EXAMPLE_SCHEMA = join(import.meta.dir, "..", "examples", "inventory-schema.json");

export interface DocsRender {
  /** The API paths the page shows (one per operation block on screen: the list is virtualised). */
  paths: string[];
  /** Requests the page tried to send anywhere but the app (refused). */
  foreignRequests: string[];
  /** Errors on the page's console or uncaught in it. */
  pageErrors: string[];
  /** The status line above the reference (e.g. a token prompt). */
  statusBeforeToken: string;
  /** HTTP status of the "Try it out" call, when `execute` asked for one. */
  executedStatus?: string;
}

/**
 * Opens the docs page at `baseUrl`, enters `token`, waits for the reference to render, and
 * optionally writes a screenshot. Only requests to `baseUrl`'s origin are let through.
 */
export async function renderDocs(
  baseUrl: string,
  token: string | null,
  options: {
    screenshot?: string;
    timeoutMs?: number;
    filter?: string;
    waitForPath?: string;
    execute?: string;
  } = {},
): Promise<DocsRender> {
  const timeout = options.timeoutMs ?? 60_000;
  const origin = new URL(baseUrl).origin;
  const browser: Browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: CHROMIUM_ARGS,
    headless: true,
    timeout,
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1800 } });
    const foreignRequests: string[] = [];
    const pageErrors: string[] = [];
    page.on("console", (m) => {
      if (m.type() === "error") pageErrors.push(m.text());
    });
    page.on("pageerror", (e) => pageErrors.push(String(e)));
    await page.route("**/*", (route) => {
      const url = route.request().url();
      if (url.startsWith(`${origin}/`) || url.startsWith("data:")) return route.continue();
      foreignRequests.push(url);
      return route.abort();
    });
    await page.goto(`${origin}/api/docs/`, { waitUntil: "load", timeout });
    // Either the document loads (no token needed) or the page asks for one.
    await page.waitForFunction(
      () =>
        document.body.dataset.loaded === "true" ||
        (document.getElementById("docs-status")?.textContent ?? "").includes("token"),
      null,
      { timeout },
    );
    const statusBeforeToken = (await page.textContent("#docs-status")) ?? "";
    if (token) {
      await page.fill("#token", token);
      await page.click("#token-form button[type=submit]");
    }
    await page.waitForFunction(() => document.body.dataset.loaded === "true", null, { timeout });
    // The list is virtualised (only what is on screen exists): narrow it with the tag filter.
    if (options.filter) await page.fill(".operation-filter-input", options.filter);
    await page.waitForSelector(
      options.waitForPath
        ? `.opblock-summary-path[data-path="${options.waitForPath}"]`
        : ".opblock",
      { timeout },
    );
    const paths = await page.$$eval(".opblock-summary-path", (els) =>
      els.map((e) => e.getAttribute("data-path") ?? e.textContent ?? ""),
    );
    let executedStatus: string | undefined;
    if (options.execute) {
      // "Try it out" on the GET of that path: the page must send the token to this server.
      const block = page
        .locator(".opblock-get", {
          has: page.locator(`.opblock-summary-path[data-path="${options.execute}"]`),
        })
        .first();
      await block.locator(".opblock-summary-control").click();
      await block.locator("button.try-out__btn").click();
      await block.locator("button.execute").click();
      const status = block
        .locator(".live-responses-table tr.response .response-col_status")
        .first();
      await status.waitFor({ timeout });
      executedStatus = (await status.textContent())?.trim();
    }
    if (options.screenshot) await page.screenshot({ path: options.screenshot, fullPage: false });
    return { paths, foreignRequests, pageErrors, statusBeforeToken, executedStatus };
  } finally {
    await browser.close();
  }
}

/** A throwaway app on a temp database with the example schema, served on loopback. */
export async function startExampleServer(
  schemaPath = EXAMPLE_SCHEMA,
): Promise<{ url: string; token: string; stop(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), "host-docs-"));
  const config = loadConfig(
    { LOG_LEVEL: "silent", DATABASE_URL: `file:${join(dir, "host.db")}` },
    "bun",
  );
  const db = await openDatabase(config.database.url);
  await runMigrations(db);
  const app = await createApp({ config, db, cache: createCache("memory", {}) });
  await createUser(db.orm, { username: "admin", isSuperuser: true });
  const token = (await issueToken(db.orm, { username: "admin" })).key;
  const call = async (method: string, path: string, body: unknown) => {
    const res = await app.request(`http://127.0.0.1${path}`, {
      method,
      headers: { authorization: `Token ${token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  };
  for (const [name, choices] of [
    [
      "support-hours",
      [
        ["24x7", "24x7"],
        ["business", "Business hours"],
      ],
    ],
    [
      "circuit-labels",
      [
        ["primary", "Primary"],
        ["backup", "Backup"],
        ["lab", "Lab"],
      ],
    ],
  ] as const) {
    await call("POST", "/api/extras/custom-field-choice-sets/", { name, extra_choices: choices });
  }
  await call("POST", "/api/plugins/custom-objects/schema/apply/", {
    schema: JSON.parse(readFileSync(schemaPath, "utf8")),
  });
  const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: app.fetch });
  return {
    url: `http://127.0.0.1:${server.port}`,
    token,
    async stop() {
      await server.stop(true);
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

if (import.meta.main) {
  const { values, positionals } = parseArgs({
    args: Bun.argv.slice(2),
    options: { url: { type: "string" }, token: { type: "string" }, filter: { type: "string" } },
    allowPositionals: true,
  });
  const out = positionals[0] ?? "docs-screenshot.png";
  const server = values.url ? null : await startExampleServer();
  try {
    const base = values.url ?? server!.url;
    const token = values.token ?? process.env.HOST_TOKEN ?? server?.token ?? null;
    // On the example app, show the custom object type `circuit` unless told otherwise.
    const filter = values.filter ?? (server ? "circuit" : undefined);
    const result = await renderDocs(base, token, {
      screenshot: out,
      filter,
      waitForPath: server && !values.filter ? "/api/plugins/custom-objects/circuit/" : undefined,
    });
    console.log(
      `wrote ${out}: ${result.paths.length} operations on screen${result.foreignRequests.length ? `; refused requests to ${result.foreignRequests.join(", ")}` : ""}`,
    );
  } finally {
    await server?.stop();
  }
}
