/**
 * Writes naming many distinct objects of one model (decision 0169): 150 sites, each with its own
 * tenant, and custom objects pointing at every one of them, by object field and by multiobject
 * field, each write twice so the second takes the referenced forms from the cache and proves them
 * in its batch. One scenario every backend runs; answers a summary without ids or times.
 */
import type { Json } from "../helpers/three-backends";
const CO = "/api/plugins/custom-objects";
/** More distinct ids than D1's 100 bound values and 100-deep expressions. */
export const MANY = 150;

const range = (n: number) => Array.from({ length: n }, (_, i) => i);
const pad = (i: number) => String(i).padStart(3, "0");

/** One write's answer as a summary: its status and, per object, what it names (no ids). */
function summary(r: { status: number; body: any }, of: (o: any) => string) {
  const objects = Array.isArray(r.body) ? r.body : r.status < 300 ? [r.body] : [];
  return { status: r.status, error: r.status < 300 ? null : r.body, objects: objects.map(of) };
}

/** Where each object points: its site's and tenant's names, its sites' and devices' names. */
const named = (o: any) =>
  [
    o.name ?? o.display,
    o.site?.name ?? o.site?.display,
    o.tenant?.name,
    (o.sites ?? []).map((s: any) => s.name ?? s.display).join(","),
    (o.devices ?? []).map((d: any) => d.name ?? d.display).join(","),
  ].join("|");

async function must(json: Json, method: string, path: string, body?: unknown) {
  const r = await json(method, path, body);
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

/** Host models: 150 sites, 150 tenants, 150 devices; then each site given its own tenant, twice. */
async function hostWrites(json: Json, p: string) {
  const sites = await must(
    json,
    "POST",
    "/api/dcim/sites/",
    range(MANY).map((i) => ({ name: `${p} site ${pad(i)}`, slug: `${p}-site-${pad(i)}` })),
  );
  const tenants = await must(
    json,
    "POST",
    "/api/tenancy/tenants/",
    range(MANY).map((i) => ({ name: `${p} tenant ${pad(i)}`, slug: `${p}-tenant-${pad(i)}` })),
  );
  const devices = await must(
    json,
    "POST",
    "/api/dcim/devices/",
    range(MANY).map((i) => ({ name: `${p} device ${pad(i)}`, site: sites[0].id })),
  );
  const tenantsOf = (shift: number) =>
    sites.map((s: any, i: number) => ({ id: s.id, tenant: tenants[(i + shift) % MANY].id }));
  const patched = [
    summary(await json("PATCH", "/api/dcim/sites/", tenantsOf(0)), named),
    summary(await json("PATCH", "/api/dcim/sites/", tenantsOf(1)), named),
  ];
  return {
    siteIds: sites.map((s: any) => s.id as number),
    deviceIds: devices.map((d: any) => d.id as number),
    patched,
  };
}

/** Every write of the scenario, in order, as summaries. */
export async function manyIdsScenario(json: Json, p: string) {
  const host = await hostWrites(json, p);
  const slug = `${p}_ref`;
  const cot = await must(json, "POST", `${CO}/custom-object-types/`, { name: slug, slug });
  await must(
    json,
    "POST",
    `${CO}/custom-object-type-fields/`,
    [
      { name: "name", type: "text", primary: true },
      { name: "site", type: "object", related_object_type: "dcim.site" },
      { name: "sites", type: "multiobject", related_object_type: "dcim.site" },
      { name: "devices", type: "multiobject", related_object_type: "dcim.device" },
    ].map((f) => ({ custom_object_type: cot.id, ...f })),
  );
  const path = `${CO}/${slug}/`;
  const pointing = (round: number) =>
    range(MANY).map((i) => ({ name: `${p} ${round}-${pad(i)}`, site: host.siteIds[i] }));
  // the first of each pair reads the forms (and caches them), the second proves the cached ones
  const created = [
    summary(await json("POST", path, pointing(1)), named),
    summary(await json("POST", path, pointing(2)), named),
  ];
  const everyOne = (name: string) => ({ name, sites: host.siteIds, devices: host.deviceIds });
  const many = [
    summary(await json("POST", path, everyOne(`${p} all-1`)), named),
    summary(await json("POST", path, everyOne(`${p} all-2`)), named),
  ];
  // a site renamed after its form was cached: the proof fails and the write reads it anew
  await must(json, "PATCH", `/api/dcim/sites/${host.siteIds[MANY / 2]}/`, { name: `${p} renamed` });
  many.push(summary(await json("POST", path, everyOne(`${p} all-3`)), named));
  const ids = created[1]!.status === 201 ? await listIds(json, path, `${p} 2-`) : [];
  const shifted = ids.map((id, i) => ({ id, site: host.siteIds[(i + 1) % MANY] }));
  const updated = ids.length ? [summary(await json("PATCH", path, shifted), named)] : [];
  const all = await json("GET", `${path}?limit=1000&ordering=name`);
  return {
    patched: host.patched,
    created,
    many,
    updated,
    listed: summary(all, named).objects.length ? all.body.results.map(named) : all.body,
  };
}

/** The ids of the objects whose name starts with `prefix`, by name. */
async function listIds(json: Json, path: string, prefix: string): Promise<number[]> {
  const body = await must(json, "GET", `${path}?limit=1000&ordering=name`);
  return body.results.filter((o: any) => o.name.startsWith(prefix)).map((o: any) => o.id);
}
