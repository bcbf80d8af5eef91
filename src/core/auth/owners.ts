/**
 * Owners and owner groups (NetBox 4.5, `/api/users/owners/`, `/api/users/owner-groups/`): an
 * owner names who answers for an object — users and user groups under one name, optionally in
 * an owner group. Host models and custom objects carry a nullable `owner`; `ownerFilters` gives
 * them NetBox's `owner_id`, `owner`, `owner_group_id` and `owner_group` filters.
 */
import { count, sql, type SQL, type SQLWrapper } from "drizzle-orm";
import { inIds, jsonListRows } from "../../db/d1-limits";
import { ownerGroups, ownerUserGroups, ownerUsers, owners } from "../../db/schema";
import { ValidationError } from "../errors";
import { defineModel } from "../models/define";
import { parseFilterNumber, type FilterSpec, type Lookup } from "../rest/query";
import type { Executor } from "../../db/client";
import type { ApiRecord } from "../context";
import { restrictionFor } from "./restrict";

export const ownerGroupModel = defineModel({
  appLabel: "users",
  model: "ownergroup",
  verboseName: "owner group",
  path: "users/owner-groups",
  table: ownerGroups,
  defaultOrdering: ["name"],
  display: (r) => r.name,
  fields: [
    {
      name: "name",
      type: "string",
      column: ownerGroups.name,
      required: true,
      maxLength: 100,
      search: true,
      brief: true,
    },
    {
      name: "description",
      type: "string",
      column: ownerGroups.description,
      maxLength: 200,
      search: true,
      brief: true,
    },
  ],
  // NetBox's `member_count`: how many owners the group holds.
  async decorate(ctx, rows, records) {
    memberCounts(
      records,
      await memberCountsQuery(
        ctx.db,
        rows.map((r) => r.id as number),
      ),
    );
  },
  // the counts in a load's one read (decision 0143), as the list and GET read them
  decoratePlan(ctx, ids) {
    const own = typeof ids === "number" ? sql`${ids}` : ids;
    const statement = ctx.db
      .select({ groupId: owners.groupId, n: count() })
      .from(owners)
      .where(sql`${owners.groupId} IN (${own})`)
      .groupBy(owners.groupId);
    return {
      statement,
      decorated: (answer) => async (_rows, records) =>
        memberCounts(records, answer as Array<{ groupId: number | null; n: number }>),
    };
  },
  // staged writes read the counts in their read phase (decision 0092; a new group has none)
  async stage(ctx, phase, _inputs, storedIds) {
    const read = phase.add(memberCountsQuery(ctx.services.db.orm, storedIds));
    return () => ({ decorate: async (_rows, records) => memberCounts(records, read()) });
  },
  openapi: {
    record: {
      member_count: {
        type: ["integer", "null"],
        minimum: 0,
        description:
          "How many owners the group holds; null to a caller who may not view every owner.",
      },
    },
  },
});

// A count of owners the caller may not view is withheld (null), as impact counts are (decision
// 0191, after 0181): counting only the visible ones would take a read per answer.
ownerGroupModel.resource.hideNested = async (ctx, auth, records) => {
  const view = restrictionFor(auth, ctx.services.config.loginRequired, "view", "users", "owner");
  if (view.kind === "all") return records;
  return records.map((rec) => ("member_count" in rec ? { ...rec, member_count: null } : rec));
};

export const ownerModel = defineModel({
  appLabel: "users",
  model: "owner",
  verboseName: "owner",
  path: "users/owners",
  table: owners,
  defaultOrdering: ["name"],
  display: (r) => r.name,
  fields: [
    {
      name: "name",
      type: "string",
      column: owners.name,
      required: true,
      maxLength: 100,
      search: true,
      brief: true,
    },
    {
      name: "group",
      type: "fk",
      column: owners.groupId,
      related: "users.ownergroup",
      nullable: true,
    },
    {
      name: "description",
      type: "string",
      column: owners.description,
      maxLength: 200,
      search: true,
      brief: true,
    },
    {
      name: "user_groups",
      type: "m2m",
      related: "users.group",
      link: {
        table: ownerUserGroups,
        own: ownerUserGroups.ownerId,
        other: ownerUserGroups.groupId,
      },
    },
    {
      name: "users",
      type: "m2m",
      related: "users.user",
      link: { table: ownerUsers, own: ownerUsers.ownerId, other: ownerUsers.userId },
    },
  ],
});

const memberCountsQuery = (db: Executor, ids: number[]) =>
  db
    .select({ groupId: owners.groupId, n: count() })
    .from(owners)
    .where(inIds(owners.groupId, ids))
    .groupBy(owners.groupId);

function memberCounts(records: ApiRecord[], counts: Array<{ groupId: number | null; n: number }>) {
  const byGroup = new Map(counts.map((c) => [c.groupId, c.n]));
  for (const rec of records) rec.member_count = byGroup.get(rec.id as number) ?? 0;
}

/** Integer filter values, else 400 keyed by the parameter. */
function ids(param: string, values: string[]): number[] {
  return values
    .flatMap((raw) => raw.split(","))
    .map((raw) => {
      const n = parseFilterNumber(raw);
      if (n === null || !Number.isInteger(n))
        throw new ValidationError({ [param]: ["Enter a whole number."] });
      return n;
    });
}

/** `expr IN (...)` for `exact`, its negation (NULLs kept, as every `__n` does) for `n`. */
function membership(expr: SQLWrapper, lookup: Lookup, subquery: SQL): SQL | undefined {
  if (lookup === "exact") return sql`${expr} IN (${subquery})`;
  if (lookup === "n") return sql`(${expr} IS NULL OR ${expr} NOT IN (${subquery}))`;
  return undefined;
}

/** A filter's values as one JSON list: one bound value, one text for any number (0188). */
const list = (values: (string | number)[]) => jsonListRows(values);

/**
 * The owner filters of a model whose `owner_id` column is `expr` (NetBox's OwnerFilterMixin):
 * `owner` by name, `owner_group_id` and `owner_group` (by name) through the owner's group.
 * `owner_id` itself is the plain foreign key filter the model already has.
 */
export function ownerFilters(
  expr: SQLWrapper,
  /** The caller's view conditions over `owners` and `owner_groups` (decision 0178); none: all. */
  view: OwnerViews = {},
): Record<string, FilterSpec> {
  // the inner tables are unaliased: the views' columns name them
  const ownersSeen = view.owners
    ? sql` AND id IN (SELECT ${owners.id} FROM ${owners} WHERE ${view.owners})`
    : sql``;
  const groupsSeen = view.groups
    ? sql` AND group_id IN (SELECT ${ownerGroups.id} FROM ${ownerGroups} WHERE ${view.groups})`
    : sql``;
  const ownersOf = (where: SQL) =>
    sql`SELECT id FROM ${owners} WHERE ${where}${ownersSeen}${groupsSeen}`;
  const heldTo = (name: string, labels: string[]) => ({
    labels,
    within: ([owners, groups]: Array<SQL | undefined>) =>
      ownerFilters(expr, { owners, groups })[name]!,
  });
  return {
    owner: {
      kind: "string",
      expr,
      lookups: ["exact", "n"],
      build: (lookup, values) => membership(expr, lookup, ownersOf(sql`name IN (${list(values)})`)),
      heldTo: heldTo("owner", ["users.owner"]),
    },
    owner_group_id: {
      kind: "number",
      expr,
      lookups: ["exact", "n"],
      build: (lookup, values) => {
        const param = lookup === "n" ? "owner_group_id__n" : "owner_group_id";
        return membership(expr, lookup, ownersOf(sql`group_id IN (${list(ids(param, values))})`));
      },
      heldTo: heldTo("owner_group_id", ["users.owner", "users.ownergroup"]),
    },
    owner_group: {
      kind: "string",
      expr,
      lookups: ["exact", "n"],
      build: (lookup, values) =>
        membership(
          expr,
          lookup,
          ownersOf(
            sql`group_id IN (SELECT id FROM ${ownerGroups} WHERE name IN (${list(values)}))`,
          ),
        ),
      heldTo: heldTo("owner_group", ["users.owner", "users.ownergroup"]),
    },
  };
}

/** The caller's view conditions over owners and owner groups (`FilterSpec.heldTo`). */
interface OwnerViews {
  owners?: SQL;
  groups?: SQL;
}
