/**
 * The strategy choices that depend on how far the database is, in one place (decision 0157):
 * domain code asks these by what they mean, never by the backend's name (`Database.kind`).
 */
import type { Database } from "./client";

/**
 * Whether a read costs a network round trip (libSQL/Turso over HTTP, D1) rather than a call into a
 * local file. Where it does, a token is read with its print (which its guard then compares,
 * in the write batch too), referenced objects' forms are cached and proven by their text in the
 * batch, and a written change record is remembered for its revert (0133). Where it does not, the
 * look-up shared while the change stamp holds and a read cost less than carrying those proofs
 * and copies (decision 0157 measured them on a local file: more CPU and RSS per write).
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
