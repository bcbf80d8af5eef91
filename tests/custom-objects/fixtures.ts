/** Fixtures for custom object tests: COTs and fields through the real API. */
import type { TestApp } from "../helpers/app";

export const CO = "/api/plugins/custom-objects";

export async function makeCot(
  t: TestApp,
  name: string,
  slug = name,
  extra: Record<string, unknown> = {},
) {
  const r = await t.json("POST", `${CO}/custom-object-types/`, { body: { name, slug, ...extra } });
  if (r.status !== 201) throw new Error(`COT ${slug}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body as { id: number; slug: string; object_type: { id: number } };
}

export async function addField(t: TestApp, cotId: number, body: Record<string, unknown>) {
  const r = await t.json("POST", `${CO}/custom-object-type-fields/`, {
    body: { custom_object_type: cotId, ...body },
  });
  if (r.status !== 201)
    throw new Error(`field ${String(body.name)}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body as { id: number; name: string; schema_id: number };
}

export async function choiceSet(t: TestApp, name: string, values: string[]) {
  const r = await t.json("POST", "/api/extras/custom-field-choice-sets/", {
    body: { name, extra_choices: values.map((v) => [v, v.toUpperCase()]) },
  });
  if (r.status !== 201) throw new Error(JSON.stringify(r.body));
  return r.body as { id: number };
}

export async function create(t: TestApp, slug: string, body: Record<string, unknown>) {
  const r = await t.json("POST", `${CO}/${slug}/`, { body });
  if (r.status !== 201) throw new Error(`create ${slug}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body as Record<string, any> & { id: number };
}

/** An object field of {@link namedCot}: the type it points at, and what a delete of that does. */
interface ObjectLink {
  to: string;
  onDelete?: "cascade" | "protect" | "set_null";
}

/**
 * A type whose primary field is a text `name`, with an object field per entry of `links` (field
 * name → the type it points at, e.g. `custom_objects.part`, and its `on_delete_behavior`).
 */
export async function namedCot(t: TestApp, slug: string, links: Record<string, ObjectLink> = {}) {
  const cot = await makeCot(t, slug);
  await addField(t, cot.id, { name: "name", type: "text", primary: true });
  for (const [name, link] of Object.entries(links))
    await addField(t, cot.id, {
      name,
      type: "object",
      related_object_type: link.to,
      on_delete_behavior: link.onDelete,
    });
  return cot;
}

/** Two sites (`hq`, `lab`) and a type `slug` with a primary `name` and a `site` link: the kept-search fixtures' shape. */
export async function siteLinkedCot(t: TestApp, slug: string) {
  const sites: number[] = [];
  for (const site of ["hq", "lab"]) {
    const r = await t.json("POST", "/api/dcim/sites/", { body: { name: site, slug: site } });
    sites.push(r.body.id);
  }
  const cot = await makeCot(t, slug);
  await addField(t, cot.id, { name: "name", type: "text", primary: true });
  await addField(t, cot.id, { name: "site", type: "object", related_object_type: "dcim.site" });
  return { sites, cotId: cot.id as number };
}

/**
 * A bulk update's 400 with each failing item's id (NetBox 4.7 names them so) written as its place
 * in the list sent, -1 when it names none: ids differ between databases, places do not.
 */
export const placed = (body: any, sent: Array<{ id: number }>) =>
  Array.isArray(body?.errors)
    ? {
        ...body,
        errors: body.errors.map(({ id, ...rest }: { id?: number }) => ({
          place: sent.findIndex((item) => item.id === id),
          ...rest,
        })),
      }
    : body;
