/**
 * The round-trip sweeps' seed (issue 28 item 2): a few objects of every model, tagged and related
 * to one another, and a plain custom object type (`widget`); the GET and the write sweep share it.
 */
import type { TestApp } from "../helpers/app";
import { addField, choiceSet, create, makeCot } from "../custom-objects/fixtures";

/** The seeded objects' ids per model key (`site`, `device`, `widget`, ...), in creation order. */
export type SeedIds = Record<string, number[]>;

/** POSTs `body` to `path`, keeping the new id under `key`. */
async function made(
  t: TestApp,
  ids: SeedIds,
  key: string,
  path: string,
  body: Record<string, unknown>,
): Promise<number> {
  const r = await t.json("POST", path, { body });
  if (r.status !== 201) throw new Error(`${path}: ${r.status} ${JSON.stringify(r.body)}`);
  (ids[key] ??= []).push(r.body.id);
  return r.body.id;
}

/**
 * A few objects of every model, tagged and related to one another, through `t` as its superuser;
 * `seedTrash` runs after the custom objects, before the event rule.
 */
export async function seedSweep(
  t: TestApp,
  ids: SeedIds,
  seedTrash: () => Promise<void> = async () => {},
): Promise<void> {
  const tags = [];
  for (const n of ["alpha", "beta", "gamma"])
    tags.push(await made(t, ids, "tag", "/api/extras/tags/", { name: `Tag ${n}`, slug: n }));
  const og = await made(t, ids, "ownergroup", "/api/users/owner-groups/", { name: "Operators" });
  const ug = await made(t, ids, "group", "/api/users/groups/", { name: "netops" });
  const hiddenGroup = await made(t, ids, "group", "/api/users/groups/", { name: "auditors" });
  const user = await made(t, ids, "user", "/api/users/users/", {
    username: "jane",
    password: "a-long-password-1",
    groups: [ug, hiddenGroup],
  });
  const owner = await made(t, ids, "owner", "/api/users/owners/", {
    name: "NOC",
    group: og,
    users: [user],
    user_groups: [ug],
  });
  for (const n of [1, 2, 3])
    await made(t, ids, "tenant", "/api/tenancy/tenants/", {
      name: `Tenant ${n}`,
      slug: `tenant-${n}`,
      tags: [tags[n % 3]],
    });
  const [t1, t2] = ids.tenant!;
  for (const n of [1, 2, 3])
    await made(t, ids, "site", "/api/dcim/sites/", {
      name: `Site ${n}`,
      slug: `site-${n}`,
      status: n === 3 ? "planned" : "active",
      tenant: [t1, ids.tenant![2], t2][n - 1],
      owner,
      tags: tags.slice(0, n),
    });
  const [s1, s2, s3] = ids.site!;
  for (const n of [1, 2, 3, 4])
    await made(t, ids, "device", "/api/dcim/devices/", {
      name: n === 4 ? "core-4" : `dev-${n}`,
      site: [s1, s2, s1, s3][n - 1],
      tenant: t1,
      status: "active",
      serial: `SN${n}`,
      tags: [tags[0]],
    });
  for (const n of [1, 2])
    await made(t, ids, "prefix", "/api/ipam/prefixes/", {
      prefix: `10.${n}.0.0/16`,
      site: n === 1 ? s1 : s3,
      tenant: t1,
      tags: [tags[1]],
    });
  for (const n of [1, 2, 3])
    await made(t, ids, "ipaddress", "/api/ipam/ip-addresses/", {
      address: `10.1.0.${n}/24`,
      tenant: t2,
      dns_name: `host${n}.example.com`,
      tags: [tags[2]],
    });
  const set = await choiceSet(t, "Colours", ["red", "green"]);
  (ids.customfieldchoiceset ??= []).push(set.id);
  const hook = await made(t, ids, "webhook", "/api/extras/webhooks/", {
    name: "hook",
    payload_url: "https://example.com/in",
  });
  await seedCustomObjects(t, ids, set.id);
  await seedTrash();
  await made(t, ids, "eventrule", "/api/extras/event-rules/", {
    name: "rule",
    object_types: ["dcim.site", "custom_objects.widget"],
    event_types: ["object_created"],
    action_type: "webhook",
    action_object_type: "extras.webhook",
    action_object_id: hook,
  });
}

/** A plain custom object type (text, integer, select, a site and devices), and a few objects. */
async function seedCustomObjects(t: TestApp, ids: SeedIds, setId: number) {
  const cot = await makeCot(t, "widget");
  (ids.customobjecttype ??= []).push(cot.id);
  const fields = [
    { name: "title", type: "text", primary: true },
    { name: "size", type: "integer" },
    { name: "colour", type: "select", choice_set: setId },
    { name: "site", type: "object", related_object_type: "dcim.site" },
    { name: "devices", type: "multiobject", related_object_type: "dcim.device" },
  ];
  for (const f of fields)
    (ids.customobjecttypefield ??= []).push((await addField(t, cot.id, f)).id);
  const [s1, s2, s3] = ids.site!;
  const [d1, d2, , d4] = ids.device!;
  for (const n of [1, 2, 3]) {
    const o = await create(t, "widget", {
      title: `widget ${n}`,
      size: n,
      colour: n === 1 ? "red" : "green",
      site: [s1, s3, s2][n - 1],
      devices: n === 1 ? [d1, d4] : [d2],
      tags: ids.tag!.slice(0, n),
    });
    (ids.widget ??= []).push(o.id);
  }
}
