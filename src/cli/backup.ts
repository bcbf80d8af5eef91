/**
 * `npm run manage -- backup FILE`: a consistent copy of the local database while the server
 * runs (`VACUUM INTO` reads one snapshot; writers go on), checked before it is reported.
 */
import { createClient } from "@libsql/client";
import { existsSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { parseArgs } from "node:util";
import { loadConfig } from "../config";

export const BACKUP_USAGE = `usage: npm run manage -- backup FILE
Writes a consistent copy of the local database (DATABASE_URL, a file: URL) to FILE while the
server keeps running, then checks the copy. FILE must not exist. To restore: stop the server,
copy FILE over the database file, delete the database's -wal and -shm files, start the server.
A remote database (Turso, libsql:, https:) is backed up with its provider's tools.`;

/** The database file of a `file:` URL, or null for any other kind of database. */
function localPath(url: string): string | null {
  if (!url.startsWith("file:")) return null;
  const path = url.slice("file:".length).split("?")[0] ?? "";
  return path && path !== ":memory:" ? resolve(path) : null;
}

/** Runs the command; returns the exit code, or throws an Error whose message is the one line to print. */
export async function backupCommand(
  argv: string[],
  io: { out: (s: string) => void; err: (s: string) => void },
): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { help: { type: "boolean", short: "h", default: false } },
    allowPositionals: true,
  });
  if (values.help) {
    io.out(BACKUP_USAGE);
    return 0;
  }
  if (positionals.length !== 1) {
    io.err(BACKUP_USAGE);
    return 1;
  }
  const target = resolve(positionals[0]!);
  const config = loadConfig(process.env, "bun");
  const source = localPath(config.database.url);
  if (!source)
    throw new Error("backup: DATABASE_URL is not a local file; use the provider's tools");
  if (!existsSync(source)) throw new Error(`backup: no database at ${source}`);
  if (existsSync(target)) throw new Error(`backup: ${target} exists; choose a new file`);
  if (!existsSync(dirname(target))) throw new Error(`backup: no directory ${dirname(target)}`);
  const db = createClient({ url: `file:${source}` });
  try {
    await db.execute({ sql: "VACUUM INTO ?", args: [target] });
  } catch (e) {
    throw new Error(`backup: could not copy ${source}: ${(e as Error).message.split("\n")[0]}`);
  } finally {
    db.close();
  }
  const copy = createClient({ url: `file:${target}` });
  try {
    const check = await copy.execute("PRAGMA integrity_check");
    const verdict = String(check.rows[0]?.[0] ?? "");
    if (verdict !== "ok")
      throw new Error(`backup: the copy at ${target} fails its check: ${verdict}`);
  } finally {
    copy.close();
  }
  io.out(`backup of ${source} written to ${target} (${statSync(target).size} bytes, checked)`);
  return 0;
}
