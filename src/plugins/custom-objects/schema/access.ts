/**
 * Permission constraints on custom object types, for the schema routes: which types a caller
 * may see in previews, exports and the trash, and whether an apply stays inside what they may
 * add and change (checked before and after, in the apply's transaction).
 */
import { ApiError, forbidden } from "../../../core/errors";
import { admitted, restrictionFor, restrictWhere } from "../../../core/auth/restrict";
import { APP_LABEL } from "../constants";
import type { Action } from "../../../core/auth/permissions";
import type { AuthState } from "../../../core/context";
import type { ReadContext, WriteContext } from "../../../core/rest/resource";
import { and, inArray, sql, type SQL } from "drizzle-orm";
import type { Executor } from "../../../db/client";
import { customObjectTypes } from "../../../db/schema";
import { cotModel, fieldModel } from "../types/api";
import type { SchemaDocument } from "./document";

/**
 * For a caller: whether the row counts of a type are withheld from them, their view of its
 * objects being constrained or none (decision 0181). Judged on the permissions alone, no read.
 */
export const countsWithheld =
  (auth: AuthState, loginRequired: boolean) =>
  (slug: string): boolean =>
    restrictionFor(auth, loginRequired, "view", APP_LABEL, slug).kind !== "all";

/** `countsWithheld` for the caller of a write, on type `slug`. */
export const countsWithheldFor = (ctx: WriteContext, slug: string): boolean =>
  countsWithheld(ctx.auth, ctx.services.config.loginRequired)(slug);

/** The ids among `ids` of types the caller may `action` (all when nothing restricts them). */
export async function cotsAllowed(
  ctx: ReadContext,
  auth: AuthState,
  action: Action,
  ids: number[],
): Promise<Set<number>> {
  return admitted(
    ctx,
    cotModel.resource,
    ids,
    await restrictWhere(ctx, auth, action, cotModel.resource),
  );
}

/**
 * Whether the caller may view field `fieldId` and its type `cotId` (no read where their view of
 * neither is limited): what an answer may name of another field (decision 0156).
 */
export async function fieldViewable(
  ctx: ReadContext,
  auth: AuthState,
  fieldId: number,
  cotId: number,
): Promise<boolean> {
  const where = await restrictWhere(ctx, auth, "view", fieldModel.resource);
  if (!(await admitted(ctx, fieldModel.resource, [fieldId], where)).has(fieldId)) return false;
  return (await cotsAllowed(ctx, auth, "view", [cotId])).has(cotId);
}

/** Among `slugs`, those of types the caller may view (no read where their view is not limited). */
export async function cotSlugsViewable(
  ctx: ReadContext,
  auth: AuthState,
  slugs: string[],
): Promise<Set<string>> {
  if (!slugs.length) return new Set();
  const where = await restrictWhere(ctx, auth, "view", cotModel.resource);
  if (!where) return new Set(slugs);
  const rows = await ctx.db
    .select({ slug: customObjectTypes.slug })
    .from(customObjectTypes)
    .where(and(inArray(customObjectTypes.slug, slugs), where));
  return new Set(rows.map((r) => r.slug));
}

/** 403 unless the caller may `action` every one of the types (by id); names only their slugs. */
export async function requireCots(
  ctx: WriteContext,
  action: Action,
  cots: Map<number, { slug?: unknown }>,
) {
  const ids = [...cots.keys()];
  if (!ids.length) return;
  const allowed = await cotsAllowed(ctx, ctx.auth, action, ids);
  const refused = ids
    .filter((id) => !allowed.has(id))
    .map((id) => String(cots.get(id)?.slug ?? id));
  if (refused.length) throw cotsRefused(action, refused);
}

/** The 403 of a schema write touching types outside the caller's `action`, named by slug. */
export const cotsRefused = (action: Action, slugs: string[]) =>
  forbidden(
    `You do not have permission to ${action} the custom object type(s) ${slugs.join(", ")} as submitted.`,
  );

/**
 * The slugs of the types among `cots` the caller may not view. To an apply they are types that do
 * not exist (decision 0129): a kept one is refused as an add, a removed one is already gone.
 */
export async function hiddenAmong(
  ctx: WriteContext,
  cots: Map<number, { slug?: unknown }>,
): Promise<Set<string>> {
  const viewable = await cotsAllowed(ctx, ctx.auth, "view", [...cots.keys()]);
  return new Set([...cots].filter(([id]) => !viewable.has(id)).map(([, r]) => String(r.slug)));
}

/** The state an apply sees: without the types the caller may not view (decision 0129). */
export function withoutHidden<T>(state: Map<string, T>, hidden?: ReadonlySet<string>) {
  if (!hidden?.size) return state;
  return new Map([...state].filter(([slug]) => !hidden.has(slug)));
}

/**
 * An apply's add refusal (the caller's add constraints refuse a type as written): it names every
 * type the document adds, in document order, not only the refused ones, so that a refusal for a
 * type the caller may not view says the same (decision 0137).
 */
export function addsRefused(document: SchemaDocument, existing: (slug: string) => boolean) {
  return cotsRefused(
    "add",
    document.types.map((t) => t.slug).filter((slug) => !existing(slug)),
  );
}

/**
 * 403 unless the caller may add every one of the types `added` (by id, as written): the apply's
 * add refusal (`addsRefused`).
 */
export async function requireAdded(
  ctx: WriteContext,
  document: SchemaDocument,
  added: Map<number, { slug?: unknown }>,
) {
  const ids = [...added.keys()];
  if (!ids.length) return;
  const allowed = await cotsAllowed(ctx, ctx.auth, "add", ids);
  const slugs = new Set([...added.values()].map((r) => String(r.slug)));
  if (ids.some((id) => !allowed.has(id))) throw addsRefused(document, (s) => !slugs.has(s));
}

/** A type holding one of a document's type names, and whether the caller may view it. */
export interface NameHolder {
  name: string;
  slug: string;
  seen: unknown;
}

/**
 * The types holding any of a document's type names, each with whether the caller may view it
 * (`view`: their view constraint, undefined when unconstrained); to await or add to a read phase.
 */
export function nameHoldersQuery(db: Executor, document: SchemaDocument, view?: SQL) {
  const names = [...new Set(document.types.map((t) => t.name))];
  return db
    .select({
      name: customObjectTypes.name,
      slug: customObjectTypes.slug,
      // NULL, as in a WHERE, is not admitted
      seen: view ? sql<number>`coalesce((${view}), 0)` : sql<number>`1`,
    })
    .from(customObjectTypes)
    .where(names.length ? inArray(customObjectTypes.name, names) : sql`0`);
}

/** `nameHoldersQuery` read now, with the caller's view constraint. */
export async function nameHoldersIn(ctx: WriteContext, document: SchemaDocument) {
  const view = await restrictWhere(ctx, ctx.auth, "view", cotModel.resource);
  return (await nameHoldersQuery(ctx.db, document, view)) as NameHolder[];
}

/**
 * 400 for a document type taking the name of a type the caller may view that the document
 * leaves in place (not one of its types): checked before `refuseHidden`, so that this answer
 * does not depend on whether the document's slug is a hidden type's (decision 0137).
 */
export function refuseTakenNames(document: SchemaDocument, holders: readonly NameHolder[] = []) {
  const listed = new Set(document.types.map((t) => t.slug));
  // by name: each type against every holder was 1,000,000 comparisons at 1,000 types (0210)
  const byName = new Map<string, NameHolder[]>();
  for (const h of holders) {
    const same = byName.get(h.name);
    if (same) same.push(h);
    else byName.set(h.name, [h]);
  }
  const errors = document.types.flatMap((t, i) =>
    (byName.get(t.name) ?? []).some((h) => Number(h.seen) && !listed.has(h.slug))
      ? [
          {
            path: `$.types[${i}].name`,
            message: "custom object type with this name already exists.",
          },
        ]
      : [],
  );
  if (errors.length)
    throw new ApiError(400, {
      error: "invalid_schema",
      detail: "The schema document conflicts with the database.",
      schema_errors: errors.slice(0, 20),
    });
}

/**
 * An apply's document types that meet a type the caller may not view, on its slug (`hidden`) or
 * its name (a `holders` entry not `seen`): such a type does not exist to them (decision 0129), but its slug and
 * name stay taken. A visible type renamed onto a hidden name is refused as a change outside their
 * constraints, anything else as the document's adds are (`addsRefused`): never "already exists".
 * `visible`: the document's existing types the caller may view.
 */
export function refuseHidden(
  document: SchemaDocument,
  visible: ReadonlyMap<string, unknown>,
  hidden?: ReadonlySet<string>,
  holders: readonly NameHolder[] = [],
) {
  const hiddenNames = new Set(holders.filter((h) => !Number(h.seen)).map((h) => h.name));
  const types = document.types;
  const renamed = types.filter((t) => visible.has(t.slug) && hiddenNames.has(t.name));
  if (renamed.length)
    throw cotsRefused(
      "change",
      renamed.map((t) => t.slug),
    );
  const meets = (t: SchemaDocument["types"][number]) =>
    !visible.has(t.slug) && (hidden?.has(t.slug) || hiddenNames.has(t.name));
  if (types.some(meets)) throw addsRefused(document, (slug) => visible.has(slug));
}

/**
 * The 409 of removing a type other types' fields point at. It counts none and names only a field
 * of a type the caller may view: a count or a name would tell of fields they may not (0129).
 */
export async function protectedRefusal(
  ctx: WriteContext,
  slug: string,
  refs: Array<{ name: string; cotId: number }>,
  verb: "remove" | "delete" = "remove",
) {
  const cotIds = [...new Set(refs.map((r) => r.cotId))];
  const viewable = await cotsAllowed(ctx, ctx.auth, "view", cotIds);
  const shown = refs.find((r) => viewable.has(r.cotId));
  const example = shown ? ` (e.g. "${shown.name}")` : "";
  return ApiError.detail(
    409,
    `Cannot ${verb} custom object type "${slug}": fields of other types point at it${example}. Remove those fields first.`,
    "protected",
  );
}
