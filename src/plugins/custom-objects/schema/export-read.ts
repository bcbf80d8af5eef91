/**
 * `GET schema/export` in one read where a read costs a round trip (decision 0166): the types the
 * caller may view, the types' rows, fields and the object types and choice sets they name, and
 * the trash, with the request's guards; the document is built as `exportSchema` builds it.
 */
import { inArray, sql, type SQL } from "drizzle-orm";
import { requirePermission } from "../../../core/auth/permissions";
import { restrictWhere } from "../../../core/auth/restrict";
import type { Ctx } from "../../../core/context";
import { ApiError } from "../../../core/errors";
import { freshRead } from "../../../core/fresh-read";
import { readContext } from "../../../core/rest/handlers";
import type { Queries } from "../../../db/client";
import { choiceSets, customObjectTypeFields, customObjectTypes } from "../../../db/schema";
import { APP_LABEL, COT_MODEL } from "../constants";
import { cotModel } from "../types/api";
import { exportDocument, refuseMissing } from "./apply";
import type { SchemaDocument } from "./document";
import { pointedTypes, pointedTypesQuery, typeRowQueries, typesFromRows } from "./state";
import { trashQuery, type TrashRow } from "./trash";
import type { CotRow } from "../objects/models";
import type { FieldRow } from "../objects/values";
import type { ObjectTypeRow } from "../../../core/object-types";

const cotTarget = { appLabel: APP_LABEL, model: COT_MODEL };

/** The answers of `exportStatements`, in its order. */
type ExportAnswers = [
  Array<{ id: number; slug: string }>,
  Array<{ id: number }>,
  CotRow[],
  FieldRow[],
  Array<{ id: number; name: string }>,
  ObjectTypeRow[],
  Array<typeof choiceSets.$inferSelect>,
  TrashRow[],
];

/** The statements of the export's read, built on the caches as they stand (again when stale). */
async function exportStatements(c: Ctx, slugs: string[] | null) {
  const ctx = readContext(c, true);
  await requirePermission(c, "view", cotTarget);
  const viewable = await restrictWhere(ctx, c.get("auth"), "view", cotModel.resource);
  const cot = customObjectTypes;
  const f = customObjectTypeFields;
  const typeIds = ctx.db
    .select({ id: cot.id })
    .from(cot)
    .where(slugs ? inArray(cot.slug, slugs) : undefined);
  // every set named as a set the exported fields use is named (as `exportSchema` asks by name)
  const setsUsed = sql`SELECT ${choiceSets.name} FROM ${choiceSets} WHERE ${choiceSets.id} IN (SELECT ${f.choiceSetId} FROM ${f} WHERE ${f.customObjectTypeId} IN (${typeIds}))`;
  const statements = [
    ctx.db.select({ id: cot.id, slug: cot.slug }).from(cot),
    ctx.db
      .select({ id: cot.id })
      .from(cot)
      .where(viewable ?? sql`0`),
    ...typeRowQueries(ctx.db, slugs),
    pointedTypesQuery(ctx.db),
    ctx.db.select().from(choiceSets).where(sql`${choiceSets.name} IN (${setsUsed})`),
    trashQuery(ctx.db),
  ] as const;
  return { viewable, statements };
}

/** A 404 naming every asked slug the caller cannot see, whether missing or hidden alike. */
export function refuseUnseen(slugs: string[], visible: string[]): void {
  const unseen = slugs.filter((s) => !visible.includes(s));
  if (unseen.length)
    throw ApiError.detail(
      404,
      `No custom object type with slug ${unseen.map((s) => JSON.stringify(s)).join(", ")}.`,
      "not_found",
    );
}

export async function exportInOneRead(c: Ctx, asked: string[]): Promise<SchemaDocument> {
  const slugs = asked.length ? asked : null;
  let viewable!: SQL | undefined;
  const answers = await freshRead(c, async () => {
    const step = await exportStatements(c, slugs);
    viewable = step.viewable;
    return step.statements as unknown as Queries;
  });
  const [rows, admitted, cots, fields, sets, pointed, setRows, trash] =
    answers as unknown as ExportAnswers;
  // Types the caller may not view are left out, and asking for one is a 404 like a missing slug.
  const allowed = new Set((viewable ? admitted : rows).map((r) => r.id));
  const visible = rows.filter((r) => allowed.has(r.id)).map((r) => r.slug);
  const state = (hidden?: Set<string>) =>
    typesFromRows(
      { cots, fields, sets },
      readContext(c).db,
      c.get("services").objectTypes,
      hidden,
      pointedTypes(pointed),
    );
  if (slugs) {
    refuseUnseen(slugs, visible);
    const st = await state();
    refuseMissing(st, slugs);
    return await exportDocument(st, slugs, setRows, []);
  }
  if (visible.length === rows.length)
    return await exportDocument(await state(), null, setRows, trash);
  if (!visible.length) return { schema_version: "1", types: [] } as unknown as SchemaDocument;
  const hidden = new Set(rows.filter((r) => !allowed.has(r.id)).map((r) => r.slug));
  return await exportDocument(await state(hidden), visible, setRows, []);
}
