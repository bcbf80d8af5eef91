/**
 * `npm run manage -- schema export|preview|apply`: schema documents (§5.1) for CI jobs. Runs
 * against the local database (DATABASE_URL, migrated first) through the app itself, with a
 * short-lived token of an internal superuser, or against a server with `--url` and `--token`.
 * Both paths call the same HTTP endpoints, so both get the same checks and answers.
 *
 * Exit codes: 0 applied or nothing to change (and any successful export/preview), 2 destructive
 * changes refused (409), 1 any other error.
 */
import { readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import { parseArgs } from "node:util";
import { eq } from "drizzle-orm";
import { createApp } from "../app";
import { loadConfig } from "../config";
import { createUser, issueToken } from "../core/auth/provisioning";
import { openDatabase } from "../db/local";
import { runMigrations } from "../migrations";
import { describeDatabaseError } from "../db/connection-errors";
import { tokens, users } from "../db/schema";
import { createCache } from "../services/cache";
import { createLogger } from "../services/logger";
import type { TypeDiff } from "../plugins/custom-objects/schema/diff";

export const SCHEMA_USAGE = `usage:
  npm run manage -- schema export [--slug SLUG …]                     print the types as a schema document
  npm run manage -- schema preview FILE                               show what applying FILE would change
  npm run manage -- schema apply FILE [--allow-destructive] [--purge] [--plan PLAN_ID]
                                                                      apply FILE in one transaction
  npm run manage -- schema trash [--slug SLUG]                        list removed fields and types kept with their data
  npm run manage -- schema restore ID                                 put a trash entry back, data included
options:
  --purge        drop removed fields and types at once instead of keeping them in the trash
  --plan ID      apply only the plan a preview showed (plan_id); refused if the database moved
  --url URL      a Host server (e.g. http://127.0.0.1:8000) instead of the local DATABASE_URL
  --token KEY    API token for --url (or HOST_TOKEN)
  --json         print the server's JSON answer instead of the readable diff
FILE may be - for standard input. Exit codes: 0 applied or no changes, 2 destructive changes refused, 1 error.`;

/** The internal user the local CLI acts as; its tokens live only while a command runs. */
const CLI_USERNAME = "schema-cli";
const API = "/api/plugins/custom-objects/schema";

export interface CliIo {
  out(text: string): Promise<void>;
  err(text: string): Promise<void>;
  env: Record<string, string | undefined>;
  /** Whether stdout is a terminal (colours). */
  isTTY: boolean;
  /** Whether stderr is a terminal (the progress line of a long apply). */
  errIsTTY?: boolean;
  stdin(): Promise<string>;
}

const processIo = (): CliIo => ({
  out: async (text) => void (await Bun.write(Bun.stdout, text)),
  err: async (text) => void (await Bun.write(Bun.stderr, text)),
  env: process.env,
  isTTY: !!process.stdout.isTTY,
  errIsTTY: !!process.stderr.isTTY,
  stdin: () => new Response(Bun.stdin.stream()).text(),
});

class CliError extends Error {}

interface Answer {
  status: number;
  body: any;
}

interface ApiClient {
  call(method: "GET" | "POST" | "DELETE", path: string, body?: unknown): Promise<Answer>;
  close(): Promise<void>;
}

// ---- clients -------------------------------------------------------------------------------

function remoteClient(baseUrl: string, token: string | undefined): ApiClient {
  let base: URL;
  try {
    base = new URL(baseUrl);
  } catch {
    throw new CliError(`--url: not a URL: ${baseUrl}`);
  }
  if (base.protocol !== "http:" && base.protocol !== "https:")
    throw new CliError("--url must start with http:// or https://");
  return {
    async call(method, path, body) {
      const headers: Record<string, string> = { accept: "application/json" };
      if (token)
        headers.authorization = `${token.startsWith("nbt_") ? "Bearer" : "Token"} ${token}`;
      if (body !== undefined) headers["content-type"] = "application/json";
      let res: Response;
      try {
        res = await fetch(new URL(path, base), {
          method,
          headers,
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: AbortSignal.timeout(120_000),
        });
      } catch (e) {
        throw new CliError(`could not reach ${base.origin}: ${(e as Error).message}`);
      }
      const text = await res.text();
      try {
        return { status: res.status, body: text ? JSON.parse(text) : null };
      } catch {
        throw new CliError(`${base.origin} answered ${res.status} with something that is not JSON`);
      }
    },
    async close() {},
  };
}

/**
 * The app in this process over DATABASE_URL (migrated first). Requests carry a token of the
 * internal superuser `schema-cli` that expires in minutes and is deleted when the command ends.
 */
async function localClient(env: CliIo["env"], io: CliIo): Promise<ApiClient> {
  const config = loadConfig({ ...env, LOG_LEVEL: env.LOG_LEVEL ?? "error" }, "bun");
  if (!config.plugins.includes("custom_objects"))
    throw new CliError("the custom_objects plugin is not enabled (PLUGINS)");
  const connectionError = (e: unknown) => {
    const cause = describeDatabaseError(e, config.database.url, config.database.authToken);
    return cause ? new CliError(cause) : e;
  };
  const db = await openDatabase(config.database.url, config.database.authToken, {
    remoteTimeoutMs: config.database.timeoutMs,
  }).catch((e) => {
    throw connectionError(e);
  });
  try {
    await runMigrations(db);
    const logger = createLogger(config.logLevel, (line) => void io.err(`${line}\n`));
    const app = await createApp({ config, db, cache: createCache("memory", {}), logger });
    const [existing] = await db.orm
      .select({ id: users.id })
      .from(users)
      .where(eq(users.username, CLI_USERNAME));
    if (!existing) await createUser(db.orm, { username: CLI_USERNAME, isSuperuser: true });
    const token = await issueToken(db.orm, {
      username: CLI_USERNAME,
      expires: new Date(Date.now() + 15 * 60_000).toISOString(),
      description: "schema CLI (local run; deleted when it ends)",
    });
    return {
      async call(method, path, body) {
        const res = await app.request(`http://localhost${path}`, {
          method,
          headers: {
            authorization: `Token ${token.key}`,
            accept: "application/json",
            ...(body === undefined ? {} : { "content-type": "application/json" }),
          },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        const text = await res.text();
        return { status: res.status, body: text ? JSON.parse(text) : null };
      },
      async close() {
        await db.orm
          .delete(tokens)
          .where(eq(tokens.id, token.id))
          .catch(() => undefined);
        await db.close();
      },
    };
  } catch (e) {
    await db.close();
    throw connectionError(e);
  }
}

// ---- rendering -----------------------------------------------------------------------------

/** Colours only on a terminal, or when FORCE_COLOR asks for them (NO_COLOR turns them off). */
function colorsWanted(io: Pick<CliIo, "env" | "isTTY">): boolean {
  const force = io.env.FORCE_COLOR;
  if (force !== undefined) return !["0", "false", "no"].includes(force.trim().toLowerCase());
  if (io.env.NO_COLOR) return false;
  return io.isTTY;
}

type Paint = (code: string, text: string) => string;
const painter =
  (on: boolean): Paint =>
  (code, text) =>
    on ? `\x1b[${code}m${text}\x1b[0m` : text;
const GREEN = "32";
const YELLOW = "33";
const RED = "31";
const BOLD_RED = "1;31";
const CYAN = "36";
const DIM = "2";
const BOLD = "1";

const show = (v: unknown) =>
  v === null || v === undefined
    ? "∅"
    : typeof v === "string"
      ? JSON.stringify(v)
      : JSON.stringify(v);

function fieldSummary(def: Record<string, unknown>): string {
  const flags = ["primary", "required", "unique"].filter((k) => def[k] === true);
  const extra: string[] = [];
  if (def.related_object_type) extra.push(`→ ${String(def.related_object_type)}`);
  if (Array.isArray(def.related_object_types) && def.related_object_types.length)
    extra.push(`→ ${def.related_object_types.join(" | ")}`);
  if (def.choice_set) extra.push(`choices: ${String(def.choice_set)}`);
  return [String(def.type ?? ""), ...flags, ...extra].filter(Boolean).join(", ");
}

/** The diffs as a readable, optionally coloured text: one block per type, one line per change. */
function renderDiffs(diffs: TypeDiff[], color: boolean): string {
  const p = painter(color);
  const lines: string[] = [];
  const width = Math.max(
    8,
    ...diffs.flatMap((d) =>
      d.field_changes.map((c) => String(c.schema_def?.name ?? c.db_name).length),
    ),
  );
  for (const d of diffs) {
    const state = d.is_new
      ? p(GREEN, "new type")
      : !d.has_changes
        ? p(DIM, "no changes")
        : d.has_destructive_changes
          ? p(BOLD_RED, "changes, DESTRUCTIVE")
          : p(YELLOW, "changes");
    lines.push(`${p(BOLD, d.slug)} (${state})`);
    if (!d.is_new)
      for (const [attr, [from, to]] of Object.entries(d.cot_changes))
        lines.push(`  ${p(YELLOW, "~")} type ${attr}: ${show(from)} → ${show(to)}`);
    for (const c of d.field_changes) {
      const name = String(c.schema_def?.name ?? c.db_name).padEnd(width);
      const mark = c.destructive ? `  ${p(BOLD_RED, "[destructive]")}` : "";
      if (c.op === "add")
        lines.push(`  ${p(GREEN, "+")} ${p(GREEN, name)}  ${fieldSummary(c.schema_def)}`);
      else if (c.op === "remove")
        lines.push(`  ${p(RED, "-")} ${p(RED, c.db_name.padEnd(width))}  removed${mark}`);
      else {
        const attrs = Object.entries(c.changed_attrs ?? {}).map(
          ([k, [from, to]]) => `${k}: ${show(from)} → ${show(to)}`,
        );
        lines.push(`  ${p(YELLOW, "~")} ${p(YELLOW, name)}  ${attrs.join("; ")}${mark}`);
      }
    }
    for (const w of d.warnings) lines.push(`  ${p(CYAN, "!")} ${p(CYAN, `warning: ${w}`)}`);
  }
  const changed = diffs.filter((d) => d.has_changes);
  const destructive = diffs.filter((d) => d.has_destructive_changes);
  const counts = [
    `${diffs.length} type${diffs.length === 1 ? "" : "s"}`,
    `${diffs.filter((d) => d.is_new).length} new`,
    `${changed.filter((d) => !d.is_new).length} changed`,
    `${diffs.length - changed.length} unchanged`,
  ];
  lines.push("");
  lines.push(
    `${counts.join(", ")}${destructive.length ? `; ${p(BOLD_RED, `destructive: ${destructive.map((d) => d.slug).join(", ")}`)}` : ""}`,
  );
  return `${lines.join("\n")}\n`;
}

function describeError(answer: Answer): string {
  const b = answer.body ?? {};
  const lines = [
    `error: ${typeof b.detail === "string" ? b.detail : `HTTP ${answer.status}`}${b.error ? ` (${b.error})` : ""}`,
  ];
  for (const e of Array.isArray(b.schema_errors) ? b.schema_errors : [])
    lines.push(`  ${e.path}: ${e.message}`);
  if (!b.detail && typeof b === "object") lines.push(`  ${JSON.stringify(b)}`);
  return `${lines.join("\n")}\n`;
}

// ---- commands ------------------------------------------------------------------------------

async function readDocument(file: string | undefined, io: CliIo): Promise<unknown> {
  if (!file) throw new CliError("a schema document FILE is required (or - for standard input)");
  let text: string;
  try {
    text = file === "-" ? await io.stdin() : readFileSync(file, "utf8");
  } catch (e) {
    throw new CliError(`cannot read ${file}: ${(e as Error).message}`);
  }
  // `.yaml` / `.yml` files are YAML (custom objects 0.7); anything else, stdin included, JSON.
  if (/\.ya?ml$/i.test(file)) {
    try {
      return parseYaml(text, { maxAliasCount: 50, schema: "core", uniqueKeys: true });
    } catch (e) {
      throw new CliError(`${file} is not YAML: ${(e as Error).message.split("\n")[0]}`);
    }
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new CliError(`${file} is not JSON: ${(e as Error).message}`);
  }
}

const SCHEMA_OPTIONS = {
  slug: { type: "string", multiple: true },
  "allow-destructive": { type: "boolean", default: false },
  purge: { type: "boolean", default: false },
  plan: { type: "string" },
  url: { type: "string" },
  token: { type: "string" },
  json: { type: "boolean", default: false },
  help: { type: "boolean", short: "h", default: false },
} as const;

type SchemaValues = ReturnType<typeof parseArgs<{ options: typeof SCHEMA_OPTIONS }>>["values"];

/** What a subcommand runs with: its options, the API client, the output and the colours. */
interface SchemaRun {
  values: SchemaValues;
  client: ApiClient;
  io: CliIo;
  color: boolean;
}

/** Runs `schema <subcommand> …`; returns the exit code. */
export async function schemaCommand(argv: string[], io: CliIo = processIo()): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: SCHEMA_OPTIONS, allowPositionals: true });
  } catch (e) {
    await io.err(`${(e as Error).message}\n${SCHEMA_USAGE}\n`);
    return 1;
  }
  const { values, positionals } = parsed;
  const [sub, file, ...extra] = positionals;
  if (values.help) {
    await io.out(`${SCHEMA_USAGE}\n`);
    return 0;
  }
  if (sub && !["export", "preview", "apply", "trash", "restore"].includes(sub)) {
    await io.err(`Unknown command: schema ${sub}\n${SCHEMA_USAGE}\n`);
    return 1;
  }
  if (
    !sub ||
    extra.length ||
    ((sub === "export" || sub === "trash") && file) ||
    (sub === "restore" && !/^\d+$/.test(file ?? ""))
  ) {
    await io.err(`${SCHEMA_USAGE}\n`);
    return 1;
  }
  const color = colorsWanted(io);
  let client: ApiClient | null = null;
  try {
    const document =
      sub === "export" || sub === "trash" || sub === "restore"
        ? null
        : await readDocument(file, io);
    client = values.url
      ? remoteClient(values.url, values.token ?? io.env.HOST_TOKEN)
      : await localClient(io.env, io);
    const run: SchemaRun = { values, client, io, color };
    if (sub === "export") return await exportSchema(run);
    if (sub === "trash") return await listTrash(run);
    if (sub === "restore") return await restoreFromTrash(run, file!);
    if (sub === "preview") return await previewSchema(run, document);
    return await applySchema(run, document);
  } catch (e) {
    if (e instanceof CliError) {
      await io.err(`error: ${e.message}\n`);
      return 1;
    }
    throw e;
  } finally {
    await client?.close();
  }
}

/** `schema export`: the schema document of every (or the named) custom object type. */
async function exportSchema({ values, client, io }: SchemaRun): Promise<number> {
  const query = new URLSearchParams();
  for (const s of values.slug ?? []) query.append("slug", s);
  const answer = await client.call("GET", `${API}/export/${query.size ? `?${query}` : ""}`);
  if (answer.status !== 200) return fail(io, answer);
  await io.out(`${JSON.stringify(answer.body, null, 2)}\n`);
  return 0;
}

/** `schema trash`: what the trash holds, as a table or JSON. */
async function listTrash({ values, client, io }: SchemaRun): Promise<number> {
  const query = values.slug?.length ? `?slug=${encodeURIComponent(values.slug[0]!)}` : "";
  const answer = await client.call("GET", `${API}/trash/${query}`);
  if (answer.status !== 200) return fail(io, answer);
  if (values.json) await io.out(`${JSON.stringify(answer.body, null, 2)}\n`);
  else await io.out(`${renderTrash(answer.body.results)}\n`);
  return 0;
}

/** `schema restore <id>`: a trashed type or field back with its rows. */
async function restoreFromTrash({ values, client, io }: SchemaRun, file: string): Promise<number> {
  const answer = await client.call("POST", `${API}/trash/${file}/restore/`);
  if (answer.status !== 200) return fail(io, answer);
  const r = answer.body.restored;
  await io.out(
    values.json
      ? `${JSON.stringify(answer.body, null, 2)}\n`
      : `Restored ${r.kind} ${r.kind === "field" ? `${r.custom_object_type.slug}.${r.name}` : r.custom_object_type.slug} with ${r.rows ?? "some"} row(s).\n`,
  );
  return 0;
}

/** `schema preview <file>`: the changes applying the document would make. */
async function previewSchema(
  { values, client, io, color }: SchemaRun,
  document: unknown,
): Promise<number> {
  const answer = await client.call("POST", `${API}/preview/`, { schema: document });
  if (answer.status !== 200) return fail(io, answer);
  await io.out(
    values.json
      ? `${JSON.stringify(answer.body, null, 2)}\n`
      : renderDiffs(answer.body.diffs, color) + refusalLines(answer.body.refusals),
  );
  return 0;
}

/** What an apply of the previewed document would answer instead (the type cap, decision 0205). */
function refusalLines(refusals: Array<{ status: number; detail: string }> | undefined): string {
  return (refusals ?? [])
    .map((r) => `apply would be refused (${r.status}): ${r.detail}\n`)
    .join("");
}

/** `schema apply <file>`: applies the document; destructive changes need --allow-destructive. */
async function applySchema(run: SchemaRun, document: unknown): Promise<number> {
  const { values, client, io, color } = run;
  const request: Record<string, unknown> = {
    schema: document,
    allow_destructive: values["allow-destructive"],
  };
  if (values.purge) request.purge = true;
  if (values.plan) request.plan_id = values.plan;
  const answer = await withProgress(io, "applying", () =>
    client.call("POST", `${API}/apply/`, request),
  );
  if (answer.status === 200) {
    const diffs = answer.body.diffs as TypeDiff[];
    const changed = diffs.some((d) => d.has_changes);
    if (values.json) await io.out(`${JSON.stringify(answer.body, null, 2)}\n`);
    else
      await io.out(
        renderDiffs(diffs, color) +
          (changed ? painter(color)(GREEN, "Applied.") : "No changes.") +
          "\n",
      );
    return 0;
  }
  if (answer.status === 409 && answer.body?.error === "destructive_changes")
    return refuseDestructive(run, document, answer);
  return fail(io, answer);
}

/** Shows what a refused apply would have done and what it would destroy; exit code 2. */
async function refuseDestructive(
  { values, client, io, color }: SchemaRun,
  document: unknown,
  answer: Awaited<ReturnType<ApiClient["call"]>>,
): Promise<number> {
  // Show what would have happened, then refuse.
  const preview = await client.call("POST", `${API}/preview/`, { schema: document });
  if (values.json) await io.out(`${JSON.stringify(answer.body, null, 2)}\n`);
  else if (preview.status === 200) await io.out(renderDiffs(preview.body.diffs, color));
  const slugs = (answer.body.destructive_slugs as string[] | undefined)?.join(", ") ?? "";
  const entries = (answer.body.destructive_changes ?? []) as Array<{
    slug: string;
    field: string | null;
    reason: string;
    rows: number | null; // null: withheld from the caller (decision 0181)
  }>;
  for (const g of entries)
    await io.err(
      `  ${g.slug}${g.field ? `.${g.field}` : ""}: ${g.reason.replace(/_/g, " ")} (${g.rows ?? "some"} row${g.rows === 1 ? "" : "s"})\n`,
    );
  await io.err(
    `refused: destructive changes in ${slugs}; nothing was changed. Re-run with --allow-destructive to apply them (removed data goes to the trash unless --purge).\n`,
  );
  return 2;
}

/** The trash as a table: id, what, rows, until when. */
function renderTrash(
  results: Array<{
    id: number;
    kind: string;
    name: string;
    custom_object_type: { slug: string };
    rows: number | null; // null: withheld from the caller (decision 0183)
    expires: string;
  }>,
): string {
  if (!results.length) return "The trash is empty.";
  return results
    .map(
      (r) =>
        `${String(r.id).padStart(5)}  ${r.kind.padEnd(5)}  ${(r.kind === "field" ? `${r.custom_object_type.slug}.${r.name}` : r.custom_object_type.slug).padEnd(40)}  ${String(r.rows ?? "some").padStart(7)} row(s)  until ${r.expires}`,
    )
    .join("\n");
}

/**
 * On a terminal, a call that takes more than a second shows a progress line on stderr (elapsed
 * time, updated four times a second) and clears it when the answer comes.
 */
export async function withProgress<T>(
  io: CliIo,
  label: string,
  fn: () => Promise<T>,
  afterMs = 1_000,
): Promise<T> {
  if (!io.errIsTTY) return fn();
  const started = Date.now();
  let shown = false;
  const tick = () => {
    shown = true;
    void io.err(`\r${label}… ${((Date.now() - started) / 1000).toFixed(1)} s`);
  };
  let timer: ReturnType<typeof setInterval> | null = null;
  const first = setTimeout(() => {
    tick();
    timer = setInterval(tick, 250);
  }, afterMs);
  try {
    return await fn();
  } finally {
    clearTimeout(first);
    if (timer) clearInterval(timer);
    if (shown)
      await io.err(`\r${label}: done in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  }
}

async function fail(io: CliIo, answer: Answer): Promise<number> {
  await io.err(describeError(answer));
  return 1;
}
