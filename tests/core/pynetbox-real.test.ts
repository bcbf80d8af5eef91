/**
 * Issue 29, point 7: the pynetbox section (docs/clients.md), run by the real client. Debian's
 * `python3-pynetbox` (7.0) drives a real Host server on 127.0.0.1: create_token, the session
 * header 7.0's `nb.version` needs, and the literal-slug recipe through create, get, save and
 * delete. Skipped (not passed) where `apt-get install python3-pynetbox` has not been run.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeTestApp, type TestApp } from "../helpers/app";

const PYTHON = "/usr/bin/python3";
const HAS_PYNETBOX =
  Bun.spawnSync([PYTHON, "-c", "import pynetbox"], { stdout: "ignore", stderr: "ignore" })
    .exitCode === 0;

/** The documented pynetbox block (docs/clients.md), from `import pynetbox` to the closing fence. */
function readmeBlock(): string {
  const readme = readFileSync(join(import.meta.dir, "../../docs/clients.md"), "utf8");
  const start = readme.indexOf("```python\nimport pynetbox");
  if (start < 0) throw new Error("docs/clients.md has no pynetbox block");
  return readme.slice(start + "```python\n".length, readme.indexOf("\n```", start));
}

let t: TestApp;
let server: ReturnType<typeof Bun.serve>;
beforeAll(async () => {
  t = await makeTestApp();
  server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: (req, srv) => t.app.fetch(req, srv),
  });
  const user = await t.json("POST", "/api/users/users/", {
    body: { username: "py", password: "py-secret-1", is_superuser: true },
  });
  if (user.status !== 201) throw new Error(JSON.stringify(user.body));
  const schema = {
    schema_version: "1",
    types: [
      {
        name: "circuit_provider",
        slug: "circuit_provider",
        fields: [{ id: 1, name: "name", type: "text", primary: true }],
      },
    ],
  };
  const applied = await t.json("POST", "/api/plugins/custom-objects/schema/apply/", {
    body: { schema },
  });
  if (applied.status !== 200) throw new Error(JSON.stringify(applied.body));
});
afterAll(async () => {
  server?.stop(true);
  await t.close();
});

/** Runs `code` under Debian's python3 with HOST_URL set; returns its stdout as JSON. */
async function python(code: string): Promise<any> {
  const dir = mkdtempSync(join(tmpdir(), "pynetbox-"));
  const file = join(dir, "run.py");
  writeFileSync(file, code);
  const proc = Bun.spawn([PYTHON, file], {
    env: { ...process.env, HOST_URL: `http://127.0.0.1:${server.port}` },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code_] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  if (code_ !== 0) throw new Error(`python exited ${code_}: ${err.slice(-2000)}`);
  return JSON.parse(out.trim().split("\n").pop()!);
}

describe.skipIf(!HAS_PYNETBOX)("pynetbox 7.0 (Debian) against a real server", () => {
  test("the documented block runs as written: token, nb.version, nb.status(), the literal endpoint's create/get/save/delete", async () => {
    const block = readmeBlock().replace('"http://127.0.0.1:8000"', 'os.environ["HOST_URL"]');
    const out = await python(`
import builtins, json, os
USERNAME, PASSWORD = "py", "py-secret-1"
printed = []
builtins.print, _print = (lambda *a, **k: printed.append(" ".join(map(str, a)))), builtins.print
${block}
builtins.print = _print
print(json.dumps({
    "printed": printed,
    "token_shape": [token.version, len(token.key), len(token.token)],
    "gone": providers.get(acme.id) is None,
}))
`);
    expect(out.printed).toEqual(["4.7 4.7.0", "Acme Ltd"]);
    expect(out.token_shape).toEqual([2, 12, 40]);
    expect(out.gone).toBe(true);
  });

  test("7.0's create_token alone takes the 12-character key as its token: the first call is refused (why the docs build nbt_<key>.<token>)", async () => {
    const out = await python(`
import json, os, pynetbox
nb = pynetbox.api(os.environ["HOST_URL"])
tok = nb.create_token("py", "py-secret-1")
try:
    nb.dcim.sites.count()
    result = "accepted"
except pynetbox.RequestError as e:
    result = e.req.status_code
print(json.dumps({"token": nb.token == tok.key, "result": result}))
`);
    expect(out).toEqual({ token: true, result: 403 });
  });

  test("filter(within=...) then delete removes only the prefixes within; a NetBox filter Host lacks raises, never every row (0203)", async () => {
    const out = await python(`
import json, os, pynetbox
nb = pynetbox.api(os.environ["HOST_URL"], token="${t.admin}")
for p in ["10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24", "10.1.3.0/24", "192.168.0.0/16"]:
    nb.ipam.prefixes.create(prefix=p)
for p in nb.ipam.prefixes.filter(within="10.1.0.0/16"):
    p.delete()
try:
    list(nb.ipam.prefixes.filter(vrf_id=1))
    refused = None
except pynetbox.RequestError as e:
    refused = [e.req.status_code, list(e.error.keys()) if isinstance(e.error, dict) else e.error]
print(json.dumps({"left": sorted(str(p) for p in nb.ipam.prefixes.all()), "refused": refused}))
`);
    expect(out.left).toEqual(["10.0.0.0/8", "10.1.0.0/16", "192.168.0.0/16"]);
    expect(out.refused?.[0]).toBe(400);
  });
});
