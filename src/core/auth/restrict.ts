/**
 * Object permission constraints (NetBox semantics) turned into SQL: one permission's
 * constraints are an object (AND of filter lookups) or a list of objects (OR); a user's
 * permissions for one action OR together, and any unconstrained grant lifts the restriction.
 * `restrictWhere` is the one place that says which rows of a model a caller may act on.
 */
import { and, eq, sql, type SQL } from "drizzle-orm";
import { anyOf, inIds } from "../../db/d1-limits";
import { taggedItems } from "../../db/schema";
import { Slots, slotKey } from "../slots";
import type { AuthState, AuthUser } from "../context";
import { ApiError, forbidden, notFound } from "../errors";
import {
  buildFilter,
  DEFAULT_LOOKUPS,
  type FilterForm,
  type FilterSpec,
  type Lookup,
} from "../rest/query";
import type { ReadContext, Resource } from "../rest/resource";
import { codename, type Action, type ConstraintSet } from "./permissions";
import { typeSight, withholdTypes } from "./type-sight";

/** Django lookup names (as NetBox constraints are written) mapped to our filter lookups. */
const DJANGO_LOOKUPS: Record<string, Lookup | "in" | "isnull"> = {
  exact: "exact",
  iexact: "ie",
  in: "in",
  contains: "ic",
  icontains: "ic",
  startswith: "isw",
  istartswith: "isw",
  endswith: "iew",
  iendswith: "iew",
  gt: "gt",
  gte: "gte",
  lt: "lt",
  lte: "lte",
  isnull: "isnull",
  // the NetBox filter spellings are accepted too
  n: "n",
  ic: "ic",
  nic: "nic",
  isw: "isw",
  nisw: "nisw",
  iew: "iew",
  niew: "niew",
  ie: "ie",
  nie: "nie",
  empty: "empty",
};

/** A constraint key's parts: `site__slug__ic` → the path `[site, slug]` and the lookup `ic`. */
export function parseLookupKey(key: string): {
  parts: string[];
  lookupName: string;
  mapped: Lookup | "in" | "isnull";
} {
  const parts = key.split("__");
  let lookupName = "exact";
  if (parts.length > 1 && Object.hasOwn(DJANGO_LOOKUPS, parts[parts.length - 1]!))
    lookupName = parts.pop()!;
  return { parts, lookupName, mapped: DJANGO_LOOKUPS[lookupName]! };
}

/** Replaces the `$user` token with the caller's id, as NetBox does. */
function substitute(value: unknown, user: AuthUser | null): unknown {
  if (!user) return value;
  if (value === "$user") return user.id;
  if (Array.isArray(value)) return value.map((v) => substitute(v, user));
  return value;
}

/** What the caller may do with a model: everything, nothing, or the rows the sets match. */
export type Restriction =
  | { kind: "all" }
  | { kind: "none" }
  | { kind: "some"; sets: ConstraintSet[] };

const ALL: Restriction = { kind: "all" };
const NONE: Restriction = { kind: "none" };

export function restrictionFor(
  auth: AuthState,
  loginRequired: boolean,
  action: Action,
  appLabel: string,
  model: string,
): Restriction {
  const user = auth.user;
  if (!user) return action === "view" && !loginRequired ? ALL : NONE;
  if (user.isSuperuser) return ALL;
  const name = codename(appLabel, action, model);
  if (!user.permissions.has(name)) return NONE;
  const sets = user.constraints?.get(name);
  return sets ? { kind: "some", sets } : ALL;
}

const NOTHING = sql`0`;

const scalarText = (v: unknown): string | null => {
  if (typeof v === "string") return v;
  if (typeof v === "number" && Number.isFinite(v)) return String(v);
  if (typeof v === "boolean") return v ? "true" : "false";
  return null;
};

/**
 * One `key: value` lookup as SQL against a model's filters. Related lookups (`site__slug`)
 * follow the model's relations into the target model's filters. Anything that cannot be
 * applied matches nothing: a constraint never widens what a user may see.
 */
async function lookupSql(
  ctx: ReadContext,
  resource: Resource,
  key: string,
  value: unknown,
  user: AuthUser | null,
  depth: number,
): Promise<SQL> {
  const { parts, lookupName, mapped } = parseLookupKey(key);
  const filters = resource.list.filters;
  const v = substitute(value, user);

  // A field of this model: `name`, `site_id`, or a foreign key compared by id (`site`).
  const own = parts.length === 1 ? ownFilter(filters, parts[0]!, resource) : null;
  if (own) return filterSql(own.name, own.spec, mapped, v);

  // A relation: `site__name`, `site__tenant__slug`, or `site__id`.
  if (depth < 3 && parts.length > 1) {
    const rel = resource.relations?.find(
      (r) => r.name === parts[0] && r.expr && (r.target || r.targetTypeId != null),
    );
    const label = rel?.target ?? (rel ? await labelOfType(ctx, rel.targetTypeId!) : null);
    if (rel && label) {
      const [app, model] = label.split(".") as [string, string];
      const target = (await ctx.services.models.get(app, model, ctx))?.resource;
      if (target) {
        const rest = [...parts.slice(1), ...(lookupName === "exact" ? [] : [lookupName])].join(
          "__",
        );
        const inner = await lookupSql(ctx, target, rest, value, user, depth + 1);
        return sql`${rel.expr} IN (SELECT ${target.list.idExpr} FROM ${target.table} WHERE ${inner})`;
      }
    }
  }
  return NOTHING;
}

export async function labelOfType(ctx: ReadContext, typeId: number): Promise<string | null> {
  const ot = (await ctx.services.objectTypes.byIds([typeId], ctx.db)).get(typeId);
  return ot ? `${ot.appLabel}.${ot.model}` : null;
}

function ownFilter(
  filters: Record<string, FilterSpec>,
  name: string,
  resource: Resource,
): { name: string; spec: FilterSpec } | null {
  // A relation's own name compares its id, as a Django lookup does (`owner: 3`), even where a
  // list filter of that name matches something else (`?owner=<name>`).
  const isRelation = resource.relations?.some((r) => r.name === name && r.expr);
  if (isRelation && Object.hasOwn(filters, `${name}_id`))
    return { name: `${name}_id`, spec: filters[`${name}_id`]! };
  if (Object.hasOwn(filters, name)) return { name, spec: filters[name]! };
  if (Object.hasOwn(filters, `${name}_id`))
    return { name: `${name}_id`, spec: filters[`${name}_id`]! };
  return null;
}

function filterSql(
  name: string,
  spec: FilterSpec,
  lookup: Lookup | "in" | "isnull",
  value: unknown,
): SQL {
  try {
    return filterTerm(name, spec, lookup, value) ?? NOTHING;
  } catch {
    return NOTHING; // a value the filter refuses (a word for a number, say) matches nothing
  }
}

/**
 * One lookup on one filter as SQL, or null when the lookup does not apply to the filter or the
 * value's shape (a list for `in`, a boolean for `isnull`). A value the filter cannot convert
 * throws its ValidationError. Permission constraints read null as "matches nothing"; table
 * constraints (custom object checks, decision 0087) refuse it.
 */
export function filterTerm(
  name: string,
  spec: FilterSpec,
  lookup: Lookup | "in" | "isnull",
  value: unknown,
  form: FilterForm = {},
): SQL | null {
  if (lookup === "isnull") {
    if (typeof value !== "boolean") return null;
    return (
      (buildFilter(name, spec, "empty", [value ? "true" : "false"]) as SQL | undefined) ?? null
    );
  }
  if (lookup === "in") {
    if (!Array.isArray(value) || !value.length) return null;
    const texts = value.map(scalarText);
    if (texts.some((t) => t === null)) return null;
    return guard(spec, "exact")
      ? ((buildFilter(name, spec, "exact", texts as string[], form) as SQL | undefined) ?? null)
      : null;
  }
  if (value === null) {
    if (lookup !== "exact" && lookup !== "n") return null;
    const isNull = sql`${spec.expr} IS NULL`;
    return lookup === "exact" ? isNull : sql`NOT (${isNull})`;
  }
  const text = scalarText(value);
  if (text === null || !guard(spec, lookup)) return null;
  return (buildFilter(name, spec, lookup, [text]) as SQL | undefined) ?? null;
}

const guard = (spec: FilterSpec, lookup: Lookup) =>
  (spec.lookups ?? DEFAULT_LOOKUPS[spec.kind]).includes(lookup);

/**
 * SQL for constraint sets: OR of sets, each the AND of its lookups. `user` is substituted for
 * `$user`; pass null for lookups that are not permission constraints (GraphQL filters).
 */
export async function constraintSql(
  ctx: ReadContext,
  resource: Resource,
  sets: ConstraintSet[],
  user: AuthUser | null,
): Promise<SQL> {
  const alternatives: SQL[] = [];
  for (const set of sets) {
    const terms: SQL[] = [];
    for (const [key, value] of Object.entries(set))
      terms.push(await lookupSql(ctx, resource, key, value, user, 0));
    alternatives.push(terms.length ? (and(...terms) as SQL) : sql`1`);
  }
  // balanced: many permissions' alternatives chained are deeper than D1 parses (decision 0125)
  return alternatives.length ? anyOf(alternatives) : NOTHING;
}

/**
 * The condition limiting `resource` to the rows the caller may act on with `action`:
 * `undefined` when nothing limits it, `0` when nothing is allowed. Models owned by users
 * (tokens) add their owner scope for everyone but superusers.
 */
export async function restrictWhere(
  ctx: ReadContext,
  auth: AuthState,
  action: Action,
  resource: Resource,
): Promise<SQL | undefined> {
  const r = restrictionFor(
    auth,
    ctx.services.config.loginRequired,
    action,
    resource.appLabel,
    resource.model,
  );
  if (r.kind === "none") return NOTHING;
  const user = auth.user;
  const limits =
    user && !user.isSuperuser
      ? [
          resource.ownerColumn ? eq(resource.ownerColumn as any, user.id) : undefined,
          await resource.scope?.(user, ctx, auth),
        ].filter((x): x is SQL => !!x)
      : [];
  const scope = limits.length ? and(...limits) : undefined;
  if (r.kind === "all") return scope;
  const where = await constraintSql(ctx, resource, r.sets, user!);
  return scope ? and(scope, where) : where;
}

/** The ids among `ids` that `where` admits (all of them when nothing restricts). */
export async function admitted(
  ctx: ReadContext,
  resource: Resource,
  ids: number[],
  where: SQL | undefined,
): Promise<Set<number>> {
  if (!ids.length || where === NOTHING) return new Set();
  if (!where) return new Set(ids);
  const rows = (await admittedQuery(ctx, resource, ids, where)) as { id: number }[];
  return new Set(rows.map((r) => Number(r.id)));
}

/** The statement `admitted` reads: the ids among `ids` (not empty) that `where` admits. */
export type AdmittedQuery = ReturnType<typeof admittedQuery>;
function admittedQuery(ctx: ReadContext, resource: Resource, ids: number[], where: SQL) {
  return ctx.db
    .select({ id: sql<number>`${resource.list.idExpr}` })
    .from(resource.table)
    .where(
      // a bulk's hundreds of ids ride as one JSON value (`inIds`, decision 0188)
      and(inIds(resource.list.idExpr, ids), where),
    );
}

/** True when the caller may `action` the object `id`. */
async function mayAct(
  ctx: ReadContext,
  auth: AuthState,
  action: Action,
  resource: Resource,
  id: number,
): Promise<boolean> {
  const where = await restrictWhere(ctx, auth, action, resource);
  if (!where) return true;
  return (await admitted(ctx, resource, [id], where)).has(id);
}

/**
 * Refuses an action on an existing object the caller may not act on: 404 when they may not view
 * it, whatever the action's own constraints say (stricter than NetBox, decision 0152: a write on
 * a hidden object answers as a missing id), else 403 when the action's constraints refuse it.
 */
export async function requireObject(
  ctx: ReadContext,
  auth: AuthState,
  action: Action,
  resource: Resource,
  id: number,
  what?: string,
): Promise<void> {
  if (!(await mayAct(ctx, auth, "view", resource, id))) throw notFound(what);
  if (action !== "view" && !(await mayAct(ctx, auth, action, resource, id))) throw forbidden();
}

/**
 * `requireObject`'s questions as statements of a read the caller makes (`add` takes a statement
 * and gives its rows once read), so they ride in it: the check, to run once that read is done.
 */
export async function objectRequirement(
  ctx: ReadContext,
  auth: AuthState,
  action: Action,
  resource: Resource,
  id: number,
  add: (query: AdmittedQuery) => () => unknown,
  what?: string,
): Promise<() => void> {
  const ask = async (asked: Action) => {
    const where = await restrictWhere(ctx, auth, asked, resource);
    if (!where) return () => true;
    const rows = add(admittedQuery(ctx, resource, [id], where));
    return () => (rows() as Array<{ id: unknown }>).some((r) => Number(r.id) === id);
  };
  const mayView = await ask("view");
  const mayDo = action === "view" ? null : await ask(action);
  return () => {
    if (!mayView()) throw notFound(what);
    if (mayDo && !mayDo()) throw forbidden();
  };
}

/** After a write: the object must still (or now) match the action's constraints. */
export async function requireAfterWrite(
  ctx: ReadContext,
  auth: AuthState,
  action: Action,
  resource: Resource,
  id: number,
): Promise<void> {
  if (!(await mayAct(ctx, auth, action, resource, id))) {
    throw ApiError.detail(
      403,
      `You do not have permission to ${action === "add" ? "create" : "change"} this object as submitted: it would fall outside the objects you may ${action === "add" ? "create" : "change"}.`,
      "permission_denied",
    );
  }
}

/**
 * Hides related objects the caller may not view: a nested object outside their view
 * permission (or its constraints) keeps only the id the record itself stores (and, for a
 * polymorphic field, its type when the caller may view objects of that type) and loses
 * `url`, `display` and every other field.
 */
export async function hideUnviewable(
  ctx: ReadContext,
  auth: AuthState,
  resource: Resource,
  input: Record<string, unknown>[],
): Promise<Record<string, unknown>[]> {
  const relations = resource.relations;
  const user = auth.user;
  const nested =
    resource.hideNested && !user?.isSuperuser ? await resource.hideNested(ctx, auth, input) : input;
  const tagsHidden = await hideTags(ctx, auth, nested);
  // the object types they name that the caller may not see (decision 0187)
  const records = withholdTypes(typeSight(ctx.services, auth), resource, tagsHidden);
  if (!relations?.length || !records.length || user?.isSuperuser) return records;
  const loginRequired = ctx.services.config.loginRequired;

  // Labels of targets known by object type id only (those the load's read judged: from it).
  const judged = ctx.scratch?.get(RELATIONS_READ);
  const labels = new Map<number, string>(judged?.labels);
  const typeIds = [
    ...new Set(
      relations
        .filter((r) => !r.target && r.targetTypeId != null && !labels.has(r.targetTypeId))
        .map((r) => r.targetTypeId!),
    ),
  ];
  if (typeIds.length)
    for (const [id, ot] of await ctx.services.objectTypes.byIds(typeIds, ctx.db))
      labels.set(id, `${ot.appLabel}.${ot.model}`);

  type Nested = Record<string, unknown> & { id: number };
  const isNested = (v: unknown): v is Nested =>
    !!v && typeof v === "object" && !Array.isArray(v) && typeof (v as Nested).id === "number";
  const labelOf = (rel: NonNullable<Resource["relations"]>[number], v: Nested): string | null =>
    rel.polymorphic
      ? typeof v.object_type === "string"
        ? v.object_type
        : null
      : (rel.target ?? (rel.targetTypeId != null ? (labels.get(rel.targetTypeId) ?? null) : null));

  // Which ids of each target model are asked about; models the caller may view whole need no query.
  const wanted = new Map<string, Set<number>>();
  const restriction = new Map<string, Restriction>();
  const note = (label: string | null, id: number) => {
    const key = label ?? "?";
    if (!restriction.has(key)) {
      const [app, model] = key.split(".") as [string, string];
      restriction.set(key, label ? restrictionFor(auth, loginRequired, "view", app, model) : NONE);
    }
    if (restriction.get(key)!.kind === "some")
      (wanted.get(key) ?? wanted.set(key, new Set()).get(key)!).add(id);
  };
  for (const rec of records) {
    for (const rel of relations) {
      const value = rec[rel.name];
      for (const v of rel.many && Array.isArray(value) ? value : [value])
        if (isNested(v)) note(labelOf(rel, v), v.id);
    }
  }
  if ([...restriction.values()].every((r) => r.kind === "all")) return records;

  const visible = await viewableOf(ctx, user, wanted, restriction, judged?.visible);
  // Models every installation has (host models, plugin meta models): naming one leaks nothing.
  const staticLabels = new Set(
    ctx.services.models.staticModels().map((m) => `${m.appLabel}.${m.model}`),
  );
  const isStatic = (label: string) => staticLabels.has(label);
  const hide = (rel: NonNullable<Resource["relations"]>[number], v: unknown): unknown => {
    if (!isNested(v)) return v;
    const label = labelOf(rel, v) ?? "?";
    const r = restriction.get(label)!;
    if (r.kind === "all" || (r.kind === "some" && visible.get(label)?.has(v.id))) return v;
    // Only what the record itself stores: the id and, for a polymorphic value, its type (as
    // upstream keeps it). A URL would name a custom object's slug, so it goes; so does the type
    // of a run-time model (a custom object type) the caller may view nothing of (decision 0077).
    const out: Record<string, unknown> = {};
    if (rel.polymorphic && "object_type" in v && (r.kind === "some" || isStatic(label)))
      out.object_type = v.object_type;
    out.id = v.id;
    return out;
  };
  return records.map((rec) => {
    let out = rec;
    for (const rel of relations) {
      if (!(rel.name in rec)) continue;
      const value = rec[rel.name];
      const next =
        rel.many && Array.isArray(value) ? value.map((v) => hide(rel, v)) : hide(rel, value);
      if (
        next !== value ||
        (Array.isArray(next) && (next as unknown[]).some((v, i) => v !== (value as unknown[])[i]))
      ) {
        if (out === rec) out = { ...rec };
        out[rel.name] = next;
      }
    }
    return out !== rec && resource.rederive ? resource.rederive(out) : out;
  });
}

/**
 * What a one-read GET or list judged of the related objects its records name
 * (`relationViewStatements`, `snapshotRelationStatements`, decisions 0165 and 0166): the labels of
 * the targets it knew by object type id, and per label whether the caller may view each id.
 */
const RELATIONS_READ = slotKey<{
  labels: Map<number, string>;
  visible: Map<string, Map<number, boolean>>;
}>("relations judged in the read");

/**
 * Keeps the answer of one of `relationViewStatements` on `ctx` for the hiding after the read:
 * `rows` of `label`'s ids and whether each is visible (none: `label` null); `labels`, the labels
 * of targets the statements knew by object type id (the hiding then does not read them again).
 */
export function relationsProved(
  ctx: ReadContext,
  label: string | null,
  rows: unknown,
  labels?: ReadonlyMap<number, string>,
): void {
  const scratch = (ctx.scratch ??= new Slots());
  const judged =
    scratch.get(RELATIONS_READ) ??
    scratch.set(RELATIONS_READ, { labels: new Map(), visible: new Map() });
  for (const [typeId, l] of labels ?? []) judged.labels.set(typeId, l);
  if (label === null) return;
  const known = judged.visible.get(label) ?? judged.visible.set(label, new Map()).get(label)!;
  for (const r of rows as { id: number; visible: unknown }[])
    known.set(Number(r.id), Number(r.visible) === 1);
}

/**
 * Per label, the ids of `wanted` the caller may view under `restriction`: those the load's read
 * judged (`inRead`, decisions 0165 and 0166), the others asked now, one query per model.
 */
async function viewableOf(
  ctx: ReadContext,
  user: AuthUser | null,
  wanted: Map<string, Set<number>>,
  restriction: Map<string, Restriction>,
  inRead: Map<string, Map<number, boolean>> | undefined,
): Promise<Map<string, Set<number>>> {
  const visible = new Map<string, Set<number>>();
  for (const [label, ids] of wanted) {
    const judged = inRead?.get(label);
    const seen = new Set([...ids].filter((id) => judged?.get(id) === true));
    const unjudged = [...ids].filter((id) => !judged?.has(id));
    visible.set(label, seen);
    if (!unjudged.length) continue;
    const [app, model] = label.split(".") as [string, string];
    const target = (await ctx.services.models.get(app, model, ctx))?.resource;
    const r = restriction.get(label)!;
    if (!target || r.kind !== "some") continue;
    const where = await constraintSql(ctx, target, r.sets, user!);
    for (const id of await admitted(ctx, target, unjudged, where)) seen.add(id);
  }
  return visible;
}

/** A tag as a record holds it: its nested form `{id, …}` (or a bare id); null for anything else. */
const tagIdOf = (v: unknown): number | null =>
  typeof v === "number"
    ? v
    : v && typeof v === "object" && typeof (v as { id?: unknown }).id === "number"
      ? (v as { id: number }).id
      : null;

/**
 * Drops from each record's `tags` the tags the caller may not view (decision 0153): none when
 * their tag view is unconstrained (the same array back, so kept bytes stay theirs to send), all
 * when they may view no tag, else those outside their `extras.view_tag` constraints (one query).
 */
async function hideTags(
  ctx: ReadContext,
  auth: AuthState,
  records: Record<string, unknown>[],
): Promise<Record<string, unknown>[]> {
  const loginRequired = ctx.services.config.loginRequired;
  const r = restrictionFor(auth, loginRequired, "view", "extras", "tag");
  if (r.kind === "all") return records;
  const ids = new Set<number>();
  for (const rec of records)
    if (Array.isArray(rec.tags))
      for (const v of rec.tags as unknown[]) {
        const id = tagIdOf(v);
        if (id !== null) ids.add(id);
      }
  if (!ids.size) return records;
  const visible = await viewableTagIds(ctx, auth, r, [...ids]);
  let changed = false;
  const out = records.map((rec) => {
    if (!Array.isArray(rec.tags)) return rec;
    const kept = (rec.tags as unknown[]).filter((v) => {
      const id = tagIdOf(v);
      return id === null || visible.has(id);
    });
    if (kept.length === rec.tags.length) return rec;
    changed = true;
    return { ...rec, tags: kept };
  });
  return changed ? out : records;
}

/** Tags a one-read GET or list judged (`tagViewStatement`): id → whether the caller may view it. */
const TAGS_READ = slotKey<Map<number, boolean>>("tags judged in the read");

/**
 * For a load's one read: the statement judging each tag the objects `objectIds` hold (any object of
 * that id: more than needed, never less) against the caller's tag view, or null when their tag
 * view needs no read (unconstrained, or none). `tagsProved` hands its answer to `hideUnviewable`
 * through the context; a tag it did not judge (a snapshot's, a nested record's) is asked after.
 */
export async function tagViewStatement(
  ctx: ReadContext,
  auth: AuthState,
  objectIds: SQL | number,
): Promise<SQL | null> {
  // built only for a caller whose tag view needs the read: most callers' GETs build no SQL here
  return tagsJudged(
    ctx,
    auth,
    () =>
      sql`SELECT ${taggedItems.tagId} FROM ${taggedItems} WHERE ${taggedItems.objectId} IN (${objectIds})`,
  );
}

/**
 * The statement judging the tag ids `tagIds` (a subquery of one column, or what builds it) against
 * the caller's tag view, answered as `tagsProved` takes it; null when their tag view needs no read.
 */
export async function tagsJudged(
  ctx: ReadContext,
  auth: AuthState,
  tagIds: SQL | (() => SQL),
): Promise<SQL | null> {
  const r = restrictionFor(auth, ctx.services.config.loginRequired, "view", "extras", "tag");
  if (r.kind !== "some") return null;
  const target = (await ctx.services.models.get("extras", "tag", ctx))?.resource;
  const view = target ? await restrictWhere(ctx, auth, "view", target) : undefined;
  if (!target || !view) return null;
  const visible = sql`"held"."id" IN (SELECT ${target.list.idExpr} FROM ${target.table} WHERE ${view})`;
  const held = typeof tagIds === "function" ? tagIds() : tagIds;
  return sql`WITH "held"("id") AS (${held}) SELECT DISTINCT "held"."id" AS id, (${visible}) AS visible FROM "held" WHERE typeof("held"."id") = 'integer'`;
}

/** Keeps the answer of `tagViewStatement` on `ctx` for the hiding that follows the read. */
export function tagsProved(ctx: ReadContext, rows: unknown): void {
  ctx.scratch ??= new Slots();
  const judged = (rows as { id: number; visible: unknown }[]).map(
    (r) => [Number(r.id), Number(r.visible) === 1] as const,
  );
  // added to what another statement of the read judged (a tagged record's own, its snapshots')
  const known = ctx.scratch.get(TAGS_READ) ?? ctx.scratch.set(TAGS_READ, new Map());
  for (const [id, visible] of judged) known.set(id, visible);
}

async function viewableTagIds(
  ctx: ReadContext,
  auth: AuthState,
  r: Restriction,
  ids: number[],
): Promise<Set<number>> {
  if (r.kind === "none") return new Set();
  const judged = ctx.scratch?.get(TAGS_READ);
  const visible = new Set(ids.filter((id) => judged?.get(id) === true));
  const unjudged = ids.filter((id) => !judged?.has(id));
  if (!unjudged.length) return visible;
  const target = (await ctx.services.models.get("extras", "tag", ctx))?.resource;
  if (!target) return visible;
  const where = await restrictWhere(ctx, auth, "view", target);
  for (const id of await admitted(ctx, target, unjudged, where)) visible.add(id);
  return visible;
}

/**
 * The condition over `appLabel.model`'s table admitting the objects a writer may name in a
 * reference: those they may view, so that a hidden object answers exactly as an unknown id
 * (decision 0064). `undefined`: every object (a write no user makes, a background job's own or
 * token provisioning, names anything; so does a superuser). For a staged read phase that judges
 * its references in its own read (decision 0194); `viewableRefs` asks the same of given ids.
 */
export async function refViewWhere(
  ctx: ReadContext,
  auth: AuthState,
  appLabel: string,
  model: string,
): Promise<SQL | undefined> {
  const user = auth.user;
  if (!user || user.isSuperuser) return undefined;
  const target = (await ctx.services.models.get(appLabel, model, ctx))?.resource;
  if (target) return restrictWhere(ctx, auth, "view", target);
  return user.permissions.has(codename(appLabel, "view", model)) ? undefined : NOTHING;
}

/**
 * A read phase's column saying whether each row read is one the writer may name (1) or not (0),
 * from `refViewWhere`'s condition over the rows' table; named, as D1 keys its rows by name.
 */
export const viewableColumn = (view: SQL | undefined) =>
  (view ? sql<number>`CASE WHEN ${view} THEN 1 ELSE 0 END` : sql<number>`1`).as("viewable");

/**
 * The ids among `ids` of `appLabel.model` objects a writer may name in a reference
 * (`refViewWhere`); a user may always name themselves.
 */
export async function viewableRefs(
  ctx: ReadContext,
  auth: AuthState,
  appLabel: string,
  model: string,
  ids: number[],
): Promise<Set<number>> {
  const user = auth.user;
  if (!user || user.isSuperuser || !ids.length) return new Set(ids);
  const target = (await ctx.services.models.get(appLabel, model, ctx))?.resource;
  const where = await refViewWhere(ctx, auth, appLabel, model);
  const out = target ? await admitted(ctx, target, ids, where) : new Set(where ? [] : ids);
  if (appLabel === "users" && model === "user" && ids.includes(user.id)) out.add(user.id);
  return out;
}
