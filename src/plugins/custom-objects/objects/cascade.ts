/**
 * A cascading delete in the delete's one read and one batch (decision 0109): the objects a
 * `cascade` field takes with the target are read in the read phase, level by level through nested
 * `IN (SELECT id …)` reads planned from the fields known to point at each type (deeper than one
 * read plans, or through fields learned late, another read follows: decision 0120); the batch
 * deletes them deepest first, a level at a time by the set (its clean-ups, rows as read, tags:
 * decision 0155), each object with its change record.
 */
import { sql, type SQL } from "drizzle-orm";
import { transactionOr, WriteConflictError } from "../../../db/client";
import { idsList } from "../../../db/d1-limits";
import { ApiError } from "../../../core/errors";
import type {
  ApiRecord,
  DeleteHook,
  LoadPlan,
  ModelInfo,
  StagedHook,
  WriteContext,
} from "../../../core/context";
import { stageChangesAtOnce, type StagedChange } from "../../../core/changes/record";
import { deletesAsRead } from "../../../core/models/staged";
import { stageRules, type StagedRules } from "../../../core/events/dispatch";
import { ReadPhase, type WriteBatch } from "../../../core/rest/write-batch";
import { APP_LABEL } from "../constants";
import { hasLinkTable, ident, linkTableName, tableName } from "../ddl";
import { scheduleSearchFlush } from "../search/flush";
import type { CotModel, CotRegistry } from "./models";
import type { FieldRow } from "./values";

type Row = Record<string, any>;
type Pointer = { field: FieldRow; model: CotModel };

/**
 * Levels of cascade one read plans down one branch. Each level's ids are the last of a chain of
 * CTEs, each naming the one above: flat, where nesting each level in the one above as
 * `IN (SELECT …)` grew the expression with the depth, and D1 parses one at most 100 deep (8
 * nested levels pass, 16 do not; a chain of 48 passes: measured on miniflare, decision 0136).
 * Deeper ones take another read from the ids read, as deep as the cascade goes.
 */
const CASCADE_DEPTH = 16;
/** Levels one read plans across its branches (a type many cascade fields point at fans out). */
const LEVELS_PER_READ = 32;
/** Levels of types below a target whose pointing fields a first delete learns at once. */
const LEARN_DEPTH = 4;
/**
 * Objects one batch deletes by cascade at most (decisions 0109, 0155, 0198); more: `overBound`.
 * It bounds the depth too: a level is read further only while it holds objects not deleted yet.
 * No statement grows with the objects (a level's rows, links and tags go in a few statements,
 * their change records as bound JSON documents of 1 MB), so D1's per-statement limits do not
 * bound it; what does is the records held in the Worker (~1 KB each, its 128 MB) and the one
 * batch's time (D1 stops a query at 30 s; 3,000 objects take ~1 s on miniflare).
 */
const CASCADE_OBJECTS = 10_000;

/**
 * A cascade over the bound: a transaction takes it where there is one; D1 has none, and answers
 * 409 `cascade_too_large` rather than 501. The answer states the bound, a constant; the
 * dependants may be objects the caller may not view: it neither counts nor names them (0173).
 */
function overBound(ctx: WriteContext): "transaction" {
  return transactionOr(ctx.services.db, () =>
    ApiError.detail(
      409,
      `This delete would cascade to more objects than one write takes on this database (at most ${CASCADE_OBJECTS.toLocaleString("en-US")} in all); delete the dependants first, in parts of at most that many.`,
      "cascade_too_large",
    ),
  );
}

/**
 * A list of ids as SQL for `IN (…)`: written out when short, else a subquery over one bound JSON
 * list, so a statement stays within D1's 100 values and 100 KB however many objects go.
 */
/** Where-clause matching rows of the field's storage that point at any of `ids` of `typeId`. */
export function linksInto(f: FieldRow, typeId: number, ids: SQL) {
  if (hasLinkTable(f))
    return f.isPolymorphic
      ? sql`target_id IN (${ids}) AND target_type = ${typeId}`
      : sql`target_id IN (${ids})`;
  const idCol = ident(`${f.name}_id`);
  return f.isPolymorphic
    ? sql`${idCol} IN (${ids}) AND ${ident(`${f.name}_type`)} = ${typeId}`
    : sql`${idCol} IN (${ids})`;
}

/** One cascade field's dependants of the objects above it, as planned before the read phase. */
interface Level {
  field: FieldRow;
  model: CotModel;
  plan: LoadPlan;
  rows: () => Row[];
  /** Nested forms of the objects above (the cascade field's values), for the change records. */
  forms: (() => Map<number, Map<number, ApiRecord>>) | null;
  rules: () => Promise<StagedRules>;
  /** The fields known to point at the level's type, with the read that proves them current. */
  linking: {
    fields: Pointer[];
    settle(rows: unknown): Promise<boolean>;
    rows: () => unknown;
  } | null;
  below: Level[];
  /** The level's depth in its plan (1: the target's dependants). */
  depth: number;
}

/**
 * Adds the reads of the objects the cascade fields among `pointers` take with `parents` (SQL ids
 * of `parentType`), and of theirs below, to `phase`. Depth- and size-limited (a level's
 * dependants are planned all or none, so none is left unread); a level whose type's pointing
 * fields are not known yet is read, its own dependants are not (`resolveCascade` reads them).
 */
export function planCascade(
  registry: CotRegistry,
  ctx: WriteContext,
  phase: ReadPhase,
  parentType: number,
  parents: SQL,
  pointers: Pointer[],
  parentInfo: ModelInfo | null,
  depth = 1,
  /** The CTEs naming the levels above, the last of them `parents`' own. */
  chain: SQL[] = [],
  budget = { levels: LEVELS_PER_READ },
): Level[] {
  const followed = pointers.filter(
    ({ field, model }) =>
      !hasLinkTable(field) &&
      field.onDeleteBehavior === "cascade" &&
      model.cot.objectTypeId != null &&
      model.resource.loadPlan,
  );
  // the first level always: its dependants are read here or nowhere
  if (depth > CASCADE_DEPTH || (depth > 1 && followed.length > budget.levels)) return [];
  budget.levels -= followed.length;
  const levels: Level[] = [];
  for (const { field, model } of followed) {
    const ot = model.cot.objectTypeId!;
    const name = sql.raw(`cascade_${depth}`);
    const above = chain.length ? sql`SELECT id FROM ${sql.raw(`cascade_${depth - 1}`)}` : parents;
    const own = [
      ...chain,
      sql`${name}(id) AS (SELECT id FROM ${ident(tableName(model.cot.id))} WHERE ${linksInto(field, parentType, above)})`,
    ];
    const ids = sql`WITH ${sql.join(own, sql`, `)} SELECT id FROM ${name}`;
    const plan = model.resource.loadPlan!(ctx, ids);
    const rows = phase.add(plan.statements[0] as never) as () => Row[];
    const rules = stageRules(ctx, phase, { appLabel: APP_LABEL, model: model.resource.model });
    const forms = stageForms(ctx, phase, parentType, parents, parentInfo);
    const guarded = registry.linkingGuarded(ot);
    const linking = guarded
      ? { ...guarded, rows: phase.add(guarded.statement as never) as () => unknown }
      : null;
    const below = guarded
      ? planCascade(
          registry,
          ctx,
          phase,
          ot,
          ids,
          guarded.fields,
          model.info,
          depth + 1,
          own,
          budget,
        )
      : [];
    levels.push({ field, model, plan, rows, forms, rules, linking, below, depth });
  }
  return levels;
}

/** Reads the nested forms of `parents` where their type can (a host type's ride on the rows). */
function stageForms(
  ctx: WriteContext,
  phase: ReadPhase,
  parentType: number,
  parents: SQL,
  info: ModelInfo | null,
) {
  const selectIn = info?.nestedSql?.selectIn;
  if (!info || !selectIn) return null;
  const rows = phase.add(ctx.services.db.orm.all<{ id: number; j: string }>(selectIn(parents)));
  return () => {
    const forms = new Map<number, ApiRecord>();
    for (const r of rows())
      forms.set(Number(r.id), info.nestedSql!.build(ctx, Number(r.id), JSON.parse(r.j)));
    return new Map([[parentType, forms]]);
  };
}

/** A level as the read phase found it: the objects it deletes, and what points at them. */
interface Found {
  level: Level;
  typeId: number;
  /** Every row the level's read found (some may be deleted by another level already). */
  read: Map<number, string | null>;
  rows: Row[];
  records: Map<number, ApiRecord>;
  pointing: Pointer[];
  rules: StagedRules;
  below: Found[];
  hooks: StagedHook[];
}

/** What a resolved cascade deletes, by object type; or why it goes to a transaction. */
export interface Cascade {
  found: Found[];
  closure: Map<number, Set<number>>;
}

/**
 * The levels' answers once the phase ran: the objects to delete (each once, the target and its
 * ancestors excluded, as a transaction's "being deleted" set does), or "transaction" when the
 * fields changed since they were cached or the closure is over the bound.
 */
export async function resolveCascade(
  registry: CotRegistry,
  ctx: WriteContext,
  self: DeleteHook,
  levels: Level[],
  closure: Map<number, Set<number>>,
  /** Levels above `levels` that earlier reads followed. */
  base = 0,
): Promise<Cascade | "transaction"> {
  const found: Found[] = [];
  for (const level of levels) {
    const typeId = level.model.cot.objectTypeId!;
    const seen = closure.get(typeId) ?? closure.set(typeId, new Set()).get(typeId)!;
    const all = level.rows();
    const rows = all.filter((r) => !seen.has(Number(r.id)));
    for (const r of rows) seen.add(Number(r.id));
    let total = 0;
    for (const s of closure.values()) total += s.size;
    if (total > CASCADE_OBJECTS) return overBound(ctx);
    if (level.linking && !(await level.linking.settle(level.linking.rows()))) return "transaction";
    const pointing = level.linking?.fields ?? (await learnLinking(registry, typeId));
    const ids = rows.map((r) => Number(r.id));
    const records = await level.plan.finish([rows], ids, level.forms?.());
    const depth = base + level.depth;
    let below = await resolveCascade(registry, ctx, self, level.below, closure, base);
    if (below === "transaction") return below;
    // dependants the plan did not reach (its depth, or fields learned only now): another read
    const deeper = pointing.filter(
      ({ field: f }) => !hasLinkTable(f) && f.onDeleteBehavior === "cascade",
    );
    if (!level.below.length && deeper.length && ids.length) {
      const phase = new ReadPhase();
      const more = planCascade(
        registry,
        ctx,
        phase,
        typeId,
        idsList(ids),
        deeper,
        level.model.info,
      );
      await phase.run(ctx);
      below = await resolveCascade(registry, ctx, self, more, closure, depth);
      if (below === "transaction") return below;
    }
    const hooks = await otherHooks(ctx, self, level.model, ids);
    if (hooks === "transaction") return hooks;
    found.push({
      level,
      typeId,
      read: new Map(all.map((r) => [Number(r.id), (r.lastUpdated as string) ?? null])),
      rows,
      records: new Map(records.map((r) => [Number(r.id), r])),
      pointing,
      rules: await level.rules(),
      below: below.found,
      hooks,
    });
  }
  return { found, closure };
}

/**
 * The other delete hooks (tags, a plugin's) for the cascaded objects, as a transaction runs them:
 * for all of a level at once where the hook can (`stageCascaded`), else for each; one that would
 * read (none does for a custom object today) sends the delete to a transaction.
 */
async function otherHooks(ctx: WriteContext, self: DeleteHook, model: CotModel, ids: number[]) {
  const parts: StagedHook[] = [];
  if (!ids.length) return parts;
  const objects = { appLabel: APP_LABEL, model: model.resource.model, ids };
  for (const hook of ctx.services.deleteHooks) {
    if (hook === self) continue;
    const all = hook.stageCascaded?.(ctx, { ...objects, objectTypeId: model.cot.objectTypeId! });
    if (all) {
      parts.push(all);
      continue;
    }
    for (const id of ids) {
      const phase = new ReadPhase();
      const answer = hook.stage!(ctx, phase, {
        appLabel: APP_LABEL,
        model: model.resource.model,
        id,
        objectTypeId: model.cot.objectTypeId!,
      });
      if (phase.size) return "transaction" as const;
      parts.push(await answer());
    }
  }
  return parts;
}

/**
 * A guard that no row of `holder`'s field outside the cascade links to `ids` of `typeId` (the
 * cascade's own rows go in the same batch; one made since fails it).
 */
export function noOtherLinks(
  ctx: WriteContext,
  cascade: Cascade | null,
  holder: Pointer,
  typeId: number,
  ids: SQL,
) {
  const f = holder.field;
  const own = [...(cascade?.closure.get(holder.model.cot.objectTypeId ?? -1) ?? [])];
  const outside = own.length ? sql` AND id NOT IN (${idsList(own)})` : sql``;
  return ctx.services.db.orm.run(
    sql`INSERT INTO write_guard (ok) SELECT NOT EXISTS (SELECT 1 FROM ${ident(tableName(f.customObjectTypeId))} WHERE ${linksInto(f, typeId, ids)}${outside})`,
  );
}

/** The cascade's statements, deepest first; each object's change record and outbox rows. */
export function writeCascade(
  ctx: WriteContext,
  batch: WriteBatch,
  cascade: Cascade,
  found = cascade.found,
) {
  for (const x of found) {
    // a level whose objects go otherwise (a target, another level) may still have some below
    writeCascade(ctx, batch, cascade, x.below);
    if (x.rows.length) writeLevel(ctx, batch, cascade, x);
  }
}

function writeLevel(ctx: WriteContext, batch: WriteBatch, cascade: Cascade, x: Found) {
  const orm = ctx.services.db.orm;
  const { model } = x.level;
  const ids = idsList(x.rows.map((r) => Number(r.id)));
  for (const holder of x.pointing) {
    const f = holder.field;
    const where = linksInto(f, x.typeId, ids);
    if (hasLinkTable(f)) {
      const lt = ident(linkTableName(f.customObjectTypeId, f.id));
      batch.add(
        orm.run(
          f.onDeleteBehavior === "protect"
            ? sql`INSERT INTO write_guard (ok) SELECT NOT EXISTS (SELECT 1 FROM ${lt} WHERE ${where})`
            : sql`DELETE FROM ${lt} WHERE ${where}`,
        ),
      );
    } else if (f.onDeleteBehavior === "cascade")
      batch.add(noOtherLinks(ctx, cascade, holder, x.typeId, ids));
    else if (f.onDeleteBehavior === "protect")
      batch.add(
        orm.run(
          sql`INSERT INTO write_guard (ok) SELECT NOT EXISTS (SELECT 1 FROM ${ident(tableName(f.customObjectTypeId))} WHERE ${where})`,
        ),
      );
    else {
      const nulls = f.isPolymorphic
        ? sql`${ident(`${f.name}_id`)} = NULL, ${ident(`${f.name}_type`)} = NULL`
        : sql`${ident(`${f.name}_id`)} = NULL`;
      batch.add(
        orm.run(sql`UPDATE ${ident(tableName(f.customObjectTypeId))} SET ${nulls} WHERE ${where}`),
      );
    }
  }
  for (const hook of x.hooks) hook.write(batch);
  for (const f of model.fields)
    if (hasLinkTable(f))
      batch.add(
        orm.run(
          sql`DELETE FROM ${ident(linkTableName(model.cot.id, f.id))} WHERE source_id IN (${ids})`,
        ),
      );
  // the type still has the shape its rows and records were read under
  batch.add(
    orm.run(
      sql`INSERT INTO write_guard (ok) SELECT EXISTS (SELECT 1 FROM custom_object_types WHERE id = ${model.cot.id} AND shape_version = ${model.cot.shapeVersion})`,
    ),
  );
  const read = x.rows.map((r) => [Number(r.id), r] as const);
  for (const statement of deletesAsRead(ident(tableName(model.cot.id)), read))
    batch.add(orm.run(statement));
  const changes = x.rows.map((r): StagedChange => {
    const id = Number(r.id);
    return { action: "delete", id, prechange: x.records.get(id) ?? null, postchange: null };
  });
  stageChangesAtOnce(ctx, batch, model.resource, x.typeId, x.rules, changes);
  ctx.onCommit?.(async () => scheduleSearchFlush(ctx.services, model.cot.id));
}

/** Whether objects outside the cascade link to `x`'s through a cascade field it did not follow. */
async function beyondPlan(ctx: WriteContext, cascade: Cascade, x: Found): Promise<boolean> {
  const ids = x.rows.map((r) => Number(r.id));
  if (!ids.length) return false;
  const followed = new Set(x.below.map((b) => b.level.field));
  for (const { field: f, model } of x.pointing) {
    if (hasLinkTable(f) || f.onDeleteBehavior !== "cascade" || followed.has(f)) continue;
    const own = [...(cascade.closure.get(model.cot.objectTypeId ?? -1) ?? [])];
    const outside = own.length ? sql` AND id NOT IN (${idsList(own)})` : sql``;
    const [hit] = await ctx.services.db.orm.all(
      sql`SELECT 1 FROM ${ident(tableName(f.customObjectTypeId))} WHERE ${linksInto(f, x.typeId, idsList(ids))}${outside} LIMIT 1`,
    );
    if (hit) return true;
  }
  return false;
}

/**
 * Keeps the fields pointing at `objectTypeId` and, through its cascade fields, at the types below
 * (depth-limited), so the next delete plans its cascade in its one read. Answers the first.
 */
export async function learnLinking(registry: CotRegistry, objectTypeId: number, depth = 1) {
  const fields = await registry.loadLinking(objectTypeId);
  if (depth < LEARN_DEPTH)
    for (const { field, model } of fields)
      if (!hasLinkTable(field) && field.onDeleteBehavior === "cascade" && model.cot.objectTypeId)
        if (!registry.linkingGuarded(model.cot.objectTypeId))
          await learnLinking(registry, model.cot.objectTypeId, depth + 1);
  return fields;
}

/**
 * After a failed batch: a protected link to a cascaded object is the usual 409 `protected`; a
 * dependant made, changed or gone since the read, or a cascaded type whose shape moved, is a lost
 * race (409 `write_conflict`); a hook's own answer is its own.
 */
export async function explainCascade(
  ctx: WriteContext,
  cascade: Cascade,
  parentType: number,
  parents: number[],
  refuse: (
    target: { appLabel: string; model: string; id: number },
    holder: Pointer,
    by: number,
  ) => Promise<Error>,
  found = cascade.found,
): Promise<"transaction" | undefined> {
  const orm = ctx.services.db.orm;
  for (const x of found) {
    const { field, model } = x.level;
    const ids = x.rows.map((r) => Number(r.id));
    for (const holder of x.pointing) {
      const f = holder.field;
      if (f.onDeleteBehavior !== "protect" || !ids.length) continue;
      const lt = hasLinkTable(f)
        ? ident(linkTableName(f.customObjectTypeId, f.id))
        : ident(tableName(f.customObjectTypeId));
      const col = hasLinkTable(f) ? sql`source_id` : sql`id`;
      const target = hasLinkTable(f) ? sql`target_id` : ident(`${f.name}_id`);
      const [hit] = (await orm.all(
        sql`SELECT ${col} AS src, ${target} AS tgt FROM ${lt} WHERE ${linksInto(f, x.typeId, idsList(ids))} LIMIT 1`,
      )) as Array<{ src: number; tgt: number }>;
      if (hit)
        throw await refuse(
          { appLabel: APP_LABEL, model: model.resource.model, id: hit.tgt },
          holder,
          hit.src,
        );
    }
    const now = parents.length
      ? ((await orm.all(
          sql`SELECT id, last_updated AS stamp FROM ${ident(tableName(model.cot.id))} WHERE ${linksInto(field, parentType, idsList(parents))}`,
        )) as Array<{ id: number; stamp: string | null }>)
      : [];
    const moved =
      now.length !== x.read.size || now.some((r) => x.read.get(Number(r.id)) !== r.stamp);
    const [shape] = (await orm.all(
      sql`SELECT shape_version AS v FROM custom_object_types WHERE id = ${model.cot.id}`,
    )) as Array<{ v: number }>;
    if (moved || shape?.v !== model.cot.shapeVersion) throw new WriteConflictError();
    for (const hook of x.hooks)
      if ((await hook.explain?.()) === "transaction") return "transaction";
    if (await beyondPlan(ctx, cascade, x)) return "transaction";
    const deeper = await explainCascade(
      ctx,
      cascade,
      x.typeId,
      [...x.read.keys()],
      refuse,
      x.below,
    );
    if (deeper) return deeper;
  }
  return undefined;
}
