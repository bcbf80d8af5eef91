/** Webhooks and event rules (§7): what to call, and which changes call it. */
import {
  index,
  integer,
  primaryKey,
  sqliteTable,
  text,
  uniqueIndex,
} from "drizzle-orm/sqlite-core";
import { idIndex, pk, timestamps } from "./common";
import { objectTypes } from "./core";
import { users } from "./users";

/**
 * The user a webhook or event rule acts for: whoever last created or changed it. Deliveries
 * carry only what this user may view (docs/decisions/0066-event-rule-scope.md); null (rows
 * made before owners, or a deleted user): nothing is delivered.
 */
const ownerUser = () => integer("user_id").references(() => users.id, { onDelete: "set null" });

export const webhooks = sqliteTable(
  "webhooks",
  {
    id: pk(),
    name: text("name").notNull(),
    description: text("description").notNull().default(""),
    payloadUrl: text("payload_url").notNull(),
    httpMethod: text("http_method").notNull().default("POST"),
    httpContentType: text("http_content_type").notNull().default("application/json"),
    /** `Name: value` lines. */
    additionalHeaders: text("additional_headers").notNull().default(""),
    /** Empty: the JSON event body; otherwise a `{{ path }}` template (see docs/decisions). */
    bodyTemplate: text("body_template").notNull().default(""),
    /** HMAC-SHA512 key for `X-Hook-Signature`; empty: no signature. Never read back by the API. */
    secret: text("secret").notNull().default(""),
    sslVerification: integer("ssl_verification", { mode: "boolean" }).notNull().default(true),
    userId: ownerUser(),
    /** Seconds to wait for the receiver (1-3600, NetBox 4.7); null: the task queue's default. */
    timeout: integer("timeout"),
    ...timestamps,
  },
  (t) => [uniqueIndex("webhooks_name_uq").on(t.name), idIndex("webhooks", t)],
);

export const eventRules = sqliteTable(
  "event_rules",
  {
    id: pk(),
    name: text("name").notNull(),
    description: text("description").notNull().default(""),
    enabled: integer("enabled", { mode: "boolean" }).notNull().default(true),
    /** `object_created` | `object_updated` | `object_deleted` */
    eventTypes: text("event_types", { mode: "json" }).$type<string[]>().notNull(),
    conditions: text("conditions", { mode: "json" }).$type<unknown>(),
    actionType: text("action_type").notNull().default("webhook"),
    actionObjectTypeId: integer("action_object_type_id")
      .notNull()
      .references(() => objectTypes.id),
    actionObjectId: integer("action_object_id").notNull(),
    userId: ownerUser(),
    ...timestamps,
  },
  (t) => [
    uniqueIndex("event_rules_name_uq").on(t.name),
    index("event_rules_action_idx").on(t.actionObjectTypeId, t.actionObjectId),
    idIndex("event_rules", t),
  ],
);

/** The object types an event rule watches. */
export const eventRuleObjectTypes = sqliteTable(
  "event_rule_object_types",
  {
    eventRuleId: integer("event_rule_id")
      .notNull()
      .references(() => eventRules.id, { onDelete: "cascade" }),
    objectTypeId: integer("object_type_id")
      .notNull()
      .references(() => objectTypes.id, { onDelete: "cascade" }),
  },
  (t) => [
    primaryKey({ columns: [t.eventRuleId, t.objectTypeId] }),
    index("event_rule_object_types_ot_idx").on(t.objectTypeId),
  ],
);

/**
 * One row whose `stamp` changes (a random value) in the same statement as any write to the event
 * rules or their object types, cascades included (triggers, migration 0015): what a write's guard
 * compares to prove its copy of the rules current (decision 0197), however large the rules are.
 */
export const eventRulesStamp = sqliteTable("event_rules_stamp", {
  id: integer("id").primaryKey(),
  stamp: text("stamp").notNull(),
});
