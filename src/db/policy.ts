/**
 * The strategy choices that depend on how far the database is, in one place (decision 0157):
 * domain code asks these by what they mean, never by the backend's name (`Database.kind`).
 */
import type { Database } from "./client";

/**
 * Whether a read costs a network round trip (libSQL/Turso over HTTP, D1) rather than a call into a
 * local file. Where it does, the caches a write takes on trust are proven inside its batch (a
 * token by its print, a referenced object's form by its text) and a written change record is
 * remembered for its revert; where it does not, reading is cheaper than carrying those proofs and
 * copies (decision 0157 measured them on a local file).
 */
export const readsCostRoundTrip = (db: Pick<Database, "kind">): boolean => db.kind !== "local";

/**
 * Whether a schema apply or a trash restore is first tried as a staged write (one read phase, one
 * batch; decisions 0111, 0120). On a local file it keeps the long write instead: its transaction
 * on a connection of its own that gives the event loop turns (0039), where one batch on the main
 * connection would hold every request for as long as SQLite works on it (an index over 100k rows).
 */
export const stagesSchemaWrites = (db: Pick<Database, "kind">): boolean => db.kind !== "local";

/**
 * Whether a bulk create of a resource that can create many in one transaction goes through that
 * transaction rather than one staged batch: on a local file, where the batch saves no round trip
 * and the transaction's chunked inserts are faster and leaner (decisions 0114, 0157).
 */
export const bulkCreateInTransaction = (db: Pick<Database, "kind">): boolean => db.kind === "local";
