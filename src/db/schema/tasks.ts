/** Change records and background jobs (§7). */
import { integer, sqliteTable, text, index } from "drizzle-orm/sqlite-core";
import { idIndex, pk, nowIso } from "./common";

export const objectChanges = sqliteTable(
  "object_changes",
  {
    id: pk(),
    time: text("time").notNull().$defaultFn(nowIso),
    userId: integer("user_id"),
    userName: text("user_name").notNull().default(""),
    requestId: text("request_id").notNull().default(""),
    action: text("action").notNull(),
    changedObjectTypeId: integer("changed_object_type_id").notNull(),
    changedObjectId: integer("changed_object_id").notNull(),
    objectRepr: text("object_repr").notNull().default(""),
    prechangeData: text("prechange_data", { mode: "json" }).$type<unknown>(),
    postchangeData: text("postchange_data", { mode: "json" }).$type<unknown>(),
  },
  (t) => [
    index("object_changes_object_idx").on(t.changedObjectTypeId, t.changedObjectId),
    index("object_changes_request_idx").on(t.requestId),
    // Retention deletes by age (CHANGELOG_RETENTION_DAYS); time filters use it too.
    index("object_changes_time_idx").on(t.time),
    idIndex("object_changes", t),
  ],
);

export const jobs = sqliteTable(
  "jobs",
  {
    id: pk(),
    name: text("name").notNull(),
    objectTypeId: integer("object_type_id"),
    objectId: integer("object_id"),
    status: text("status").notNull().default("pending"),
    created: text("created").notNull().$defaultFn(nowIso),
    started: text("started"),
    completed: text("completed"),
    userId: integer("user_id"),
    data: text("data", { mode: "json" }).$type<unknown>(),
    error: text("error").notNull().default(""),
    attempts: integer("attempts").notNull().default(0),
  },
  (t) => [
    index("jobs_status_idx").on(t.status),
    index("jobs_completed_idx").on(t.completed),
    idIndex("jobs", t),
  ],
);
