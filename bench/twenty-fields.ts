/**
 * The 20-field custom object type the benchmarks share (text, longtext, integer, decimal,
 * boolean, date, datetime, url, select, multiselect, json, object → dcim.site and → tenancy.tenant):
 * its field definitions, the API body of row `i`, the same row as stored columns, and the table a
 * bare Hono + Drizzle app would declare for it.
 */
import { integer, real, sqliteTable, text } from "drizzle-orm/sqlite-core";

export const SPEEDS = ["slow", "fast", "ludicrous"];
/** A site code in the description of every 10th row (`apiRow`). */
export const SITE_CODE = "DC-AMS7";
export const TIERS = ["bronze", "silver", "gold", "platinum"];
export const FIELDS: Record<string, unknown>[] = [
  { name: "name", type: "text", primary: true, required: true },
  { name: "serial", type: "text", unique: true },
  { name: "code", type: "text", validation_regex: "^[A-Z]{2}-\\d+$" },
  { name: "description", type: "longtext" },
  { name: "quantity", type: "integer" },
  { name: "ports", type: "integer", validation_minimum: 0, validation_maximum: 1024 },
  { name: "weight", type: "decimal" },
  { name: "price", type: "decimal", validation_minimum: 0 },
  { name: "enabled", type: "boolean" },
  { name: "monitored", type: "boolean", default: false },
  { name: "installed", type: "date" },
  { name: "expires", type: "date" },
  { name: "last_seen", type: "datetime" },
  { name: "homepage", type: "url" },
  { name: "speed", type: "select", choice_set: "speeds" },
  { name: "tier", type: "select", choice_set: "tiers" },
  { name: "flavours", type: "multiselect", choice_set: "speeds" },
  { name: "attrs", type: "json" },
  {
    name: "site",
    type: "object",
    related_object_type: "dcim.site",
    on_delete_behavior: "set_null",
  },
  {
    name: "tenant",
    type: "object",
    related_object_type: "tenancy.tenant",
    on_delete_behavior: "set_null",
  },
];

/** The API body of row `i` (sites/tenants are ids). */
export function apiRow(i: number, tag: string, siteIds: number[], tenantIds: number[]) {
  const d = (n: number) =>
    new Date(Date.UTC(2020, 0, 1) + n * 86_400_000).toISOString().slice(0, 10);
  return {
    name: `item-${tag}${i}`,
    serial: `SN-${tag}${i}`,
    code: `AB-${i}`,
    // every 10th row names a site code: the common term `?q=` benches search for (issue 28)
    description: `Bench item ${i}: a longer text field with a few words in it.${i % 10 === 0 ? ` Site ${SITE_CODE}.` : ""}`,
    quantity: i % 1000,
    ports: i % 49,
    weight: (i % 977) / 7,
    price: (i % 5000) / 4,
    enabled: i % 2 === 0,
    monitored: i % 3 === 0,
    installed: d(i % 1500),
    expires: d(1500 + (i % 700)),
    last_seen: new Date(Date.UTC(2025, 0, 1) + i * 60_000).toISOString(),
    homepage: `https://example.com/items/${i}`,
    speed: SPEEDS[i % 3],
    tier: TIERS[i % 4],
    flavours: i % 5 === 0 ? [] : [SPEEDS[i % 3]!, SPEEDS[(i + 1) % 3]!],
    attrs: { rack: i % 42, row: `r${i % 10}` },
    site: siteIds[i % siteIds.length]!,
    tenant: i % 4 === 0 ? null : tenantIds[i % tenantIds.length]!,
  };
}

/** The same row as stored column values (what the app's encoders produce). */
export function columnsOf(r: ReturnType<typeof apiRow>) {
  return {
    name: r.name,
    serial: r.serial,
    code: r.code,
    description: r.description,
    quantity: r.quantity,
    ports: r.ports,
    weight: r.weight,
    price: r.price,
    enabled: r.enabled ? 1 : 0,
    monitored: r.monitored ? 1 : 0,
    installed: r.installed,
    expires: r.expires,
    last_seen: r.last_seen,
    homepage: r.homepage,
    speed: r.speed,
    tier: r.tier,
    flavours: r.flavours.length ? JSON.stringify(r.flavours) : null,
    attrs: JSON.stringify(r.attrs),
    site_id: r.site,
    tenant_id: r.tenant,
  };
}

/** A hand-written Drizzle table named `name`: what a bare Hono + Drizzle app would declare. */
export function benchTable(name: string) {
  return sqliteTable(name, {
    id: integer("id").primaryKey({ autoIncrement: true }),
    created: text("created").notNull(),
    last_updated: text("last_updated").notNull(),
    name: text("name"),
    serial: text("serial"),
    code: text("code"),
    description: text("description"),
    quantity: integer("quantity"),
    ports: integer("ports"),
    weight: real("weight"),
    price: real("price"),
    enabled: integer("enabled"),
    monitored: integer("monitored"),
    installed: text("installed"),
    expires: text("expires"),
    last_seen: text("last_seen"),
    homepage: text("homepage"),
    speed: text("speed"),
    tier: text("tier"),
    flavours: text("flavours"),
    attrs: text("attrs"),
    site_id: integer("site_id"),
    tenant_id: integer("tenant_id"),
  });
}
