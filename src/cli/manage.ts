/**
 * `npm run manage -- <command>`: createsuperuser, create-token, schema (see src/cli/schema.ts).
 * Works on DATABASE_URL (default the local file) and migrates it first, so it is usable on a
 * fresh checkout. Help goes to stdout (exit 0); errors go to stderr (exit 1), so
 * `TOKEN=$(npm run --silent manage -- create-token …)` captures the token and nothing else.
 */
import { parseArgs } from "node:util";
import { ConfigError, loadConfig } from "../config";
import { openDatabase } from "../db/local";
import { runMigrations } from "../migrations";
import { describeDatabaseError } from "../db/connection-errors";
import { createUser, issueToken } from "../core/auth/provisioning";
import { SCHEMA_USAGE, schemaCommand } from "./schema";
import { BACKUP_USAGE, backupCommand } from "./backup";

const CREATESUPERUSER_USAGE = `usage: npm run manage -- createsuperuser --username NAME [--email E] [--password-stdin | --no-input]
Creates a superuser on DATABASE_URL. On a terminal it asks for the password twice (hidden).
options:
  --username NAME     the new user's name (required)
  --email E           e-mail address
  --password-stdin    read the password from standard input (first line), for scripts
  --no-input          never prompt: without --password-stdin the user has no password (tokens only)
  --password PW       the password on the command line (visible in the process list; avoid)
HOST_SUPERUSER_PASSWORD in the environment also sets the password.`;

const CREATE_TOKEN_USAGE = `usage: npm run manage -- create-token --username NAME [--read-only] [--expires ISO] [--description TEXT]
Issues a v2 API token for NAME and prints it (only the token, once; it is stored hashed):
nbt_<key>.<secret>, sent as "Authorization: Bearer nbt_<key>.<secret>".
options:
  --username NAME       the user (required)
  --read-only           a token that cannot write
  --expires ISO         expiry as an ISO 8601 date/time
  --description TEXT    a note shown in /api/users/tokens/`;

const USAGE = `usage: npm run manage -- <command> [options]   (--help after a command for its options)
commands:
  createsuperuser   create a superuser (password prompt on a terminal, or --password-stdin)
  create-token      issue an API token and print it
  schema            export, preview or apply schema documents (schema --help)
  backup FILE       a consistent copy of the live local database (backup --help)
Every command works on DATABASE_URL (default file:data/host.db) and migrates it first.`;

class UsageError extends Error {}

const out = (text: string) => process.stdout.write(text.endsWith("\n") ? text : `${text}\n`);
const err = (text: string) => process.stderr.write(text.endsWith("\n") ? text : `${text}\n`);

const COMMON = { help: { type: "boolean", short: "h", default: false } } as const;
const OPTIONS = {
  createsuperuser: {
    ...COMMON,
    username: { type: "string" },
    email: { type: "string" },
    password: { type: "string" },
    "password-stdin": { type: "boolean", default: false },
    "no-input": { type: "boolean", default: false },
  },
  "create-token": {
    ...COMMON,
    username: { type: "string" },
    "read-only": { type: "boolean", default: false },
    expires: { type: "string" },
    description: { type: "string" },
  },
} as const;
const HELP: Record<keyof typeof OPTIONS, string> = {
  createsuperuser: CREATESUPERUSER_USAGE,
  "create-token": CREATE_TOKEN_USAGE,
};

/** Reads a line from the terminal with echo off (raw mode); Ctrl-C cancels. */
export async function promptHidden(question: string): Promise<string> {
  const stdin = process.stdin;
  stdin.setRawMode(true);
  stdin.setEncoding("utf8");
  stdin.resume();
  // Written after echo is off, so nothing typed in answer to it is ever shown.
  process.stderr.write(question);
  return new Promise((resolve, reject) => {
    let value = "";
    const finish = (error?: Error) => {
      stdin.off("data", onData);
      stdin.setRawMode(false);
      stdin.pause();
      process.stderr.write("\n");
      if (error) reject(error);
      else resolve(value);
    };
    const onData = (chunk: string) => {
      for (const ch of chunk) {
        if (ch === "\r" || ch === "\n" || ch === "\u0004") return finish();
        if (ch === "\u0003") return finish(new UsageError("cancelled"));
        if (ch === "\u007f" || ch === "\b") value = value.slice(0, -1);
        else if (ch >= " ") value += ch;
      }
    };
    stdin.on("data", onData);
  });
}

async function readPasswordFromStdin(): Promise<string> {
  const text = await new Response(Bun.stdin.stream()).text();
  return text.split(/\r?\n/, 1)[0] ?? "";
}

/** The password for createsuperuser, or undefined for a token-only user. */
async function superuserPassword(
  values: Record<string, string | boolean | undefined>,
): Promise<string | undefined> {
  if (values.password !== undefined && values["password-stdin"])
    throw new UsageError("--password and --password-stdin exclude each other");
  if (values["password-stdin"]) {
    const pw = await readPasswordFromStdin();
    if (!pw) throw new UsageError("--password-stdin: standard input held no password");
    return pw;
  }
  const given = (values.password as string | undefined) ?? process.env.HOST_SUPERUSER_PASSWORD;
  if (given !== undefined && given !== "") return given;
  if (values["no-input"] || !process.stdin.isTTY) {
    err(
      "note: no password set (the user signs in with tokens only); use --password-stdin to set one",
    );
    return undefined;
  }
  const first = await promptHidden("Password: ");
  if (!first)
    throw new UsageError("a blank password is not allowed (use --no-input for a token-only user)");
  const second = await promptHidden("Password (again): ");
  if (first !== second) throw new UsageError("the passwords did not match");
  return first;
}

async function withDatabase<T>(
  fn: (db: Awaited<ReturnType<typeof openDatabase>>) => Promise<T>,
): Promise<T> {
  const config = loadConfig(process.env, "bun");
  let db;
  try {
    db = await openDatabase(config.database.url, config.database.authToken, {
      remoteTimeoutMs: config.database.timeoutMs,
    });
    await runMigrations(db);
  } catch (e) {
    await db?.close().catch(() => undefined);
    const cause = describeDatabaseError(e, config.database.url, config.database.authToken);
    if (cause) throw new UsageError(cause);
    throw e;
  }
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined) {
    err(USAGE);
    return 1;
  }
  if (command === "--help" || command === "-h" || command === "help") {
    const topic = rest[0];
    if (topic === "schema") out(SCHEMA_USAGE);
    else if (topic === "backup") out(BACKUP_USAGE);
    else if (topic && topic in HELP) out(HELP[topic as keyof typeof HELP]);
    else out(USAGE);
    return 0;
  }
  if (command === "schema") return schemaCommand(rest);
  if (command === "backup") return backupCommand(rest, { out, err });
  if (!(command in OPTIONS)) {
    err(`Unknown command: ${command}\n${USAGE}`);
    return 1;
  }
  const name = command as keyof typeof OPTIONS;
  let values: Record<string, string | boolean | undefined>;
  try {
    values = parseArgs({ args: rest, options: OPTIONS[name], allowPositionals: false })
      .values as typeof values;
  } catch (e) {
    err(`${(e as Error).message}\n${HELP[name]}`);
    return 1;
  }
  if (values.help) {
    out(HELP[name]);
    return 0;
  }
  const username = values.username as string | undefined;
  if (!username) {
    err(`--username is required\n${HELP[name]}`);
    return 1;
  }
  if (name === "createsuperuser") {
    // Asked before the database is touched, so a mistyped password costs nothing.
    const password = await superuserPassword(values);
    return withDatabase(async (db) => {
      const user = await createUser(db.orm, {
        username,
        password,
        email: values.email as string | undefined,
        isSuperuser: true,
      });
      out(`superuser "${user.username}" created (id ${user.id})`);
      return 0;
    });
  }
  const expires = values.expires as string | undefined;
  if (expires && Number.isNaN(Date.parse(expires)))
    throw new UsageError("--expires must be an ISO 8601 date/time");
  return withDatabase(async (db) => {
    const token = await issueToken(db.orm, {
      username,
      writeEnabled: !values["read-only"],
      expires: expires ? new Date(expires).toISOString() : null,
      description: values.description as string | undefined,
    });
    // A v2 token (`nbt_<key>.<secret>`, sent as `Authorization: Bearer …`), shown this once;
    // only its hash is stored. Nothing else goes to stdout.
    out(token.key);
    return 0;
  });
}

/** One line for any failure: a database failure names its cause and file; no SQL, no values. */
function failureLine(e: unknown): string {
  if (e instanceof ConfigError) return e.message;
  const env = process.env;
  const cause = describeDatabaseError(
    e,
    env.DATABASE_URL ?? "file:data/host.db",
    env.DATABASE_AUTH_TOKEN,
  );
  if (cause) return `error: ${cause}`;
  // Drizzle's "Failed query: <SQL> params: <values>" would print what was bound (a token hash).
  const message = String((e as Error)?.message ?? e);
  return `error: ${message.startsWith("Failed query:") ? "a database statement failed" : message.split("\n")[0]}`;
}

try {
  process.exit(await main(process.argv.slice(2)));
} catch (e) {
  err(failureLine(e));
  process.exit(1);
}
