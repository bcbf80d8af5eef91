/**
 * `on_delete_behavior` of object and multiobject fields (§4, §5): when anything is deleted —
 * a host object or a custom object — links to it are set to null, their objects deleted
 * (cascade), or the delete is refused with 409 (protect).
 */
import { type SQL, sql } from "drizzle-orm";
import { viewableRefs } from "../../../core/auth/restrict";
import { ApiError } from "../../../core/errors";
import { deleteWithHooks } from "../../../core/rest/handlers";
import type { DeleteHook, StagedHook, StagedMany, WriteContext } from "../../../core/context";
import { idsList } from "../../../db/d1-limits";
import { yieldWhenDue } from "../../../turns";
import { ReadPhase, type WriteBatch } from "../../../core/rest/write-batch";
import { slotKey } from "../../../core/slots";
import { hasLinkTable, ident, linkTableName, tableName } from "../ddl";
import type { CotModel, CotRegistry } from "./models";
import type { FieldRow } from "./values";
import {
  type Cascade,
  explainCascade,
  learnLinking,
  linksInto,
  noOtherLinks,
  planCascade,
  resolveCascade,
  writeCascade,
} from "./cascade";

/** Where-clause matching rows of the field's storage that point at (typeId, id). */
export function linkCondition(f: FieldRow, typeId: number, id: number) {
  if (hasLinkTable(f)) {
    return f.isPolymorphic
      ? sql`target_id = ${id} AND target_type = ${typeId}`
      : sql`target_id = ${id}`;
  }
  const idCol = ident(`${f.name}_id`);
  return f.isPolymorphic
    ? sql`${idCol} = ${id} AND ${ident(`${f.name}_type`)} = ${typeId}`
    : sql`${idCol} = ${id}`;
}

/** `<object type id>:<id>` of the deletes under way in this transaction (its scratch). */
const DELETING = slotKey<Set<string>>("custom-objects.deleting");
/** Object ids (by object type id) a staged delete's targets and cascades delete (its scratch). */
const CASCADED = slotKey<Map<number, Set<number>>>("custom-objects.cascaded");

/** Names the targets of one staged delete: no target's cascade takes another (it goes as one). */
export function deletingTogether(ctx: WriteContext, objectTypeId: number, ids: number[]) {
  const closure = ctx.scratch.ensure(CASCADED, () => new Map<number, Set<number>>());
  const own = closure.get(objectTypeId) ?? closure.set(objectTypeId, new Set()).get(objectTypeId)!;
  for (const id of ids) own.add(id);
}

export function onDeleteHook(registry: CotRegistry): DeleteHook {
  const hook: DeleteHook = async (ctx, target) => {
    const ot = await ctx.services.objectTypes.byLabel(target.appLabel, target.model, ctx.db);
    if (!ot) return;
    const busy = ctx.scratch.ensure(DELETING, () => new Set());
    busy.add(`${ot.id}:${target.id}`);
    for (const { field: f, model } of await registry.fieldsPointingAt(ctx.db, ot.id)) {
      const cotId = f.customObjectTypeId;
      const where = linkCondition(f, ot.id, target.id);
      if (hasLinkTable(f)) {
        const lt = ident(linkTableName(cotId, f.id));
        const [hit] = (await ctx.db.all(
          sql`SELECT source_id FROM ${lt} WHERE ${where} LIMIT 1`,
        )) as { source_id: number }[];
        if (!hit) continue;
        if (f.onDeleteBehavior === "protect")
          throw await protectedError(ctx, target, { field: f, model }, hit.source_id);
        // multiobject links simply go away (cascade would delete whole objects for one link)
        await ctx.db.run(sql`DELETE FROM ${lt} WHERE ${where}`);
        continue;
      }
      const t = ident(tableName(cotId));
      const rows = (await ctx.db.all(sql`SELECT id FROM ${t} WHERE ${where}`)) as { id: number }[];
      if (!rows.length) continue;
      if (f.onDeleteBehavior === "protect")
        throw await protectedError(ctx, target, { field: f, model }, rows[0]!.id);
      if (f.onDeleteBehavior === "cascade") {
        const ownType = model.cot.objectTypeId!;
        for (const r of rows) {
          if (busy.has(`${ownType}:${r.id}`)) continue; // a self-reference already being deleted
          await deleteWithHooks(ctx, model.resource, r.id);
        }
      } else {
        const nulls = f.isPolymorphic
          ? sql`${ident(`${f.name}_id`)} = NULL, ${ident(`${f.name}_type`)} = NULL`
          : sql`${ident(`${f.name}_id`)} = NULL`;
        await ctx.db.run(sql`UPDATE ${t} SET ${nulls} WHERE ${where}`);
      }
    }
  };
  hook.stage = (ctx, phase, target) => stageOnDelete(registry, hook, ctx, phase, target);
  hook.stageAssumed = (ctx, target) => assumedOnDelete(registry, ctx, target);
  hook.stageMany = (ctx, phase, targets) => stageManyOnDelete(registry, hook, ctx, phase, targets);
  return hook;
}

/**
 * The hook in a delete with no read (decision 0139): the fields pointing at the target's type as
 * kept, proven by a guard in the batch; links dropped and set to null; protected and cascading
 * ones guarded that nothing links through them (a cascade with objects to take must read them: the
 * guard fails, and the caller deletes the ordinary way, whose reads take or name them). Null
 * where the fields are not kept yet.
 */
function assumedOnDelete(
  registry: CotRegistry,
  ctx: WriteContext,
  target: { appLabel: string; model: string; id: number; objectTypeId?: number },
): StagedHook | null {
  const ot =
    target.objectTypeId !== undefined
      ? { id: target.objectTypeId }
      : ctx.services.objectTypes.cached(target.appLabel, target.model);
  const guarded = ot ? registry.linkingGuarded(ot.id) : null;
  if (!ot || !guarded) return null;
  const fields = guarded.fields;
  return {
    write(batch: WriteBatch) {
      batch.add(guarded.guard(ctx.services.db.orm));
      writeTargetLinks(ctx, batch, fields, ot.id, target.id, null);
    },
  };
}

/** A field whose objects go with the objects they link to (decision 0109). */
const cascades = ({ field: f }: Holder) => !hasLinkTable(f) && f.onDeleteBehavior === "cascade";

/**
 * The hook for many objects of one type (decision 0184): the fields pointing at their type read
 * (or, kept, proven) once in the read; where none cascades, the links to all of them dropped, set
 * to null or guarded (protect) by a statement per field. A cascade stages each object alone, in
 * a read of its own after the first (`stageOnDelete`). Null where the type is not known yet.
 */
function stageManyOnDelete(
  registry: CotRegistry,
  self: DeleteHook,
  ctx: WriteContext,
  phase: ReadPhase,
  targets: { appLabel: string; model: string; ids: number[]; objectTypeId?: number },
): StagedMany | null {
  const ot =
    targets.objectTypeId !== undefined
      ? { id: targets.objectTypeId }
      : ctx.services.objectTypes.cached(targets.appLabel, targets.model);
  if (!ot) return null;
  const orm = ctx.services.db.orm;
  const guarded = registry.linkingGuarded(ot.id);
  const proof = guarded ? phase.add(guarded.statement as never) : null;
  const pointing = guarded ? null : phase.add(registry.pointingQuery(orm, ot.id));
  const ids = idsList(targets.ids);
  const fieldsNow = async () => {
    if (guarded && (await guarded.settle(proof!()))) return guarded.fields;
    if (guarded)
      return registry.linkingGuarded(ot.id)?.fields ?? (await learnLinking(registry, ot.id));
    const rows = pointing!() as never;
    const fields = await registry.pointingFields(orm, rows);
    registry.keepLinking(ot.id, rows, fields);
    return fields;
  };
  return {
    async admit() {},
    async part() {
      const fields = await fieldsNow();
      if (fields.some(cascades)) {
        // the types below are learned first, so that each object's cascade is read in one read
        if (!guarded) await learnLinking(registry, ot.id);
        return eachAlone(ctx, self, targets);
      }
      return {
        write(batch) {
          for (const holder of fields) batch.add(linksStatement(ctx, holder.field, ot.id, ids));
        },
        async explain() {
          for (const holder of fields) {
            const f = holder.field;
            if (f.onDeleteBehavior !== "protect") continue;
            const hit = await protectHit(ctx, f, ot.id, ids);
            if (hit)
              throw await protectedError(ctx, { ...targets, id: hit.target }, holder, hit.by);
          }
          return undefined;
        },
      };
    },
  };
}

/** The hook staged for each of `targets` alone, read together in one more read; one part. */
async function eachAlone(
  ctx: WriteContext,
  self: DeleteHook,
  targets: { appLabel: string; model: string; ids: number[]; objectTypeId?: number },
): Promise<StagedHook> {
  const late = new ReadPhase();
  const answers: Array<() => Promise<StagedHook>> = [];
  for (const id of targets.ids) {
    answers.push(self.stage!(ctx, late, { ...targets, id }));
    await yieldWhenDue();
  }
  await late.run(ctx);
  const parts: StagedHook[] = [];
  for (const answer of answers) {
    parts.push(await answer());
    await yieldWhenDue();
  }
  return {
    write(batch) {
      for (const part of parts) part.write(batch);
    },
    async explain() {
      for (const part of parts)
        if ((await part.explain?.()) === "transaction") return "transaction";
      return undefined;
    },
  };
}

/** The statement for the links through `f` to any of `ids`: dropped, set to null, or guarded. */
function linksStatement(ctx: WriteContext, f: FieldRow, typeId: number, ids: SQL) {
  const orm = ctx.services.db.orm;
  const where = linksInto(f, typeId, ids);
  const t = hasLinkTable(f)
    ? ident(linkTableName(f.customObjectTypeId, f.id))
    : ident(tableName(f.customObjectTypeId));
  if (f.onDeleteBehavior === "protect")
    return orm.run(
      sql`INSERT INTO write_guard (ok) SELECT NOT EXISTS (SELECT 1 FROM ${t} WHERE ${where})`,
    );
  if (hasLinkTable(f)) return orm.run(sql`DELETE FROM ${t} WHERE ${where}`);
  const nulls = f.isPolymorphic
    ? sql`${ident(`${f.name}_id`)} = NULL, ${ident(`${f.name}_type`)} = NULL`
    : sql`${ident(`${f.name}_id`)} = NULL`;
  return orm.run(sql`UPDATE ${t} SET ${nulls} WHERE ${where}`);
}

/** An object linking through protected field `f` to one of `ids`, and which: or null. */
async function protectHit(ctx: WriteContext, f: FieldRow, typeId: number, ids: SQL) {
  const where = linksInto(f, typeId, ids);
  const query = hasLinkTable(f)
    ? sql`SELECT source_id AS linker, target_id AS target FROM ${ident(linkTableName(f.customObjectTypeId, f.id))} WHERE ${where} LIMIT 1`
    : sql`SELECT id AS linker, ${ident(`${f.name}_id`)} AS target FROM ${ident(tableName(f.customObjectTypeId))} WHERE ${where} LIMIT 1`;
  const [hit] = (await ctx.services.db.orm.all(query)) as Array<{ linker: number; target: number }>;
  return hit ? { by: Number(hit.linker), target: Number(hit.target) } : null;
}

/** A field whose links keep (protect) or take (cascade) the objects they link; else set to null. */
const holdsOn = (f: FieldRow) =>
  f.onDeleteBehavior === "protect" || f.onDeleteBehavior === "cascade";

/**
 * The hook in a staged delete of a host or custom object (decision 0071): the fields pointing at
 * its type are read in the read phase; links are dropped and set to null by statements of the batch, and
 * `protect` and `cascade` fields become guards that no object links to it. When a guard fails,
 * `explain` reads what links: a protected link is the usual 409. A cascade's objects are read in
 * the phase and deleted in the batch (`cascade.ts`, decision 0109); one the plan could not reach
 * (fields not known yet, too deep or too many) sends the delete to a transaction.
 */
function stageOnDelete(
  registry: CotRegistry,
  self: DeleteHook,
  ctx: WriteContext,
  phase: ReadPhase,
  target: { appLabel: string; model: string; id: number; objectTypeId?: number },
): () => Promise<StagedHook> {
  // a custom object's type is named by its writer (such types are not cached by label)
  const given = target.objectTypeId !== undefined ? { id: target.objectTypeId } : null;
  const rows = given
    ? Promise.resolve(given)
    : ctx.services.objectTypes.byLabel(target.appLabel, target.model);
  const orm = ctx.services.db.orm;
  // the object type is cached after its first use: its fields are then read with the phase, and
  // when the fields pointing at it are known too, so are the objects a cascade takes (0109)
  const sync = given ?? ctx.services.objectTypes.cached(target.appLabel, target.model);
  const guarded = sync ? registry.linkingGuarded(sync.id) : null;
  const proof = guarded ? phase.add(guarded.statement as never) : null;
  const pointing = sync && !guarded ? phase.add(registry.pointingQuery(orm, sync.id)) : null;
  const levels =
    sync && guarded
      ? planCascade(
          registry,
          ctx,
          phase,
          sync.id,
          sql`${target.id}`,
          guarded.fields,
          given ? (registry.cachedByObjectType(given.id)?.info ?? null) : null,
        )
      : [];
  return async () => {
    const ot = sync ?? (await rows);
    if (!ot) return { write() {} };
    let fields: Awaited<ReturnType<CotRegistry["fieldsPointingAt"]>>;
    let cascade: Cascade | null = null;
    // shared by the request's targets: an object two of them take is deleted once
    deletingTogether(ctx, ot.id, [target.id]);
    const closure = ctx.scratch.get(CASCADED)!;
    let resolved: Cascade | "transaction" | null = null;
    if (guarded && proof && (await guarded.settle(proof()))) {
      fields = guarded.fields;
      resolved = await resolveCascade(registry, ctx, self, levels, closure);
    } else {
      const rows = pointing ? (pointing() as never) : await registry.pointingQuery(orm, ot.id);
      fields = await registry.pointingFields(orm, rows);
      // kept with their proof: a delete with no read (a create's revert) guards them in its batch
      if (!guarded) registry.keepLinking(ot.id, rows, fields);
      if (fields.some(({ field: f }) => !hasLinkTable(f) && f.onDeleteBehavior === "cascade")) {
        // the fields pointing at the type were not known before the read: learned now (kept for
        // the next delete, which reads its cascade in its one read) and the cascade read now
        fields = await learnLinking(registry, ot.id);
        const late = new ReadPhase();
        const parentInfo = registry.cachedByObjectType(ot.id)?.info ?? null;
        const planned = planCascade(
          registry,
          ctx,
          late,
          ot.id,
          sql`${target.id}`,
          fields,
          parentInfo,
        );
        await late.run(ctx);
        resolved = await resolveCascade(registry, ctx, self, planned, closure);
      }
    }
    // over the bound, or fields changed under the plan: the guards send it to a transaction
    if (resolved && resolved !== "transaction") cascade = resolved;
    const covered = new Set(cascade?.found.map((x) => x.level.field) ?? []);
    const watched = fields.filter(({ field: f }) => !hasLinkTable(f) && holdsOn(f));
    const explainOne = async (holder: Holder) => {
      const f = holder.field;
      const where = linkCondition(f, ot.id, target.id);
      const t = ident(tableName(f.customObjectTypeId));
      const [hit] = (await orm.all(sql`SELECT id FROM ${t} WHERE ${where} LIMIT 1`)) as {
        id: number;
      }[];
      if (!hit) return undefined;
      if (f.onDeleteBehavior === "protect") throw await protectedError(ctx, target, holder, hit.id);
      return "transaction" as const;
    };
    return {
      write(batch: WriteBatch) {
        if (cascade) writeCascade(ctx, batch, cascade);
        writeTargetLinks(ctx, batch, fields, ot.id, target.id, cascade);
      },
      async explain() {
        for (const holder of fields) {
          const f = holder.field;
          if (hasLinkTable(f) && f.onDeleteBehavior === "protect") {
            const lt = ident(linkTableName(f.customObjectTypeId, f.id));
            const where = linkCondition(f, ot.id, target.id);
            const [hit] = (await orm.all(
              sql`SELECT source_id FROM ${lt} WHERE ${where} LIMIT 1`,
            )) as { source_id: number }[];
            if (hit) throw await protectedError(ctx, target, holder, hit.source_id);
          }
        }
        for (const holder of watched)
          if (holder.field.onDeleteBehavior === "protect" && (await explainOne(holder)))
            return "transaction";
        if (cascade) {
          const refuse = (to: ProtectedTarget, holder: Holder, by: number) =>
            protectedError(ctx, to, holder, by);
          const below = await explainCascade(ctx, cascade, ot.id, [target.id], refuse);
          if (below) return below;
        }
        for (const holder of watched)
          if (!covered.has(holder.field) && (await explainOne(holder)) === "transaction")
            return "transaction";
        return undefined;
      },
    };
  };
}

/** The batch's statements for the links to the target: dropped, set to null, or guarded. */
function writeTargetLinks(
  ctx: WriteContext,
  batch: WriteBatch,
  fields: Array<{ field: FieldRow; model: CotModel }>,
  typeId: number,
  id: number,
  cascade: Cascade | null,
) {
  const orm = ctx.services.db.orm;
  for (const holder of fields) {
    const f = holder.field;
    const where = linkCondition(f, typeId, id);
    if (hasLinkTable(f)) {
      const lt = ident(linkTableName(f.customObjectTypeId, f.id));
      if (f.onDeleteBehavior === "protect")
        batch.add(
          orm.run(
            sql`INSERT INTO write_guard (ok) SELECT NOT EXISTS (SELECT 1 FROM ${lt} WHERE ${where})`,
          ),
        );
      else batch.add(orm.run(sql`DELETE FROM ${lt} WHERE ${where}`));
      continue;
    }
    const t = ident(tableName(f.customObjectTypeId));
    if (!holdsOn(f)) {
      const nulls = f.isPolymorphic
        ? sql`${ident(`${f.name}_id`)} = NULL, ${ident(`${f.name}_type`)} = NULL`
        : sql`${ident(`${f.name}_id`)} = NULL`;
      batch.add(orm.run(sql`UPDATE ${t} SET ${nulls} WHERE ${where}`));
    } else if (f.onDeleteBehavior === "cascade")
      batch.add(noOtherLinks(ctx, cascade, holder, typeId, sql`${id}`));
    else
      batch.add(
        orm.run(
          sql`INSERT INTO write_guard (ok) SELECT NOT EXISTS (SELECT 1 FROM ${t} WHERE ${where})`,
        ),
      );
  }
}

/** An object a delete takes (its target or one it cascades to), as a protect refusal names it. */
type ProtectedTarget = { appLabel: string; model: string; id: number };
/** A custom object field linking to the deleted type, and its type's model. */
type Holder = { field: FieldRow; model: CotModel };

/**
 * The 409 of a `protect` link. The linking object (its type, field and id) and an object the
 * delete cascades to are named only where the caller may view them, as the host models' refusal
 * counts what it may not name (`dependants.ts`, §4): a type the caller may not view is not told.
 */
async function protectedError(
  ctx: WriteContext,
  target: ProtectedTarget,
  holder: Holder,
  byId: number,
): Promise<ApiError> {
  const f = holder.field;
  const { appLabel, model } = holder.model.resource;
  const may = async (app: string, m: string, id: number) =>
    (await viewableRefs(ctx, ctx.auth, app, m, [id])).has(id);
  const what = (await may(target.appLabel, target.model, target.id))
    ? `${target.appLabel}.${target.model} ${target.id}`
    : "an object this delete cascades to";
  if (!(await may(appLabel, model, byId)))
    return ApiError.detail(
      409,
      `Cannot delete ${what}: another object still links to it. Delete or change it first.`,
      "protected",
      { protected_objects: [] },
    );
  return ApiError.detail(
    409,
    `Cannot delete ${what}: field "${f.name}" (on_delete_behavior "protect") of custom object type ${f.customObjectTypeId} still links to it from object ${byId}.`,
    "protected",
    {
      protected_objects: [
        { custom_object_type: f.customObjectTypeId, field_name: f.name, object_id: byId },
      ],
    },
  );
}
