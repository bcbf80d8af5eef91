/**
 * The filters NetBox 4.7's filtersets give the inventory lists (`tenancy`, `dcim`, `ipam`
 * filtersets and their mixins), by name without lookups: one Host does not model is answered
 * 400 rather than ignored (decision 0203), since ignoring it answers every row.
 */
import type { ListSpec } from "../rest/query";

/** NetBox's `PrimaryModelFilterSet` (change-logged, tags, owners), contacts, saved filters. */
const PRIMARY = [
  "id",
  "created",
  "last_updated",
  "created_by_request",
  "updated_by_request",
  "modified_by_request",
  "tag",
  "tag_id",
  "owner",
  "owner_id",
  "owner_group",
  "owner_group_id",
  "contact",
  "contact_role",
  "contact_group",
  "filter",
  "filter_id",
  "description",
];
/** `TenancyFilterSet`. */
const TENANCY = ["tenant", "tenant_id", "tenant_group", "tenant_group_id"];
/** `ScopedFilterSet` (a prefix's scope). */
const SCOPED = [
  "scope_type",
  "scope_id",
  "region",
  "region_id",
  "site_group",
  "site_group_id",
  "site",
  "site_id",
  "location",
  "location_id",
];

const NETBOX_FILTERS: Record<string, readonly string[]> = {
  "tenancy.tenant": [...PRIMARY, "name", "slug", "group", "group_id"],
  "dcim.site": [
    ...PRIMARY,
    ...TENANCY,
    ...["name", "slug", "status", "facility", "latitude", "longitude", "time_zone"],
    ...["region", "region_id", "group", "group_id", "asn", "asn_id"],
  ],
  "dcim.device": [
    ...PRIMARY,
    ...TENANCY,
    ...["name", "status", "serial", "asset_tag", "site", "site_id", "latitude", "longitude"],
    ...["manufacturer", "manufacturer_id", "device_type", "device_type_id", "model"],
    ...["role", "role_id", "platform", "platform_id", "region", "region_id"],
    ...["site_group", "site_group_id", "location", "location_id", "rack_id", "position", "face"],
    ...["parent_device_id", "parent_bay_id", "cluster_id", "cluster_group", "cluster_group_id"],
    ...["is_full_depth", "airflow", "mac_address", "has_primary_ip", "has_oob_ip", "oob_ip_id"],
    ...["virtual_chassis_id", "virtual_chassis_member", "vc_position", "vc_priority"],
    ...["config_template_id", "local_context_data", "has_virtual_device_context"],
    ...["primary_ip4", "primary_ip4_id", "primary_ip6", "primary_ip6_id"],
    ...["console_ports", "console_server_ports", "power_ports", "power_outlets", "interfaces"],
    ...["pass_through_ports", "module_bays", "device_bays"],
    ...["console_port_count", "console_server_port_count", "power_port_count"],
    ...["power_outlet_count", "interface_count", "front_port_count", "rear_port_count"],
    ...["device_bay_count", "module_bay_count", "inventory_item_count"],
  ],
  "ipam.prefix": [
    ...PRIMARY,
    ...TENANCY,
    ...SCOPED,
    ...["prefix", "family", "within", "within_include", "contains", "depth", "children"],
    ...["mask_length", "vrf", "vrf_id", "present_in_vrf", "present_in_vrf_id", "is_pool"],
    ...["mark_utilized", "vlan_group", "vlan_group_id", "vlan_id", "vlan_vid", "role", "role_id"],
    "status",
  ],
  "ipam.ipaddress": [
    ...PRIMARY,
    ...TENANCY,
    ...["address", "family", "parent", "mask_length", "dns_name", "status", "role"],
    ...["vrf", "vrf_id", "present_in_vrf", "present_in_vrf_id", "assigned_object_type"],
    ...["assigned_object_id", "device", "device_id", "virtual_machine", "virtual_machine_id"],
    ...["interface", "interface_id", "vminterface", "vminterface_id", "fhrpgroup_id"],
    ...["assigned_to_interface", "assigned", "service_id", "nat_inside_id"],
  ],
};

/**
 * `list.refuses` for the model `label`: a parameter that names no filter of the list but is
 * NetBox's (a name above, any lookup of it, a custom field's `cf_<name>`: Host defines none), or
 * a lookup of one of the list's own filters that it does not take (`name__regex`).
 */
export function refuseNetBoxFilters(label: string, list: ListSpec): void {
  const netbox = new Set(NETBOX_FILTERS[label] ?? []);
  list.refuses = (param) => {
    const base = param.split("__", 1)[0]!;
    return netbox.has(base) || base.startsWith("cf_") || Object.hasOwn(list.filters, base);
  };
}
