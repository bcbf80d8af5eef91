/**
 * The database's change stamp (`db/change-stamp.ts`, provided by the local Bun driver): it
 * changes whenever anything commits, and is null where there is none (memory, remote, Workers).
 * Caches of facts read from the database — page anchors, list counts, custom object type
 * freshness — keep the stamp they were read under and trust themselves only while it is unchanged.
 */
import type { Services } from "./context";

export function databaseStamp(services: Pick<Services, "db">): string | null {
  return services.db.changeStamp();
}
