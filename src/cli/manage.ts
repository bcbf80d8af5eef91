/**
 * `npm run manage -- <command>`: createsuperuser, create-token, schema (see src/cli/schema.ts).
 * Works on DATABASE_URL (default the local file) and migrates it first, so it is usable on a
 * fresh checkout.
 */
import { parseArgs } from "node:util";
import { ConfigError, loadConfig } from "../config";
import { openDatabase } from "../db/local";
import { runMigrations } from "../db/migrate";
import { createUser, issueToken } from "../core/auth/provisioning";
import { SCHEMA_USAGE, schemaCommand } from "./schema";

const USAGE = `usage:
  npm run manage -- createsuperuser --username NAME [--password PW] [--email E]
  npm run manage -- create-token --username NAME [--read-only] [--expires ISO] [--description TEXT]
${SCHEMA_USAGE.replace(/^usage:\n/, "")}`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === "schema") return schemaCommand(rest);
  const { values } = parseArgs({
    args: rest,
    options: {
      username: { type: "string" },
      password: { type: "string" },
      email: { type: "string" },
      "read-only": { type: "boolean", default: false },
      expires: { type: "string" },
      description: { type: "string" },
    },
    allowPositionals: true,
  });
  if (command !== "createsuperuser" && command !== "create-token") {
    console.error(USAGE);
    return 1;
  }
  if (!values.username) {
    console.error("--username is required\n" + USAGE);
    return 1;
  }
  const config = loadConfig(process.env, "bun");
  const db = await openDatabase(config.database.url, config.database.authToken);
  try {
    await runMigrations(db);
    if (command === "createsuperuser") {
      const user = await createUser(db.orm, { username: values.username, password: values.password ?? process.env.HOST_SUPERUSER_PASSWORD, email: values.email, isSuperuser: true });
      console.log(`superuser "${user.username}" created (id ${user.id})`);
    } else {
      if (values.expires && Number.isNaN(Date.parse(values.expires))) throw new Error("--expires must be an ISO 8601 date/time");
      const token = await issueToken(db.orm, {
        username: values.username,
        writeEnabled: !values["read-only"],
        expires: values.expires ? new Date(values.expires).toISOString() : null,
        description: values.description,
      });
      // The key is shown this once; only its hash is stored.
      console.log(token.key);
    }
    return 0;
  } finally {
    await db.close();
  }
}

try {
  process.exit(await main(process.argv.slice(2)));
} catch (e) {
  console.error(e instanceof ConfigError ? e.message : `error: ${(e as Error).message}`);
  process.exit(1);
}
