/** `npm run db:migrate`: applies migrations to DATABASE_URL (a local file or a remote libSQL URL). */
import { ConfigError, loadConfig, redactUrl } from "../config";
import { openDatabase } from "./local";
import { runMigrations } from "./migrate";

try {
  const config = loadConfig(process.env, "bun");
  const db = await openDatabase(config.database.url, config.database.authToken);
  await runMigrations(db);
  await db.close();
  console.log(`migrations applied to ${redactUrl(config.database.url)}`);
} catch (e) {
  console.error(e instanceof ConfigError ? e.message : `migration failed: ${(e as Error).message}`);
  process.exit(1);
}
