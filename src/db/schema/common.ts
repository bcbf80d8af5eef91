/** Column helpers shared by the static tables: ISO-8601 timestamps and the narrow id index of §2. */
import { index, integer, text, type SQLiteColumnBuilderBase } from "drizzle-orm/sqlite-core";

export const nowIso = () => new Date().toISOString();

// Module-level on purpose: a process-wide clock for edit stamps that never repeats a millisecond,
// so two edits of one row in the same millisecond still get different `last_updated` (ETags).
let lastEdit = 0;

/** `last_updated` for an edit: now as ISO 8601, strictly later than the previous edit stamp. */
export const editStamp = () => {
  lastEdit = Math.max(Date.now(), lastEdit + 1);
  return new Date(lastEdit).toISOString();
};

export const timestamps = {
  created: text("created").notNull().$defaultFn(nowIso),
  lastUpdated: text("last_updated").notNull().$defaultFn(nowIso).$onUpdateFn(nowIso),
};

export const pk = () => integer("id").primaryKey({ autoIncrement: true });

/** A narrow index on `id` so `count(*)` and deep OFFSET pages read the index, not the wide rows. */
export const idIndex = (table: string, t: { id: SQLiteColumnBuilderBase | any }) =>
  index(`${table}_id_idx`).on(t.id);
