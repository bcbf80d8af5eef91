/** The host models links can point at: tenants, sites, devices, prefixes and IP addresses. */
import { sql } from "drizzle-orm";
import {
  check,
  index,
  integer,
  primaryKey,
  real,
  sqliteTable,
  text,
  uniqueIndex,
} from "drizzle-orm/sqlite-core";
import { idIndex, pk, timestamps } from "./common";
import { owners } from "./users";

/** NetBox 4.5's `owner` on an object: nullable, and an owner in use cannot be deleted. */
const ownerId = () => integer("owner_id").references(() => owners.id, { onDelete: "restrict" });

export const tenants = sqliteTable(
  "tenants",
  {
    id: pk(),
    name: text("name").notNull(),
    slug: text("slug").notNull(),
    description: text("description").notNull().default(""),
    comments: text("comments").notNull().default(""),
    ownerId: ownerId(),
    ...timestamps,
  },
  (t) => [
    uniqueIndex("tenants_name_uq").on(t.name),
    uniqueIndex("tenants_slug_uq").on(t.slug),
    index("tenants_owner_idx").on(t.ownerId),
    idIndex("tenants", t),
  ],
);

export const sites = sqliteTable(
  "sites",
  {
    id: pk(),
    name: text("name").notNull(),
    /** `name` with every digit run padded (NetBox's `_name`): orders "Site 2" before "Site 10". */
    naturalName: text("_name"),
    slug: text("slug").notNull(),
    status: text("status").notNull().default("active"),
    tenantId: integer("tenant_id").references(() => tenants.id, { onDelete: "set null" }),
    facility: text("facility").notNull().default(""),
    timeZone: text("time_zone"),
    // Degrees (NetBox's DecimalFields, 6 places): numbers since migration 0017; text stored
    // before that which is no coordinate is kept in `site_coordinate_text`, below
    latitude: real("latitude"),
    longitude: real("longitude"),
    description: text("description").notNull().default(""),
    comments: text("comments").notNull().default(""),
    ownerId: ownerId(),
    ...timestamps,
  },
  (t) => [
    uniqueIndex("sites_name_uq").on(t.name),
    uniqueIndex("sites_slug_uq").on(t.slug),
    index("sites_natural_name_idx").on(t.naturalName, t.id),
    index("sites_tenant_idx").on(t.tenantId),
    index("sites_status_idx").on(t.status),
    index("sites_owner_idx").on(t.ownerId),
    idIndex("sites", t),
  ],
);

/**
 * Text a site's latitude or longitude held before they became numbers (migration 0017) that is
 * no coordinate: kept, so no stored value is lost, and never answered (no model, field, filter,
 * export or change record reads it; the site reads null there). Its own table, not columns of
 * `sites`, so site rows stay as narrow as their fields and a rebuild of `sites` from this schema
 * cannot drop it (decision 0216). Written only by migrations 0017/0019; gone with its site.
 */
export const siteCoordinateText = sqliteTable(
  "site_coordinate_text",
  {
    siteId: integer("site_id")
      .notNull()
      .references(() => sites.id, { onDelete: "cascade" }),
    field: text("field", { enum: ["latitude", "longitude"] }).notNull(),
    text: text("text").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.siteId, t.field] }),
    check("site_coordinate_text_field", sql`${t.field} IN ('latitude', 'longitude')`),
  ],
);

export const devices = sqliteTable(
  "devices",
  {
    id: pk(),
    name: text("name"),
    /** `name` with every digit run padded (NetBox's `_name`). */
    naturalName: text("_name"),
    siteId: integer("site_id")
      .notNull()
      .references(() => sites.id, { onDelete: "restrict" }),
    tenantId: integer("tenant_id").references(() => tenants.id, { onDelete: "set null" }),
    status: text("status").notNull().default("active"),
    serial: text("serial").notNull().default(""),
    assetTag: text("asset_tag"),
    description: text("description").notNull().default(""),
    comments: text("comments").notNull().default(""),
    ownerId: ownerId(),
    ...timestamps,
  },
  (t) => [
    uniqueIndex("devices_site_name_uq").on(t.siteId, t.name),
    uniqueIndex("devices_asset_tag_uq").on(t.assetTag),
    index("devices_site_idx").on(t.siteId),
    index("devices_natural_name_idx").on(t.naturalName, t.id),
    index("devices_tenant_idx").on(t.tenantId),
    index("devices_owner_idx").on(t.ownerId),
    idIndex("devices", t),
  ],
);

export const prefixes = sqliteTable(
  "prefixes",
  {
    id: pk(),
    prefix: text("prefix").notNull(),
    /**
     * `prefix` as numbers (`src/networks.ts`, kept by every write): 4 or 6 (0: not a prefix),
     * its mask length, and its first and last address as fixed-width hex, so the network
     * filters (`within`, `contains`, …) compare in SQL and in index order.
     */
    netFamily: integer("_family"),
    netMask: integer("_mask"),
    netFirst: text("_first"),
    netLast: text("_last"),
    siteId: integer("site_id").references(() => sites.id, { onDelete: "set null" }),
    tenantId: integer("tenant_id").references(() => tenants.id, { onDelete: "set null" }),
    status: text("status").notNull().default("active"),
    isPool: integer("is_pool", { mode: "boolean" }).notNull().default(false),
    description: text("description").notNull().default(""),
    comments: text("comments").notNull().default(""),
    ownerId: ownerId(),
    ...timestamps,
  },
  (t) => [
    index("prefixes_prefix_idx").on(t.prefix),
    index("prefixes_site_idx").on(t.siteId),
    index("prefixes_tenant_idx").on(t.tenantId),
    index("prefixes_owner_idx").on(t.ownerId),
    index("prefixes_net_idx").on(t.netFamily, t.netFirst),
    idIndex("prefixes", t),
  ],
);

export const ipAddresses = sqliteTable(
  "ip_addresses",
  {
    id: pk(),
    address: text("address").notNull(),
    /** `address` as numbers (as a prefix's): family (0: not an address), mask, host as hex. */
    netFamily: integer("_family"),
    netMask: integer("_mask"),
    netHost: text("_host"),
    tenantId: integer("tenant_id").references(() => tenants.id, { onDelete: "set null" }),
    status: text("status").notNull().default("active"),
    dnsName: text("dns_name").notNull().default(""),
    description: text("description").notNull().default(""),
    comments: text("comments").notNull().default(""),
    ownerId: ownerId(),
    ...timestamps,
  },
  (t) => [
    index("ip_addresses_address_idx").on(t.address),
    index("ip_addresses_tenant_idx").on(t.tenantId),
    index("ip_addresses_owner_idx").on(t.ownerId),
    index("ip_addresses_net_idx").on(t.netFamily, t.netHost),
    idIndex("ip_addresses", t),
  ],
);
