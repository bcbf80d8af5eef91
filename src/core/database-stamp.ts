/**
 * The app's view of `db/change-stamp.ts`: a stamp of the local database that changes whenever
 * anything commits, or null where there is none (memory, remote). Caches of facts read from the
 * database — page anchors, list counts, custom object type freshness — keep the stamp they were
 * read under and trust themselves only while it is unchanged.
 */
import { walChangeStamp } from "../db/change-stamp";
import type { Services } from "./context";
import { slotKey } from "./slots";

const READER = slotKey<(() => string | null) | null>("database-stamp");

export function databaseStamp(services: Pick<Services, "state" | "config">): string | null {
  return services.state.ensure(READER, () => walChangeStamp(services.config.database.url))?.() ?? null;
}
