/**
 * The strategy choices that depend on how far the database is, in one place (decision 0157):
 * domain code asks these by what they mean, never by the backend's name (`Database.kind`).
 */
import type { Database } from "./client";

/**
 * Whether a read costs a network round trip (libSQL/Turso over HTTP, D1) rather than a call into a
 * local file. Where it does, work is folded into fewer requests: a staged write's one read and one
 * batch for a schema apply or a trash restore, a cache's guard riding in the write batch, a
 * written change record remembered for its revert, a token read with its print. Where it does
 * not, the local path holds what it measured cheaper: the long write for a schema apply (off the
 * event loop), guards read on the readers, no copies kept of what a read gets for free.
 */
export const readsCostRoundTrip = (db: Pick<Database, "kind">): boolean => db.kind !== "local";

/**
 * Whether a bulk create of a resource that can create many in one transaction goes through that
 * transaction rather than one staged batch: on a local file, where the batch saves no round trip
 * and the transaction's chunked inserts are faster and leaner (decisions 0114, 0157).
 */
export const bulkCreateInTransaction = (db: Pick<Database, "kind">): boolean => db.kind === "local";
