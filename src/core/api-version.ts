/**
 * The NetBox release whose REST API Host follows: `API-Version` on every `/api/` answer (pynetbox's
 * `nb.version`, which switches 7.8 to cursor pagination from 4.6) and `netbox-version` in
 * `/api/status/` (Terraform's provider checks it at start-up).
 */
export const NETBOX_API_VERSION = "4.7";
export const NETBOX_VERSION = `${NETBOX_API_VERSION}.0`;
