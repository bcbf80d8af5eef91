/** The host inventory models of §4: tenants, sites, devices, prefixes and IP addresses. */
import { devices, ipAddresses, prefixes, sites, tenants } from "../../db/schema";
import { defineModel, type DefinedModel } from "./define";
import { ownerFilters } from "../auth/owners";
import { addressNumbers, inetText, networkText, parseCidr, prefixNumbers } from "../../networks";
import {
  addressExactFilter,
  addressNetworkFilters,
  prefixExactFilter,
  prefixNetworkFilters,
} from "../rest/network-filters";

// NetBox 4.7's status values and labels (dcim/choices.py, ipam/choices.py); each model takes its
// own, in NetBox's order, so clients that validate against NetBox (Terraform) agree with Host.
const STATUS = [
  ["planned", "Planned"],
  ["staging", "Staging"],
  ["staged", "Staged"],
  ["active", "Active"],
  ["failed", "Failed"],
  ["inventory", "Inventory"],
  ["decommissioning", "Decommissioning"],
  ["retired", "Retired"],
  ["offline", "Offline"],
  ["reserved", "Reserved"],
  ["deprecated", "Deprecated"],
  ["container", "Container"],
  ["dhcp", "DHCP"],
  ["slaac", "SLAAC"],
] as const;
const pick = (...values: string[]) => values.map((v) => STATUS.find(([x]) => x === v)!);

// IPv6 may end in a dotted IPv4 tail, as Host answers IPv4-mapped and -compatible networks
const PREFIX_RE =
  /^(\d{1,3}(\.\d{1,3}){3}\/\d{1,2}|[0-9a-fA-F:]*:(\d{1,3}(\.\d{1,3}){3}|[0-9a-fA-F]*)\/\d{1,3})$/;
// the pattern and the parser: octets past 255 and masks past the width are not prefixes either
const checkPrefix = (v: unknown) => {
  const net = typeof v === "string" && PREFIX_RE.test(v) ? parseCidr(v) : null;
  if (!net) return "Enter a valid IPv4 or IPv6 prefix in CIDR notation.";
  // NetBox's `Prefix.clean()`: the whole address space is no prefix to allocate from
  return net.mask === 0 ? "Cannot create prefix with /0 mask." : null;
};

/**
 * When a write sets `source` (a table key): stores it as NetBox spells it, and the numbers of
 * that text beside it.
 */
const storedWithNumbers =
  (
    source: string,
    spelled: (text: unknown) => unknown,
    numbers: (text: unknown) => Record<string, unknown>,
  ) =>
  (values: Record<string, unknown>) => {
    if (!Object.hasOwn(values, source)) return;
    values[source] = spelled(values[source]);
    Object.assign(values, numbers(values[source]));
  };

export const tenantModel = defineModel({
  appLabel: "tenancy",
  model: "tenant",
  verboseName: "tenant",
  path: "tenancy/tenants",
  table: tenants,
  tags: true,
  customFields: true,
  defaultOrdering: ["name"],
  display: (r) => r.name,
  fields: [
    {
      name: "name",
      type: "string",
      column: tenants.name,
      required: true,
      maxLength: 100,
      search: true,
      brief: true,
    },
    {
      name: "slug",
      type: "slug",
      column: tenants.slug,
      required: true,
      maxLength: 100,
      search: true,
      brief: true,
    },
    {
      name: "description",
      type: "string",
      column: tenants.description,
      maxLength: 200,
      search: true,
      brief: true,
    },
    { name: "owner", type: "fk", column: tenants.ownerId, related: "users.owner", nullable: true },
    { name: "comments", type: "text", column: tenants.comments },
  ],
});

export const siteModel = defineModel({
  appLabel: "dcim",
  model: "site",
  verboseName: "site",
  path: "dcim/sites",
  table: sites,
  tags: true,
  customFields: true,
  defaultOrdering: ["name"],
  naturalOrdering: { field: "name", column: sites.naturalName },
  display: (r) => r.name,
  fields: [
    {
      name: "name",
      type: "string",
      column: sites.name,
      required: true,
      maxLength: 100,
      search: true,
      brief: true,
    },
    {
      name: "slug",
      type: "slug",
      column: sites.slug,
      required: true,
      maxLength: 100,
      search: true,
      brief: true,
    },
    {
      name: "status",
      type: "choice",
      column: sites.status,
      choices: pick("planned", "staging", "active", "decommissioning", "retired"),
    },
    {
      name: "tenant",
      type: "fk",
      column: sites.tenantId,
      related: "tenancy.tenant",
      relatedSlug: { table: tenants, slug: tenants.slug },
      nullable: true,
    },
    { name: "facility", type: "string", column: sites.facility, maxLength: 50, search: true },
    { name: "time_zone", type: "string", column: sites.timeZone, maxLength: 63, nullable: true },
    // NetBox's DecimalFields (max_digits 8 and 9, 6 places), held to the globe's range
    {
      name: "latitude",
      type: "decimal",
      column: sites.latitude,
      nullable: true,
      decimal: { maxDigits: 8, places: 6, min: -90, max: 90 },
    },
    {
      name: "longitude",
      type: "decimal",
      column: sites.longitude,
      nullable: true,
      decimal: { maxDigits: 9, places: 6, min: -180, max: 180 },
    },
    {
      name: "description",
      type: "string",
      column: sites.description,
      maxLength: 200,
      search: true,
      brief: true,
    },
    { name: "owner", type: "fk", column: sites.ownerId, related: "users.owner", nullable: true },
    { name: "comments", type: "text", column: sites.comments },
  ],
});

export const deviceModel = defineModel({
  appLabel: "dcim",
  model: "device",
  verboseName: "device",
  path: "dcim/devices",
  table: devices,
  tags: true,
  customFields: true,
  defaultOrdering: ["name", "id"],
  naturalOrdering: { field: "name", column: devices.naturalName },
  display: (r) => r.name ?? `Device ${r.id}`,
  fields: [
    {
      name: "name",
      type: "string",
      column: devices.name,
      maxLength: 64,
      nullable: true,
      search: true,
      brief: true,
    },
    {
      name: "site",
      type: "fk",
      column: devices.siteId,
      related: "dcim.site",
      relatedSlug: { table: sites, slug: sites.slug },
      required: true,
    },
    {
      name: "tenant",
      type: "fk",
      column: devices.tenantId,
      related: "tenancy.tenant",
      relatedSlug: { table: tenants, slug: tenants.slug },
      nullable: true,
    },
    {
      name: "status",
      type: "choice",
      column: devices.status,
      choices: pick(
        "offline",
        "active",
        "planned",
        "staged",
        "failed",
        "inventory",
        "decommissioning",
      ),
    },
    { name: "serial", type: "string", column: devices.serial, maxLength: 50, search: true },
    {
      name: "asset_tag",
      type: "string",
      column: devices.assetTag,
      maxLength: 50,
      nullable: true,
      search: true,
    },
    {
      name: "description",
      type: "string",
      column: devices.description,
      maxLength: 200,
      search: true,
      brief: true,
    },
    { name: "owner", type: "fk", column: devices.ownerId, related: "users.owner", nullable: true },
    { name: "comments", type: "text", column: devices.comments },
  ],
});

export const prefixModel = defineModel({
  appLabel: "ipam",
  model: "prefix",
  verboseName: "prefix",
  path: "ipam/prefixes",
  table: prefixes,
  tags: true,
  customFields: true,
  defaultOrdering: ["prefix", "id"],
  display: (r) => r.prefix,
  // NetBox keeps a prefix's network (`Prefix.save()`: host bits cleared), so Host stores that
  // text, and the numbers beside it are the same network's
  derive: storedWithNumbers("prefix", networkText, prefixNumbers),
  fields: [
    {
      name: "prefix",
      type: "string",
      column: prefixes.prefix,
      required: true,
      maxLength: 49,
      search: true,
      brief: true,
      check: checkPrefix,
    },
    {
      name: "site",
      type: "fk",
      column: prefixes.siteId,
      related: "dcim.site",
      relatedSlug: { table: sites, slug: sites.slug },
      nullable: true,
    },
    {
      name: "tenant",
      type: "fk",
      column: prefixes.tenantId,
      related: "tenancy.tenant",
      relatedSlug: { table: tenants, slug: tenants.slug },
      nullable: true,
    },
    {
      name: "status",
      type: "choice",
      column: prefixes.status,
      choices: pick("container", "active", "reserved", "deprecated"),
    },
    { name: "is_pool", type: "boolean", column: prefixes.isPool },
    {
      name: "description",
      type: "string",
      column: prefixes.description,
      maxLength: 200,
      search: true,
      brief: true,
    },
    { name: "owner", type: "fk", column: prefixes.ownerId, related: "users.owner", nullable: true },
    { name: "comments", type: "text", column: prefixes.comments },
  ],
});

// IPv6 may end in a dotted IPv4 tail (`::ffff:10.0.0.1/64`), as NetBox's inet field takes it
const ADDRESS_RE =
  /^(\d{1,3}(\.\d{1,3}){3}|[0-9a-fA-F:]*:(\d{1,3}(\.\d{1,3}){3}|[0-9a-fA-F]*))\/\d{1,3}$/;
export const ipAddressModel = defineModel({
  appLabel: "ipam",
  model: "ipaddress",
  verboseName: "IP address",
  path: "ipam/ip-addresses",
  table: ipAddresses,
  tags: true,
  customFields: true,
  defaultOrdering: ["address", "id"],
  display: (r) => r.address,
  // NetBox's inet field answers an address in PostgreSQL's spelling, whatever was written
  derive: storedWithNumbers("address", inetText, addressNumbers),
  fields: [
    {
      name: "address",
      type: "string",
      column: ipAddresses.address,
      required: true,
      maxLength: 49,
      search: true,
      brief: true,
      check: (v) =>
        typeof v === "string" && ADDRESS_RE.test(v) && parseCidr(v)
          ? null
          : "Enter a valid IPv4 or IPv6 address with a mask.",
    },
    {
      name: "tenant",
      type: "fk",
      column: ipAddresses.tenantId,
      related: "tenancy.tenant",
      relatedSlug: { table: tenants, slug: tenants.slug },
      nullable: true,
    },
    {
      name: "status",
      type: "choice",
      column: ipAddresses.status,
      choices: pick("active", "reserved", "deprecated", "dhcp", "slaac"),
    },
    { name: "dns_name", type: "string", column: ipAddresses.dnsName, maxLength: 255, search: true },
    {
      name: "description",
      type: "string",
      column: ipAddresses.description,
      maxLength: 200,
      search: true,
      brief: true,
    },
    {
      name: "owner",
      type: "fk",
      column: ipAddresses.ownerId,
      related: "users.owner",
      nullable: true,
    },
    { name: "comments", type: "text", column: ipAddresses.comments },
  ],
});

/** NetBox 4.5's owner filters beside `owner_id` (the foreign key's own filter). */
for (const m of [
  tenantModel,
  siteModel,
  deviceModel,
  prefixModel,
  ipAddressModel,
] as DefinedModel[]) {
  Object.assign(m.resource.list.filters, ownerFilters((m.spec.table as any).ownerId));
}

// NetBox's network filters (decisions 0203, 0211), over the numbers `derive` keeps.
const prefixColumns = {
  family: prefixes.netFamily,
  mask: prefixes.netMask,
  first: prefixes.netFirst,
  last: prefixes.netLast,
};
const prefixFilters = prefixModel.resource.list.filters;
Object.assign(prefixFilters, prefixNetworkFilters(prefixColumns), {
  prefix: prefixExactFilter(prefixFilters.prefix!, prefixColumns),
});
const addressColumns = {
  family: ipAddresses.netFamily,
  mask: ipAddresses.netMask,
  host: ipAddresses.netHost,
};
const addressFilters = ipAddressModel.resource.list.filters;
Object.assign(addressFilters, addressNetworkFilters(addressColumns), {
  address: addressExactFilter(addressFilters.address!, addressColumns),
});
