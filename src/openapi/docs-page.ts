/**
 * `/api/docs/`: an interactive API reference (Swagger UI) over `/api/schema/`, fully offline:
 * the page, its script and Swagger UI's assets are all served by this app. The assets are read
 * from `node_modules/swagger-ui-dist` on Bun; the Worker bundle does not carry them, so there
 * the page answers 501 (see docs/decisions/0021-openapi-docs-page.md).
 */

/** The files of swagger-ui-dist the page uses, with their content types. */
const SWAGGER_ASSETS: Record<string, string> = {
  "swagger-ui.css": "text/css; charset=utf-8",
  "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
  "favicon-32x32.png": "image/png",
  "favicon-16x16.png": "image/png",
};

/** Nothing leaves this origin: a page that tried would break here, not silently phone home. */
export const DOCS_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'none'",
].join("; ");

const ASSETS = "/api/docs/assets";

export const DOCS_HTML = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Host API reference</title>
  <link rel="icon" type="image/png" href="${ASSETS}/favicon-32x32.png">
  <link rel="stylesheet" href="${ASSETS}/swagger-ui.css">
  <link rel="stylesheet" href="${ASSETS}/docs.css">
</head>
<body>
  <header id="host-docs-bar">
    <strong>Host API</strong>
    <form id="token-form" autocomplete="off">
      <label for="token">API token</label>
      <input id="token" name="token" type="password" placeholder="Token key (stays in this tab)">
      <button type="submit">Load</button>
      <button type="button" id="forget">Forget</button>
    </form>
    <span id="docs-status" role="status"></span>
  </header>
  <div id="swagger-ui"></div>
  <script src="${ASSETS}/swagger-ui-bundle.js"></script>
  <script src="${ASSETS}/docs.js"></script>
</body>
</html>
`;

const DOCS_CSS = `
#host-docs-bar { display: flex; gap: 1rem; align-items: center; flex-wrap: wrap; padding: .6rem 1.2rem; background: #1b1b1b; color: #fff; font-family: sans-serif; }
#host-docs-bar form { display: flex; gap: .4rem; align-items: center; }
#host-docs-bar input { min-width: 22rem; padding: .3rem; }
#docs-status { color: #ffd479; }
`;

/**
 * Loads the document with the token from the form (kept in sessionStorage only), renders it, and
 * sends the same token with "Try it out" requests.
 */
const DOCS_JS = `(() => {
  const KEY = "host-api-token";
  const status = document.getElementById("docs-status");
  const input = document.getElementById("token");
  let token = sessionStorage.getItem(KEY) || "";
  input.value = token;
  async function load() {
    status.textContent = "Loading /api/schema/ …";
    const headers = { Accept: "application/json" };
    if (token) headers.Authorization = "Token " + token;
    let res;
    try {
      res = await fetch("/api/schema/", { headers });
    } catch (e) {
      status.textContent = "Could not reach the API: " + e;
      return;
    }
    if (res.status === 401 || res.status === 403) {
      status.textContent = token ? "That token was refused (" + res.status + "). Enter another." : "This API needs a token: enter one above.";
      document.getElementById("swagger-ui").replaceChildren();
      return;
    }
    if (!res.ok) {
      status.textContent = "Loading the document failed: HTTP " + res.status;
      return;
    }
    const spec = await res.json();
    status.textContent = "";
    const ui = SwaggerUIBundle({
      spec,
      dom_id: "#swagger-ui",
      validatorUrl: null,
      deepLinking: true,
      docExpansion: "list",
      filter: true,
      defaultModelsExpandDepth: 0,
      presets: [SwaggerUIBundle.presets.apis],
      layout: "BaseLayout",
      requestInterceptor: (req) => {
        if (token && !req.headers.Authorization) req.headers.Authorization = "Token " + token;
        return req;
      },
    });
    if (token) ui.preauthorizeApiKey("tokenAuth", "Token " + token);
    window.hostDocs = { ui, spec };
    document.body.dataset.loaded = "true";
  }
  document.getElementById("token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    token = input.value.trim();
    if (token) sessionStorage.setItem(KEY, token);
    load();
  });
  document.getElementById("forget").addEventListener("click", () => {
    token = "";
    input.value = "";
    sessionStorage.removeItem(KEY);
    load();
  });
  load();
})();
`;

export interface DocsAsset {
  body: Uint8Array | string;
  type: string;
}

type FileReader = (path: string) => Promise<Uint8Array>;

/**
 * Reads swagger-ui-dist from node_modules, where this runtime can (Bun). Reached through
 * `globalThis` so the Worker bundle neither imports nor calls anything Bun-only.
 */
function nodeModulesReader(): { resolve(name: string): string; read: FileReader } | null {
  const bun = (
    globalThis as {
      Bun?: {
        resolveSync(spec: string, from: string): string;
        file(path: string): { bytes(): Promise<Uint8Array> };
      };
    }
  ).Bun;
  const dir = (import.meta as { dir?: string }).dir;
  if (!bun || !dir) return null;
  return {
    resolve: (name) => bun.resolveSync(`swagger-ui-dist/${name}`, dir),
    read: (path) => bun.file(path).bytes(),
  };
}

// Module-level on purpose: a memo of files that do not change (the swagger-ui-dist assets; Bun only), no app state.
const cached = new Map<string, Promise<DocsAsset | null>>();

/** True when this runtime can serve the page (its assets are reachable). */
export const docsAvailable = () => nodeModulesReader() !== null;

/** One asset of the page by file name, or null when there is no such asset. */
export function docsAsset(name: string): Promise<DocsAsset | null> {
  if (name === "docs.js")
    return Promise.resolve({ body: DOCS_JS, type: "text/javascript; charset=utf-8" });
  if (name === "docs.css")
    return Promise.resolve({ body: DOCS_CSS, type: "text/css; charset=utf-8" });
  const type = SWAGGER_ASSETS[name];
  const reader = nodeModulesReader();
  if (!type || !reader) return Promise.resolve(null);
  let found = cached.get(name);
  if (!found) {
    found = reader.read(reader.resolve(name)).then(
      (body) => ({ body, type }),
      () => null,
    );
    cached.set(name, found);
  }
  return found;
}
