/**
 * The filters NetBox 4.7's filtersets give the lists Host has (`tenancy`, `dcim`, `ipam`,
 * `extras`, `users`, `core` filtersets and their mixins), by name without lookups: one Host does
 * not model is answered 400 rather than ignored (decision 0203), since ignoring it answers every
 * row.
 */
import type { ListSpec } from "../rest/query";

/** Every filterset's: the id and saved filters (`BaseFilterSet`). */
const BASE = ["id", "filter", "filter_id"];
/** `ChangeLoggedModelFilterSet`. */
const CHANGE_LOGGED = [
  ...BASE,
  ...["created", "last_updated", "created_by_request", "updated_by_request"],
  "modified_by_request",
];
/** `OwnerFilterMixin`. */
const OWNED = ["owner", "owner_id", "owner_group", "owner_group_id"];
/** `NetBoxModelFilterSet` with owners: change-logged, tags. */
const NETBOX_MODEL = [...CHANGE_LOGGED, ...OWNED, "tag", "tag_id"];
/** `PrimaryModelFilterSet` with contacts (`ContactModelFilterSet`) and `description`. */
const PRIMARY = [...NETBOX_MODEL, "contact", "contact_role", "contact_group", "description"];
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
  "extras.tag": [
    ...CHANGE_LOGGED,
    ...OWNED,
    ...["name", "slug", "color", "weight", "description", "object_types", "content_type"],
    ...["content_type_id", "for_object_type_id"],
  ],
  "extras.customfieldchoiceset": [
    ...CHANGE_LOGGED,
    ...OWNED,
    ...["name", "description", "base_choices", "order_alphabetically", "choice", "choice_colors"],
  ],
  "extras.webhook": [
    ...NETBOX_MODEL,
    ...["name", "description", "payload_url", "http_method", "http_content_type", "secret"],
    ...["ssl_verification", "ca_file_path"],
  ],
  "extras.eventrule": [
    ...NETBOX_MODEL,
    ...["name", "description", "enabled", "action_type", "object_type", "object_type_id"],
    ...["event_type", "action_object_type", "action_object_id"],
  ],
  "users.user": [
    ...BASE,
    ...["username", "first_name", "last_name", "email", "date_joined", "last_login"],
    ...["is_active", "is_superuser", "group", "group_id", "owner", "owner_id", "permission_id"],
    "notification_group_id",
  ],
  "users.group": [
    ...BASE,
    ...["name", "description", "user_id", "owner", "owner_id", "permission_id"],
    "notification_group_id",
  ],
  "users.objectpermission": [
    ...BASE,
    ...["name", "description", "enabled", "object_types", "object_type", "object_type_id"],
    ...["can_view", "can_add", "can_change", "can_delete", "user", "user_id", "group", "group_id"],
  ],
  "users.token": [
    ...BASE,
    ...["version", "key", "pepper_id", "enabled", "write_enabled", "description", "created"],
    ...["expires", "last_used", "user", "user_id"],
  ],
  "users.owner": [
    ...BASE,
    ...["name", "description", "group", "group_id", "user_group", "user_group_id", "user"],
    "user_id",
  ],
  "users.ownergroup": [...BASE, "name", "description"],
  "core.objecttype": [...BASE, "app_label", "model", "public", "features"],
  "core.objectchange": [
    ...BASE,
    ...["time", "user", "user_id", "user_name", "request_id", "action", "object_repr"],
    ...["changed_object_type", "changed_object_type_id", "changed_object_id"],
    ...["related_object_type", "related_object_id"],
  ],
  "core.job": [
    ...BASE,
    ...["object_type", "object_type_id", "object_id", "name", "interval", "status", "user"],
    ...["user_id", "job_id", "queue_name", "created", "scheduled", "started", "completed"],
    "notifications",
  ],
};

/** Lists NetBox gives custom fields (`NetBoxModelFilterSet`): `cf_<name>` filters them. */
const CUSTOM_FIELDS = new Set([
  "tenancy.tenant",
  "dcim.site",
  "dcim.device",
  "ipam.prefix",
  "ipam.ipaddress",
  "extras.webhook",
  "extras.eventrule",
]);

/**
 * Sets `list.refuses` for the model `label`, when NetBox has that list: a parameter that names no
 * filter of the list but is NetBox's (a name above, any lookup of it, a custom field's
 * `cf_<name>` where NetBox has them: Host defines none), or a lookup of one of the list's own
 * filters that it does not take (`name__regex`).
 */
export function refuseNetBoxFilters(label: string, list: ListSpec): void {
  const names = NETBOX_FILTERS[label];
  if (!names) return;
  const netbox = new Set(names);
  const customFields = CUSTOM_FIELDS.has(label);
  list.refuses = (param) => {
    const base = param.split("__", 1)[0]!;
    return (
      netbox.has(base) ||
      (customFields && base.startsWith("cf_")) ||
      Object.hasOwn(list.filters, base)
    );
  };
}
