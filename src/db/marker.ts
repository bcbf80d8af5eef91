/**
 * The data folder remembers its database (issue 30, decision 0079): beside a local database file
 * `<file>.identity` names the database's identity (`identity.ts`). A server never starts on a new,
 * empty database in place of one that vanished (deleted, a volume not mounted), nor on another
 * database put in its place, without the operator saying so by deleting the marker.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";

const markerOf = (path: string) => `${path}.identity`;

function readMarker(path: string): string | null {
  try {
    const parsed = JSON.parse(readFileSync(markerOf(path), "utf8")) as { identity?: unknown };
    return typeof parsed.identity === "string" ? parsed.identity : null;
  } catch {
    return null;
  }
}

/** Before opening: why not to open `path` (it vanished while its folder remembers it), or null. */
export function vanishedDatabase(path: string): string | null {
  const remembered = readMarker(path);
  if (!remembered || existsSync(path)) return null;
  return (
    `the database file ${path} is gone, but this folder held database ${remembered}; ` +
    `restore the file (from a backup), or delete ${markerOf(path)} to start on a new, empty database`
  );
}

/** Whether the folder remembers a database beside `path` (then nothing may be written first). */
export const remembersDatabase = (path: string): boolean => readMarker(path) !== null;

/** After opening: remembers `identity` the first time; names a different database, else null. */
export function checkMarker(path: string, identity: string): string | null {
  const remembered = readMarker(path);
  if (remembered === null) {
    writeFileSync(markerOf(path), `${JSON.stringify({ identity })}\n`);
    return null;
  }
  if (remembered === identity) return null;
  return (
    `the database file ${path} is not the database this folder held (${remembered}; this one is ${identity}); ` +
    `restore the right file, or delete ${markerOf(path)} to use this one`
  );
}
