/**
 * Schema apply writes COTs and fields through the schema operations, not the REST resources, so
 * its change records are written here: the document's types and their fields are loaded before
 * and after the apply (same transaction) and every difference is logged like a REST write.
 */
import { inArray } from "drizzle-orm";
import { customObjectTypeFields, customObjectTypes } from "../../../db/schema";
import { logChanges, type ChangeEntry } from "../../../core/changes/record";
import type { Services } from "../../../core/context";
import type { ApiRecord, Resource, WriteContext } from "../../../core/rest/resource";
import { applySchema, documentSlugs, type ApplyRequest } from "./apply";
import { hiddenAmong, nameHoldersIn, requireAdded, requireCots } from "./access";
import { cotModel, fieldModel, PRELOADED_FIELDS } from "../types/api";

async function snapshot(ctx: WriteContext, slugs: string[]) {
  const cotIds = (
    await ctx.db
      .select({ id: customObjectTypes.id })
      .from(customObjectTypes)
      .where(inArray(customObjectTypes.slug, slugs))
  ).map((r) => r.id);
  const fieldIds = cotIds.length
    ? (
        await ctx.db
          .select({ id: customObjectTypeFields.id })
          .from(customObjectTypeFields)
          .where(inArray(customObjectTypeFields.customObjectTypeId, cotIds))
      ).map((r) => r.id)
    : [];
  // a type's record holds all its fields' records: the fields are loaded first and reused
  const fields = await loadChunked(ctx, fieldModel.resource, fieldIds, 100);
  ctx.scratch.set(PRELOADED_FIELDS, fields);
  try {
    return { cots: await loadChunked(ctx, cotModel.resource, cotIds, 5), fields };
  } finally {
    ctx.scratch.delete(PRELOADED_FIELDS);
  }
}

/**
 * Records by id, `per` at a time: each chunk is read by a statement of the long write, which gives
 * the event loop its turns when due (`db/background.ts`), so its JavaScript stays a short stretch.
 */
async function loadChunked(
  ctx: WriteContext,
  resource: Resource,
  ids: number[],
  per: number,
): Promise<Map<number, ApiRecord>> {
  const out = new Map<number, ApiRecord>();
  for (let i = 0; i < ids.length; i += per) {
    for (const r of await resource.load(ctx, ids.slice(i, i + per))) out.set(r.id as number, r);
  }
  return out;
}

async function logDifferences(
  ctx: WriteContext,
  resource: Resource,
  before: Map<number, ApiRecord>,
  after: Map<number, ApiRecord>,
) {
  // the postchange records are the snapshot just loaded: no load per change, one insert per batch
  const entries: ChangeEntry[] = [];
  for (const [id, record] of after)
    entries.push({
      action: before.has(id) ? "update" : "create",
      id,
      prechange: before.get(id) ?? null,
      postchange: record,
    });
  for (const [id, record] of before)
    if (!after.has(id)) entries.push({ action: "delete", id, prechange: record, postchange: null });
  await logChanges(ctx, resource, entries);
}

/** `applySchema` plus change records for every COT and field it created, changed or removed. */
export async function applySchemaLogged(ctx: WriteContext, request: ApplyRequest) {
  const slugs = documentSlugs(request.document);
  const before = await snapshot(ctx, slugs);
  // types the caller may not view are, to them, types that do not exist (decision 0129)
  const hidden = await hiddenAmong(ctx, before.cots);
  const nameHolders = await nameHoldersIn(ctx, request.document);
  const seen = new Map([...before.cots].filter(([, r]) => !hidden.has(String(r.slug))));
  const removing = new Set((request.document.removed_types ?? []).map((r) => r.slug));
  const isRemoved = ([, r]: [number, { slug?: unknown }]) => removing.has(String(r.slug));
  await requireCots(ctx, "change", new Map([...seen].filter((e) => !isRemoved(e))));
  await requireCots(ctx, "delete", new Map([...seen].filter(isRemoved)));
  const result = await applySchema(ctx, { ...request, hidden, nameHolders });
  const after = await snapshot(ctx, slugs);
  // Permission constraints hold after the change too (the transaction rolls back otherwise).
  await requireCots(ctx, "change", new Map([...after.cots].filter(([id]) => seen.has(id))));
  const added = new Map([...after.cots].filter(([id]) => !before.cots.has(id)));
  await requireAdded(ctx, request.document, added);
  await logDifferences(ctx, cotModel.resource, before.cots, after.cots);
  await logDifferences(ctx, fieldModel.resource, before.fields, after.fields);
  return result;
}

/**
 * Runs an apply (its write transaction) on the database's long-write connection where there is
 * one: off the event loop, so other requests keep being answered meanwhile (decision 0039).
 */
export function asLongWrite<T>(services: Services, fn: () => Promise<T>): Promise<T> {
  return services.db.longWrite(fn);
}
