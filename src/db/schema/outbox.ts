/**
 * The transactional outbox (§7, docs/decisions/0037-tasks-outbox.md): one row per job message,
 * written in the same transaction as the change that caused it, handed to the tasks Redis by
 * the relay after commit. The row keeps what Redis may lose (the payload and the idempotency
 * key), so a job Redis dropped can be queued again.
 */
import { index, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { nowIso, pk } from "./common";

export const outbox = sqliteTable(
  "outbox",
  {
    id: pk(),
    created: text("created").notNull().$defaultFn(nowIso),
    /** The `jobs` row this message runs. */
    jobId: integer("job_id").notNull(),
    name: text("name").notNull(),
    payload: text("payload", { mode: "json" }).$type<unknown>(),
    maxAttempts: integer("max_attempts").notNull(),
    userId: integer("user_id"),
    /** Stable per outbox row: every delivery of this job carries it (`Idempotency-Key`). */
    key: text("key").notNull(),
    /** When the relay handed it to Redis; null while it waits (Redis down or frozen). */
    relayed: text("relayed"),
    /** Relay attempts that failed, and the last failure. */
    tries: integer("tries").notNull().default(0),
    error: text("error").notNull().default(""),
  },
  (t) => [index("outbox_relayed_idx").on(t.relayed), index("outbox_job_idx").on(t.jobId)],
);
