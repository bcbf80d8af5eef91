/**
 * Decision 0065's rules on grants, inside a staged write (decision 0092): what they read joins
 * the write's one read phase; what they read to allow a grant is guarded in its one batch.
 */
import { sql, type SQL } from "drizzle-orm";
import { WriteConflictError } from "../../db/client";
import { inJsonList } from "../../db/d1-limits";
import type {
  AuthUser,
  StagedCheck,
  StagedCheckItem,
  StagedWrites,
  WriteContext,
} from "../context";
import { forbidden } from "../errors";
import { label as otLabel } from "../object-types";
import type { ReadPhase } from "../rest/write-batch";
import { codename, constraintSets } from "./permissions";
import { restrictWhere } from "./restrict";
import { holds, limited } from "./delegation";

const difference = (a: number[], b: number[]) => a.filter((x) => !b.includes(x));
const ints = (raw: unknown): number[] =>
  (Array.isArray(raw) ? raw : [])
    .map((x) => (typeof x === "object" && x ? (x as { id?: unknown }).id : x))
    .filter((x): x is number => typeof x === "number" && Number.isInteger(x));

/**
 * The writer's view and change rights over groups named in the inputs or held now (`held`: SQL
 * of group ids), as reads of the phase. The answer refuses (403) a membership change of a group
 * the writer may not view and change.
 */
async function groupRights(
  ctx: WriteContext,
  phase: ReadPhase,
  named: number[],
  held: SQL,
): Promise<() => (changed: number[]) => void> {
  const groups = (await ctx.services.models.get("users", "group", ctx))?.resource;
  const reads: Array<() => Set<number>> = [];
  for (const action of ["view", "change"] as const) {
    const where = groups ? await restrictWhere(ctx, ctx.auth, action, groups) : sql`0`;
    if (!where) continue;
    const rows = phase.add(
      ctx.services.db.orm.all<{ id: number }>(
        sql`SELECT id FROM "groups" WHERE (${inJsonList(sql`id`, named)} OR id IN (${held})) AND ${where}`,
      ),
    );
    reads.push(() => new Set(rows().map((r) => Number(r.id))));
  }
  return () => {
    const admitted = reads.map((read) => read());
    return (changed) => {
      if (changed.some((id) => admitted.some((ok) => !ok.has(id))))
        throw forbidden(
          "You do not have permission to change the members or permissions of this group.",
        );
    };
  };
}

/** 403 unless `user` holds every grant (actions on types, under constraints) a permission makes. */
function requireHeld(
  user: AuthUser,
  grants: Array<{ actions: unknown; constraints: unknown; types: string[] }>,
) {
  for (const g of grants) {
    const sets = constraintSets(g.constraints);
    for (const type of g.types) {
      const [app, model] = type.split(".") as [string, string];
      for (const action of (g.actions as string[] | null) ?? [])
        if (!holds(user, codename(app, action, model), sets))
          throw forbidden("You may not grant permissions you do not hold yourself.");
    }
  }
}

/** The enabled permissions of groups, with each one's stamp: what a new membership grants. */
const groupGrants = (groupIds: number[]) =>
  sql`SELECT pg.group_id AS groupId, p.id, p.actions, p.constraints, p.last_updated AS stamp, (SELECT json_group_array(ot.app_label || '.' || ot.model) FROM object_permission_object_types x JOIN object_types ot ON ot.id = x.object_type_id WHERE x.permission_id = p.id) AS types FROM object_permission_groups pg JOIN object_permissions p ON p.id = pg.permission_id WHERE ${inJsonList(sql`pg.group_id`, groupIds)} AND p.enabled ORDER BY pg.group_id, p.id`;

/** A one-value fingerprint of `groupGrants` (which permissions, at which stamps). */
const grantsPrint = (groupIds: number[]) =>
  sql`SELECT coalesce(group_concat(groupId || ':' || id || '@' || coalesce(stamp, ''), ','), '') AS fp FROM (${groupGrants(groupIds)})`;

/**
 * A user's groups changed by a non-superuser: view and change rights over every group joined or
 * left, and the joined groups grant nothing the writer does not hold. The grants read are
 * guarded: a permission attached to or changed in those groups since fails the batch (409).
 */
const membershipCheck: StagedCheck = async (ctx, phase, items) => {
  const user = limited(ctx);
  const touched = items.filter((i) => Object.hasOwn(i.input, "groups"));
  if (!user || !touched.length) return async () => undefined;
  const named = [...new Set(touched.flatMap((i) => ints(i.input.groups)))];
  const updated = touched.flatMap((i) => (i.id === null ? [] : [i.id]));
  const rights = await groupRights(
    ctx,
    phase,
    named,
    sql`SELECT group_id FROM user_groups WHERE ${inJsonList(sql`user_id`, updated)}`,
  );
  const grants = phase.add(ctx.services.db.orm.all<GrantRow>(groupGrants(named)));
  const print = phase.add(ctx.services.db.orm.all<{ fp: string }>(grantsPrint(named)));
  return async (seen) => {
    const refuse = rights();
    const joinedAll = new Set<number>();
    for (const item of seen) {
      const after = item.links.get("groups");
      if (!after) continue;
      const before = item.storedLinks.get("groups") ?? [];
      const joined = difference(after, before);
      refuse([...joined, ...difference(before, after)]);
      for (const id of joined) joinedAll.add(id);
    }
    requireHeld(
      user,
      grants()
        .filter((g) => joinedAll.has(Number(g.groupId)))
        .map((g) => ({
          ...g,
          actions: parse(g.actions),
          constraints: parse(g.constraints),
          types: parse(g.types) as string[],
        })),
    );
    const fp = print()[0]?.fp ?? "";
    return {
      write(batch) {
        batch.add(
          ctx.services.db.orm.run(
            sql`INSERT INTO write_guard (ok) SELECT (${grantsPrint(named)}) = ${fp}`,
          ),
        );
      },
      async explain() {
        const [now] = await ctx.services.db.orm.all<{ fp: string }>(grantsPrint(named));
        if ((now?.fp ?? "") !== fp) throw new WriteConflictError();
        return undefined;
      },
    };
  };
};

interface GrantRow {
  groupId: number;
  actions: string | null;
  constraints: string | null;
  types: string | null;
}
const parse = (text: unknown) => (typeof text === "string" ? JSON.parse(text) : (text ?? null));

/** What a permission grants: a change to these while it is assigned hands that grant out. */
const GRANT_KEYS = ["actions", "object_types", "constraints", "enabled"];

/**
 * A permission written by a non-superuser: rights over each group it is attached to or taken
 * from and, when it hands out anything new, nothing beyond the writer's own grants (checked on
 * the permission as the write leaves it; the update is conditioned on the row as read).
 */
const permissionCheck: StagedCheck = async (ctx, phase, items) => {
  const user = limited(ctx);
  if (!user) return async () => undefined;
  const named = [...new Set(items.flatMap((i) => ints(i.input.groups)))];
  const updated = items.flatMap((i) => (i.id === null ? [] : [i.id]));
  const rights = await groupRights(
    ctx,
    phase,
    named,
    sql`SELECT group_id FROM object_permission_groups WHERE ${inJsonList(sql`permission_id`, updated)}`,
  );
  return async (seen) => {
    const refuse = rights();
    for (const item of seen) await checkPermission(ctx, user, item, refuse);
    return undefined;
  };
};

async function checkPermission(
  ctx: WriteContext,
  user: AuthUser,
  item: StagedCheckItem,
  refuse: (changed: number[]) => void,
) {
  const was = (name: string) => item.storedLinks.get(name) ?? [];
  const now = (name: string) => item.links.get(name) ?? was(name);
  refuse([
    ...difference(now("groups"), was("groups")),
    ...difference(was("groups"), now("groups")),
  ]);
  const assigned = now("users").length + now("groups").length > 0;
  const handsOut =
    difference(now("users"), was("users")).length > 0 ||
    difference(now("groups"), was("groups")).length > 0 ||
    (assigned && GRANT_KEYS.some((k) => Object.hasOwn(item.input, k)));
  if (!handsOut || item.row.enabled === false) return;
  const types = await ctx.services.objectTypes.byIds(now("object_types"));
  requireHeld(user, [
    {
      actions: item.row.actions,
      constraints: item.row.constraints,
      types: [...types.values()].map(otLabel),
    },
  ]);
}

/** A non-superuser may not delete a superuser account. */
function superuserTargets(ctx: WriteContext) {
  return (existing: Record<string, any>) => {
    if (existing.isSuperuser && !ctx.auth.user?.isSuperuser)
      throw forbidden("Only a superuser may delete a superuser account.");
  };
}

/** Users' staged writes under decision 0065 (another user's password: a superuser's to set). */
export function stagedUserWrites(staged: StagedWrites): StagedWrites {
  return {
    delete: (ctx, ids, o) => staged.delete(ctx, ids, { ...o, admit: superuserTargets(ctx) }),
    create:
      staged.create &&
      ((ctx, inputs, o) => staged.create!(ctx, inputs, { ...o, check: membershipCheck })),
    update:
      staged.update &&
      ((ctx, items, partial, o) => {
        const user = limited(ctx);
        if (user && items.some((i) => i.id !== user.id && Object.hasOwn(i.input, "password")))
          throw forbidden("Only a superuser may set another user's password.");
        return staged.update!(ctx, items, partial, { ...o, check: membershipCheck });
      }),
  };
}

/** Object permissions' staged writes under decision 0065. */
export function stagedPermissionWrites(staged: StagedWrites): StagedWrites {
  return {
    delete: staged.delete,
    create:
      staged.create &&
      ((ctx, inputs, o) => staged.create!(ctx, inputs, { ...o, check: permissionCheck })),
    update:
      staged.update &&
      ((ctx, items, partial, o) =>
        staged.update!(ctx, items, partial, { ...o, check: permissionCheck })),
  };
}
