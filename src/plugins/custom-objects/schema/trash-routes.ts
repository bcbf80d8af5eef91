/**
 * `schema/trash/`: removed fields and types kept with their data (decision 0051). GET lists
 * them (view permission on custom object types; an entry shows only to callers who may view
 * its type, and a removed type's entry only to callers whose view is unconstrained; its `rows`
 * only to callers who may view every object of its type, decision 0183);
 * `POST schema/trash/<id>/restore/` puts one back (add and change permission, the change
 * constraints holding for its type); `DELETE schema/trash/<id>/` purges it at once (delete
 * permission under its constraints for the entry's type, unconstrained for a removed type).
 * Restores off a local file and purges everywhere are one read and one batch (decision 0120).
 */
import type { Hono } from "hono";
import { and, inArray, sql, type SQL } from "drizzle-orm";
import { customObjectTrash, customObjectTypes } from "../../../db/schema";
import type { HonoEnv, WriteContext } from "../../../core/context";
import { foldsCredentials, freshRead } from "../../../core/fresh-read";
import { ApiError, forbidden } from "../../../core/errors";
import { requirePermission } from "../../../core/auth/permissions";
import { restrictWhere } from "../../../core/auth/restrict";
import { inStagedWrite, inTransaction, readContext } from "../../../core/rest/handlers";
import { APP_LABEL, COT_MODEL } from "../constants";
import { cotModel, fieldModel } from "../types/api";
import { logChanges } from "../../../core/changes/record";
import type { FieldRow } from "../objects/values";
import { asLongWrite } from "./change-log";
import { cotsAllowed, countsWithheld, requireCots } from "./access";
import { listTrash, restoreEntry, trashQuery, trashView, type TrashRow } from "./trash";
import { purgeEntryStaged, restoreStaged } from "./trash-staged";
import { stagesSchemaWrites } from "../../../db/policy";

const cotTarget = { appLabel: APP_LABEL, model: COT_MODEL };

const entryId = (raw: string | undefined) => {
  if (!raw || !/^\d{1,15}$/.test(raw))
    throw ApiError.detail(404, "No trash entry with this id.", "not_found");
  return Number(raw);
};

/**
 * The entries the caller may `action` (see the module comment): a field's entry under that
 * action's constraints for its type, a removed type's entry only where the action is
 * unconstrained (its type is gone, so no constraint can be judged; decision 0064).
 */
async function allowed(
  ctx: ReturnType<typeof readContext>,
  auth: HonoEnv["Variables"]["auth"],
  action: "view" | "change" | "delete",
  rows: TrashRow[],
): Promise<TrashRow[]> {
  if (auth.user?.isSuperuser) return rows;
  const unconstrained = (await restrictWhere(ctx, auth, action, cotModel.resource)) === undefined;
  const types = await cotsAllowed(ctx, auth, action, [
    ...new Set(rows.filter((r) => r.kind === "field").map((r) => r.customObjectTypeId)),
  ]);
  return rows.filter((r) => (r.kind === "type" ? unconstrained : types.has(r.customObjectTypeId)));
}

/**
 * Whether the caller is told an entry's `rows` (decision 0183): a field's entry as the counts of
 * its type are (0181), on its slug, which must still be the type's (`slugs` by type id, when
 * read); a removed type's objects lost their grants with its object type, so only a caller who
 * needs no grant is told.
 */
function rowsShown(c: Parameters<typeof readContext>[0], slugs?: ReadonlyMap<number, string>) {
  const auth = c.get("auth");
  const { loginRequired } = c.get("services").config;
  const ungranted = auth.user ? auth.user.isSuperuser : !loginRequired;
  const withheld = countsWithheld(auth, loginRequired);
  return (row: TrashRow) =>
    ungranted ||
    (row.kind === "field" &&
      (!slugs || slugs.get(row.customObjectTypeId) === row.slug) &&
      !withheld(row.slug));
}

/** The entry `id` for an `action`: 404 when the caller may not view it, 403 when they may view but not act. */
async function entryFor(
  c: Parameters<typeof readContext>[0],
  id: number,
  action: "change" | "delete" | null,
): Promise<TrashRow> {
  const ctx = readContext(c);
  const rows = (await listTrash(ctx.db)).filter((r) => r.id === id);
  const [row] = await allowed(ctx, c.get("auth"), "view", rows);
  if (!row) throw ApiError.detail(404, "No trash entry with this id.", "not_found");
  if (action && !(await allowed(ctx, c.get("auth"), action, [row])).length) throw forbidden();
  return row;
}

export function mountTrashRoutes(app: Hono<HonoEnv>) {
  app.get("/schema/trash", async (c) => {
    const ctx = readContext(c, true);
    const slug = c.req.query("slug");
    // the entries, and the types with entries a caller who is not a superuser may view (their
    // slugs now, decision 0183), in one read with the request's guards (decision 0166)
    let viewable!: SQL | undefined;
    const [listed, admitted] = await freshRead(c, async () => {
      await requirePermission(c, "view", cotTarget);
      const superuser = c.get("auth").user?.isSuperuser;
      viewable = superuser
        ? undefined
        : await restrictWhere(ctx, c.get("auth"), "view", cotModel.resource);
      const withEntries = ctx.db
        .select({ id: customObjectTrash.customObjectTypeId })
        .from(customObjectTrash);
      const types = ctx.db
        .select({ id: customObjectTypes.id, slug: customObjectTypes.slug })
        .from(customObjectTypes)
        .where(superuser ? sql`0` : and(viewable, inArray(customObjectTypes.id, withEntries)));
      return [trashQuery(ctx.db, slug || undefined), types] as const;
    });
    ctx.guard = undefined;
    const types = new Map(admitted.map((r) => [r.id, r.slug]));
    const rows = viewable
      ? listed.filter((r) => r.kind === "field" && types.has(r.customObjectTypeId))
      : await allowed(ctx, c.get("auth"), "view", listed);
    const shown = rowsShown(c, types);
    return c.json({ count: rows.length, results: rows.map((r) => trashView(r, shown(r))) });
  });
  // Off a local file, a restore is one read and one batch (decision 0120), by a constrained
  // caller too (0128); every restore on a local file keeps the transaction.
  app.post(
    "/schema/trash/:id/restore",
    foldsCredentials(async (c) => {
      await requirePermission(c, "add", cotTarget);
      await requirePermission(c, "change", cotTarget);
      const id = entryId(c.req.param("id"));
      const entry = await entryFor(c, id, null);
      // staged, a field's type is checked in the restore's read (decision 0128)
      if (stagesSchemaWrites(c.get("services").db)) {
        const staged = await inStagedWrite(c, (ctx) => restoreStaged(ctx, entry));
        return c.json({ restored: trashView(staged, rowsShown(c)(staged)) });
      }
      // a field's type must be one the caller may change; a restored type is checked once it is back
      if (
        entry.kind === "field" &&
        !(await allowed(readContext(c), c.get("auth"), "change", [entry])).length
      )
        throw forbidden();
      const restored = await asLongWrite(c.get("services"), () =>
        inTransaction(c, null, (tx) => restoreLogged(tx, id)),
      );
      return c.json({ restored: trashView(restored, rowsShown(c)(restored)) });
    }),
  );
  app.delete("/schema/trash/:id", async (c) => {
    await requirePermission(c, "delete", cotTarget);
    const row = await entryFor(c, entryId(c.req.param("id")), "delete");
    // one read and one batch on every database (decision 0120); restored or purged meanwhile: 404
    if (!(await purgeEntryStaged(c.get("services").db, row)))
      throw ApiError.detail(404, "No trash entry with this id.", "not_found");
    return c.body(null, 204);
  });
}

/** `restoreEntry` with its change records, in the caller's transaction. */
async function restoreLogged(tx: WriteContext, id: number): Promise<TrashRow> {
  const entry = (await listTrash(tx.db)).find((r) => r.id === id);
  const cotBefore =
    entry?.kind === "field"
      ? ((await cotModel.resource.load(tx, [entry.customObjectTypeId]))[0] ?? null)
      : null;
  const row = await restoreEntry(tx, id);
  // the restored type must be one the caller may change (constraints hold after too)
  await requireCots(tx, "change", new Map([[row.customObjectTypeId, { slug: row.slug }]]));
  // change records, as for the apply that removed them: the records come back as creates
  const fieldIds =
    row.kind === "field"
      ? [(row.record.field as FieldRow).id]
      : ((row.record.fields as FieldRow[]) ?? []).map((f) => f.id);
  const [cotAfter] = await cotModel.resource.load(tx, [row.customObjectTypeId]);
  if (cotAfter)
    await logChanges(tx, cotModel.resource, [
      {
        action: row.kind === "field" ? "update" : "create",
        id: row.customObjectTypeId,
        prechange: cotBefore,
        postchange: cotAfter,
      },
    ]);
  const fields = fieldIds.length ? await fieldModel.resource.load(tx, fieldIds) : [];
  await logChanges(
    tx,
    fieldModel.resource,
    fields.map((f) => ({
      action: "create" as const,
      id: f.id as number,
      prechange: null,
      postchange: f,
    })),
  );
  return row;
}
