/** `npm run db:migrate`: applies migrations to DATABASE_URL (a local file or a remote libSQL URL). */
import { ConfigError, loadConfig, redactUrl, type Config } from "../config";
import { describeDatabaseError } from "../db/connection-errors";
import { openDatabase } from "../db/local";
import { runMigrations } from "../migrations";

let config: Config | null = null;
try {
  config = loadConfig(process.env, "bun");
  const db = await openDatabase(config.database.url, config.database.authToken, {
    remoteTimeoutMs: config.database.timeoutMs,
  });
  try {
    await runMigrations(db);
  } finally {
    await db.close();
  }
  console.log(`migrations applied to ${redactUrl(config.database.url)}`);
} catch (e) {
  // One line naming the cause: a bad setting, an unreachable or refusing database, or the SQL that failed.
  const connection = config
    ? describeDatabaseError(e, config.database.url, config.database.authToken)
    : null;
  const message =
    e instanceof ConfigError
      ? e.message
      : connection
        ? `migration failed: ${connection}`
        : `migration failed: ${String((e as Error).message).replace(/\nparams: [\s\S]*$/, "")}`;
  console.error(message.replace(/\s*\n\s*/g, " "));
  process.exit(1);
}
