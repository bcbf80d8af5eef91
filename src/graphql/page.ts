/**
 * `GET /graphql/` in a browser: a small query page served by the app itself (no CDN, works
 * offline and on Workers). It posts the query with the token typed into it; GraphiQL proper
 * would add a React bundle of several megabytes to the Worker for the same job.
 */
export const GRAPHQL_PAGE_CSP = [
  "default-src 'none'",
  "script-src 'unsafe-inline'",
  "style-src 'unsafe-inline'",
  "connect-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'none'",
].join("; ");

export const GRAPHQL_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Host GraphQL</title>
<style>
body { font: 14px system-ui, sans-serif; margin: 0; display: grid; grid-template-rows: auto 1fr; height: 100vh; }
header { display: flex; gap: .5rem; align-items: center; padding: .5rem; background: #1f2937; color: #fff; }
header input { flex: 1; max-width: 28rem; }
main { display: grid; grid-template-columns: 1fr 1fr; gap: .5rem; padding: .5rem; min-height: 0; }
section { display: grid; grid-template-rows: 2fr 1fr; gap: .5rem; min-height: 0; }
textarea, pre { font: 13px ui-monospace, monospace; margin: 0; padding: .5rem; border: 1px solid #ccc; border-radius: 4px; overflow: auto; }
pre { background: #f8f8f8; white-space: pre-wrap; }
</style>
</head>
<body>
<header>
  <strong>Host GraphQL</strong>
  <input id="token" type="password" placeholder="API token" aria-label="API token">
  <button id="run" type="button">Run (Ctrl+Enter)</button>
</header>
<main>
  <section>
    <textarea id="query" aria-label="Query" spellcheck="false">{
  site_list(pagination: {limit: 10}) {
    id
    name
    slug
  }
}</textarea>
    <textarea id="variables" aria-label="Variables (JSON)" spellcheck="false">{}</textarea>
  </section>
  <pre id="result" aria-label="Result"></pre>
</main>
<script>
const $ = (id) => document.getElementById(id);
$("token").value = sessionStorage.getItem("host-token") || "";
async function run() {
  sessionStorage.setItem("host-token", $("token").value);
  let variables = {};
  try { variables = JSON.parse($("variables").value || "{}"); } catch (e) { $("result").textContent = "Variables: " + e.message; return; }
  const headers = { "content-type": "application/json", accept: "application/json" };
  if ($("token").value) headers.authorization = "Token " + $("token").value;
  const res = await fetch(location.pathname, { method: "POST", headers, body: JSON.stringify({ query: $("query").value, variables }) });
  const text = await res.text();
  try { $("result").textContent = JSON.stringify(JSON.parse(text), null, 2); } catch { $("result").textContent = text; }
}
$("run").onclick = run;
document.addEventListener("keydown", (e) => { if ((e.ctrlKey || e.metaKey) && e.key === "Enter") run(); });
</script>
</body>
</html>
`;
