/**
 * `npm run manage -- schema export|preview|apply` as a CI job runs it: a real process against a
 * temp database file, and against a Bun server (`bun run src/server.ts`) on 127.0.0.1 with a
 * real token. Exit codes: 0 applied / no changes, 2 destructive refused, 1 any error.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeTestApp, type TestApp } from "../helpers/app";
import { exampleChoiceSets, exampleDoc } from "../schema/helpers";
import { freePort } from "../helpers/worker";
import { withProgress } from "../../src/cli/schema";
import { waitFor } from "../helpers/wait";

setDefaultTimeout(60_000);

const ROOT = join(import.meta.dir, "..", "..");
const BUN = process.execPath;
const CO = "/api/plugins/custom-objects";
const ESC = "\x1b[";

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function cli(args: string[], env: Record<string, string> = {}, stdin?: string): Promise<Run> {
  const proc = Bun.spawn([BUN, "run", "src/cli/manage.ts", "schema", ...args], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? "/tmp",
      LOG_LEVEL: "error",
      ...env,
    },
    stdin: stdin === undefined ? "ignore" : new TextEncoder().encode(stdin),
    stdout: "pipe",
    stderr: "pipe",
  });
  const timer = setTimeout(() => proc.kill("SIGKILL"), 50_000);
  const [stdout, stderr, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  clearTimeout(timer);
  return { code, stdout, stderr };
}

let refusedEntriesSeen = false;
const dir = mkdtempSync(join(tmpdir(), "host-cli-"));
const file = (name: string, content: unknown) => {
  const path = join(dir, name);
  writeFileSync(path, typeof content === "string" ? content : JSON.stringify(content, null, 2));
  return path;
};
/** The example document with circuit_provider's `portal` field removed (a destructive change). */
const removingPortal = () => {
  const doc = exampleDoc();
  const provider = doc.types[0];
  const i = provider.fields.findIndex((f: { name: string }) => f.name === "portal");
  provider.removed_fields = provider.fields.splice(i, 1);
  return doc;
};

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("against the local database (DATABASE_URL)", () => {
  let t: TestApp;
  let env: Record<string, string>;
  beforeAll(async () => {
    const dbUrl = `file:${join(dir, "local.db")}`;
    env = { DATABASE_URL: dbUrl };
    t = await makeTestApp({ DATABASE_URL: dbUrl });
    await exampleChoiceSets(t);
  });
  afterAll(() => t.close());

  test("preview of a new document: a readable diff, no colours off a terminal, nothing written", async () => {
    const r = await cli(["preview", file("example.json", exampleDoc())], env);
    expect(r).toMatchObject({ code: 0, stderr: "" });
    expect(r.stdout).toContain("circuit_provider (new type)");
    expect(r.stdout).toMatch(/\+ cid\s+text, primary, required, unique/);
    expect(r.stdout).toContain("3 types, 3 new, 0 changed, 0 unchanged");
    expect(r.stdout).not.toContain(ESC);
    expect((await t.json("GET", `${CO}/custom-object-types/`)).body.count).toBe(0);
  });

  test("FORCE_COLOR turns colours on; NO_COLOR does not override it", async () => {
    // independent runs (previews write nothing): side by side
    const path = file("example.json", exampleDoc());
    const [r, off] = await Promise.all([
      cli(["preview", path], { ...env, FORCE_COLOR: "1", NO_COLOR: "1" }),
      cli(["preview", path], { ...env, FORCE_COLOR: "0" }),
    ]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`${ESC}32m+`);
    expect(off.stdout).not.toContain(ESC);
  });

  test("apply creates the types (exit 0); applying again changes nothing (exit 0)", async () => {
    const first = await cli(["apply", file("example.json", exampleDoc())], env);
    expect(first).toMatchObject({ code: 0, stderr: "" });
    expect(first.stdout).toContain("Applied.");
    const types = await t.json("GET", `${CO}/custom-object-types/?ordering=slug`);
    expect(types.body.results.map((x: { slug: string }) => x.slug)).toEqual([
      "circuit",
      "circuit_provider",
      "dhcp_scope",
    ]);
    const again = await cli(["apply", file("example.json", exampleDoc())], env);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain("No changes.");
    expect(again.stdout).toContain("3 unchanged");
  });

  test("export prints a document that round-trips; --slug picks types", async () => {
    const all = await cli(["export"], env);
    expect(all.code).toBe(0);
    const exported = JSON.parse(all.stdout);
    expect(exported.types.map((x: { slug: string }) => x.slug)).toEqual([
      "circuit_provider",
      "circuit",
      "dhcp_scope",
    ]);
    expect(exported).toEqual((await t.json("GET", `${CO}/schema/export/`)).body);
    const roundTrip = await cli(["preview", file("exported.json", all.stdout)], env);
    expect(roundTrip.stdout).toContain("3 types, 0 new, 0 changed, 3 unchanged");
    const one = JSON.parse((await cli(["export", "--slug", "circuit"], env)).stdout);
    expect(one.types.map((x: { slug: string }) => x.slug)).toEqual(["circuit"]);
    const missing = await cli(["export", "--slug", "nope"], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("nope");
  });

  test("a .yaml document is read as YAML (custom objects 0.7)", async () => {
    const { stringify } = await import("yaml");
    const doc = exampleDoc();
    doc.types[0].fields.push({ id: 6, name: "yaml_note", type: "text" });
    const path = file("changed.yaml", stringify(doc));
    const preview = await cli(["preview", path], env);
    expect(preview.code).toBe(0);
    expect(preview.stdout).toMatch(/\+ yaml_note\s+text/);
    const broken = await cli(["preview", file("broken.yml", "types: [unclosed")], env);
    expect(broken.code).toBe(1);
    expect(broken.stderr).toContain("is not YAML");
  });

  test("a change: preview marks it, apply applies it; stdin works", async () => {
    const doc = exampleDoc();
    doc.types[1].fields.find(
      (f: { name: string }) => f.name === "bandwidth_mbps",
    ).validation_maximum = 800000;
    doc.types[0].fields.push({ id: 5, name: "noc_email", type: "text" });
    const preview = await cli(["preview", "-"], env, JSON.stringify(doc));
    expect(preview.code).toBe(0);
    expect(preview.stdout).toMatch(/~ bandwidth_mbps\s+validation_maximum: 400000 → 800000/);
    expect(preview.stdout).toMatch(/\+ noc_email\s+text/);
    const applied = await cli(["apply", file("changed.json", doc)], env);
    expect(applied.code).toBe(0);
    const circuit = (await t.json("GET", `${CO}/schema/export/?slug=circuit`)).body.types[0];
    expect(
      circuit.fields.find((f: { name: string }) => f.name === "bandwidth_mbps").validation_maximum,
    ).toBe(800000);
  });

  test("destructive changes: refused with exit 2 and nothing changed; --allow-destructive applies them", async () => {
    // every removal is gated (decision 0075); the row gives the counted impact a row to count
    expect(
      (
        await t.json("POST", `${CO}/circuit_provider/`, {
          body: { name: "Acme", portal: "https://acme.example" },
        })
      ).status,
    ).toBe(201);
    const path = file("removing.json", removingPortal());
    const refused = await cli(["apply", path], env);
    expect(refused.code).toBe(2);
    expect(refused.stdout).toMatch(/- portal\s+removed\s+\[destructive\]/);
    expect(refused.stdout).toContain("destructive: circuit_provider");
    expect(refused.stderr).toContain("--allow-destructive");
    expect(refused.stderr).toContain("circuit_provider.portal: field removed (1 row)");
    refusedEntriesSeen = true;
    const provider = () =>
      t
        .json("GET", `${CO}/schema/export/?slug=circuit_provider`)
        .then((r) => r.body.types[0].fields.map((f: { name: string }) => f.name));
    expect(await provider()).toContain("portal");
    const forced = await cli(["apply", path, "--allow-destructive"], env);
    expect(forced.code).toBe(0);
    expect(await provider()).not.toContain("portal");
  });

  test("trash and restore: the removed field is listed with its rows and comes back with its data (issue 16)", async () => {
    expect(refusedEntriesSeen).toBe(true);
    const listed = await cli(["trash"], env);
    expect(listed.code).toBe(0);
    const line = listed.stdout.split("\n").find((l) => l.includes("circuit_provider.portal"));
    expect(line).toMatch(/^\s*\d+\s+field\s+circuit_provider\.portal\s+1 row\(s\)\s+until /);
    const id = line!.trim().split(/\s+/)[0]!;
    const restored = await cli(["restore", id], env);
    expect(restored).toMatchObject({ code: 0, stderr: "" });
    expect(restored.stdout).toContain("Restored field circuit_provider.portal with 1 row(s).");
    const rows = await t.json("GET", `${CO}/circuit_provider/?name=Acme`);
    expect(rows.body.results[0].portal).toBe("https://acme.example");
    expect((await cli(["trash"], env)).stdout).toContain("The trash is empty.");
    expect((await cli(["restore", "abc"], env)).code).toBe(1);
  });

  test("errors exit 1: invalid document (with paths), bad JSON, missing file, bad usage", async () => {
    const invalidDoc = file("invalid.json", {
      schema_version: "1",
      types: [{ name: "x", slug: "x", fields: [{ id: 1, name: "a", type: "colour" }] }],
    });
    // each run is refused before it writes anything: side by side
    const [invalid, broken, missing, usage, help] = await Promise.all([
      cli(["apply", invalidDoc], env),
      cli(["preview", file("broken.json", "{nope")], env),
      cli(["apply", join(dir, "missing.json")], env),
      cli(["frobnicate"], env),
      cli(["--help"], env),
    ]);
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toContain("invalid_schema");
    expect(invalid.stderr).toContain("$.types[0].fields[0].type");
    expect(broken.stderr).toContain("is not JSON");
    expect(missing.code).toBe(1);
    expect(usage.code).toBe(1);
    expect(usage.stderr).toContain("usage:");
    expect(help.code).toBe(0);
  });

  test("local runs leave no token behind", async () => {
    const tokens = await t.json("GET", "/api/users/tokens/?limit=1000");
    const users = await t.json("GET", "/api/users/users/?username=schema-cli");
    expect(users.body.count).toBe(1);
    expect(
      tokens.body.results.filter(
        (x: { user: { id: number } }) => x.user.id === users.body.results[0].id,
      ),
    ).toEqual([]);
  });
});

describe("against a server (--url, --token)", () => {
  let t: TestApp;
  let server: ReturnType<typeof Bun.spawn>;
  let url: string;
  let token: string;
  let readOnly: string;
  beforeAll(async () => {
    const dbUrl = `file:${join(dir, "remote.db")}`;
    t = await makeTestApp({ DATABASE_URL: dbUrl });
    await exampleChoiceSets(t);
    // the example document's fields name choice sets already stored: naming one takes seeing it
    // (decision 0194)
    token = await t.user("ci", [
      [["add", "change", "view"], "custom_objects.customobjecttype"],
      [["view"], "extras.customfieldchoiceset"],
    ]);
    readOnly = await t.user("reader", [[["view"], "custom_objects.customobjecttype"]]);
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    server = Bun.spawn([BUN, "run", "src/server.ts"], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? "",
        DATABASE_URL: dbUrl,
        HOST: "127.0.0.1",
        PORT: String(port),
        HOST_LOCAL_REDIS: "off",
        LOG_LEVEL: "error",
        TASK_WORKER: "off",
      },
      stdout: "ignore",
      stderr: "inherit",
    });
    await waitFor(() => fetch(`${url}/livez`).then((r) => r.ok), {
      timeoutMs: 30_000,
      intervalMs: 100,
      message: "the server answering /livez",
    });
  });
  afterAll(async () => {
    server?.kill("SIGTERM");
    await server?.exited;
    await t.close();
  });

  test("preview, apply, no changes, export over HTTP with a real token", async () => {
    const path = file("remote.json", exampleDoc());
    expect((await cli(["preview", path, "--url", url, "--token", token])).stdout).toContain(
      "3 new",
    );
    const applied = await cli(["apply", path, "--url", url, "--token", token]);
    expect(applied).toMatchObject({ code: 0, stderr: "" });
    expect((await t.json("GET", `${CO}/custom-object-types/`)).body.count).toBe(3);
    expect((await cli(["apply", path, "--url", url], { HOST_TOKEN: token })).stdout).toContain(
      "No changes.",
    );
    const exported = await cli([
      "export",
      "--url",
      url,
      "--token",
      readOnly,
      "--slug",
      "dhcp_scope",
    ]);
    expect(exported.code).toBe(0);
    expect(JSON.parse(exported.stdout).types[0].slug).toBe("dhcp_scope");
    const json = await cli(["preview", path, "--url", url, "--token", token, "--json"]);
    expect(JSON.parse(json.stdout).diffs).toHaveLength(3);
  });

  test("destructive over HTTP: exit 2, then --allow-destructive", async () => {
    expect(
      (
        await t.json("POST", `${CO}/circuit_provider/`, {
          body: { name: "Remote", portal: "https://remote.example" },
        })
      ).status,
    ).toBe(201);
    const path = file("remote-removing.json", removingPortal());
    const refused = await cli(["apply", path, "--url", url, "--token", token]);
    expect(refused.code).toBe(2);
    expect(refused.stdout).toContain("[destructive]");
    expect(
      (await cli(["apply", path, "--url", url, "--token", token, "--allow-destructive"])).code,
    ).toBe(0);
  });

  test("refusals exit 1: no token, a bad token, no permission, nothing listening", async () => {
    const path = file("remote.json", exampleDoc());
    const unused = `http://127.0.0.1:${await freePort()}`;
    // each is refused before anything is written: side by side
    const [anonymous, invalid, denied, nowhere] = await Promise.all([
      cli(["apply", path, "--url", url]),
      cli(["apply", path, "--url", url, "--token", "0".repeat(40)]),
      cli(["apply", path, "--url", url, "--token", readOnly]),
      cli(["export", "--url", unused, "--token", token]),
    ]);
    expect(anonymous.code).toBe(1);
    expect(anonymous.stderr).toContain("Authentication credentials were not provided.");
    expect(invalid.stderr).toContain("Invalid token");
    expect(denied.code).toBe(1);
    expect(denied.stderr).toContain("permission");
    expect(nowhere.code).toBe(1);
    expect(nowhere.stderr).toContain("could not reach");
  });
});

describe("progress on a terminal", () => {
  const io = (errIsTTY: boolean) => {
    const err: string[] = [];
    return {
      err,
      io: {
        out: async () => {},
        err: async (text: string) => void err.push(text),
        env: {},
        isTTY: false,
        errIsTTY,
        stdin: async () => "",
      },
    };
  };
  test("a call over the threshold shows elapsed time on stderr and ends the line; a quick one or a pipe shows nothing", async () => {
    const slow = io(true);
    const piped = io(false);
    // Both calls last until the terminal one has shown its progress twice.
    const shownTwice = () => waitFor(() => slow.err.length >= 2, { message: "progress shown" });
    const [answer] = await Promise.all([
      withProgress(slow.io, "applying", () => shownTwice().then(() => 42), 100),
      withProgress(piped.io, "applying", shownTwice, 100),
    ]);
    expect(answer).toBe(42);
    expect(slow.err[0]).toMatch(/^\rapplying… \d+\.\d s$/);
    expect(slow.err.length).toBeGreaterThan(2);
    expect(slow.err.at(-1)).toMatch(/^\rapplying: done in \d+\.\d s\n$/);
    expect(piped.err).toEqual([]);
    const quick = io(true);
    await withProgress(quick.io, "applying", async () => {}, 100);
    expect(quick.err).toEqual([]);
  });
});
