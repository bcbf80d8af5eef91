/**
 * Link-table fields (`m2m`, `object_types`) in a staged write (decision 0092): the targets an
 * input names and the links a stored row holds are read in the write's one read phase; the new
 * links are statements of its one write batch; records are built from what was read.
 */
import { getTableName, sql, type SQL } from "drizzle-orm";
import type { SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";
import { label as otLabel, type ObjectTypeRow } from "../object-types";
import { keepUnseen, writerSight } from "../auth/type-sight";
import type { ApiRecord, ModelInfo, WriteContext } from "../context";
import type { ReadPhase, WriteBatch } from "../rest/write-batch";
import { inJsonList, rowsPerStatement } from "../../db/d1-limits";

export interface LinkField {
  name: string;
  type: string;
  related?: string;
  required?: boolean;
  readOnly?: boolean;
  link?: { table: SQLiteTable; own: SQLiteColumn; other: SQLiteColumn };
  namesAnyType?: boolean;
}

/** Link values by field name (target ids, in input order, distinct). */
export type Links = Map<string, number[]>;

/** What the read phase found for the link fields. */
export interface LinksFound {
  /** m2m: nested forms of the targets named or held, by field. */
  forms: Map<string, Map<number, ApiRecord>>;
  /** m2m: of the named targets, those the writer may view (absent: all). */
  viewable: Map<string, Set<number>>;
  /** The stored rows' links, by field then row id. */
  stored: Map<string, Map<number, number[]>>;
  /** object_types: the object types the stored rows' links name, by id. */
  types: Map<number, ObjectTypeRow>;
}

/** Answers whether the writer may view each related id, as a read of the phase (staged.ts). */
export type ViewableRead = (
  app: string,
  model: string,
  info: ModelInfo,
  ids: number[],
) => Promise<(() => Set<number>) | undefined>;

/** Link rows an INSERT carries at most (two values each; `own` may be bound). */
const LINK_ROWS = rowsPerStatement(2);
const isLink = (f: LinkField) => f.type === "m2m" || f.type === "object_types";
const idOf = (x: unknown) =>
  typeof x === "object" && x && !Array.isArray(x) ? (x as Record<string, unknown>).id : x;
const quoted = (name: string) => sql.raw(`"${name.replaceAll('"', '""')}"`);

export const noLinks = (): LinksFound => ({
  forms: new Map(),
  viewable: new Map(),
  stored: new Map(),
  types: new Map(),
});

export class StagedLinks {
  readonly fields: LinkField[];

  constructor(fields: LinkField[]) {
    this.fields = fields.filter((f) => isLink(f) && !f.readOnly);
  }

  /**
   * Adds the link fields' reads to `phase`: for m2m fields the targets the inputs name (nested
   * form, viewability), and for every link field the links `storedIds` hold (with the m2m
   * targets' nested forms).
   */
  async read(
    ctx: WriteContext,
    phase: ReadPhase,
    inputs: ApiRecord[],
    storedIds: number[],
    viewableRead: ViewableRead,
  ): Promise<(found: LinksFound) => void> {
    const steps: Array<(found: LinksFound) => void> = [];
    for (const f of this.fields) {
      const info = f.type === "m2m" ? await this.infoOf(ctx, f) : null;
      if (f.type === "m2m" && info?.nestedSql) {
        const named = [
          ...new Set(
            inputs.flatMap((i) => (Array.isArray(i[f.name]) ? (i[f.name] as unknown[]) : [])),
          ),
        ]
          .map(idOf)
          .filter((id): id is number => typeof id === "number" && Number.isInteger(id));
        const forms = named.length
          ? phase.add(
              ctx.services.db.orm.all<{ id: number; j: string }>(info.nestedSql.select(named)),
            )
          : () => [];
        const [app, model] = f.related!.split(".") as [string, string];
        const ok = named.length ? await viewableRead(app, model, info, named) : undefined;
        steps.push((found) => {
          const map = found.forms.get(f.name) ?? new Map<number, ApiRecord>();
          for (const r of forms())
            map.set(Number(r.id), info.nestedSql!.build(ctx, Number(r.id), JSON.parse(r.j)));
          found.forms.set(f.name, map);
          if (ok) found.viewable.set(f.name, ok());
        });
      }
      if (storedIds.length) steps.push(this.readStored(ctx, phase, f, info, storedIds));
    }
    return (found) => {
      for (const step of steps) step(found);
    };
  }

  /** The links `ids` hold through `f` (m2m: with the targets' nested forms). */
  readStored(
    ctx: WriteContext,
    phase: ReadPhase,
    f: LinkField,
    info: ModelInfo | null,
    ids: number[],
  ): (found: LinksFound) => void {
    const { table, own, other } = f.link!;
    const t = quoted(getTableName(table));
    const target = sql`${t}.${quoted(other.name)}`;
    // an object type's name rides too: a write keeps the ones its writer may not see (0187)
    const form =
      f.type === "object_types"
        ? sql`(SELECT json_array(o."app_label", o."model") FROM "object_types" o WHERE o."id" = ${target})`
        : info?.nestedSql?.selectOne
          ? info.nestedSql.selectOne(target)
          : sql`NULL`;
    const rows = phase.add(
      ctx.services.db.orm.all<{ own: number; other: number; j: string | null }>(
        sql`SELECT ${t}.${quoted(own.name)} AS own, ${t}.${quoted(other.name)} AS other, ${form} AS j FROM ${t} WHERE ${inJsonList(sql`${t}.${quoted(own.name)}`, ids)} ORDER BY ${t}.${quoted(other.name)}`,
      ),
    );
    return (found) => {
      const byOwn = new Map<number, number[]>();
      const forms = found.forms.get(f.name) ?? new Map<number, ApiRecord>();
      for (const r of rows()) {
        const o = Number(r.own);
        (byOwn.get(o) ?? byOwn.set(o, []).get(o)!).push(Number(r.other));
        if (r.j && f.type === "object_types") {
          const [appLabel, model] = JSON.parse(r.j) as [string, string];
          found.types.set(Number(r.other), { id: Number(r.other), appLabel, model });
        } else if (r.j && info?.nestedSql)
          forms.set(Number(r.other), info.nestedSql.build(ctx, Number(r.other), JSON.parse(r.j)));
      }
      found.stored.set(f.name, byOwn);
      found.forms.set(f.name, forms);
    };
  }

  async infoOf(ctx: WriteContext, f: LinkField): Promise<ModelInfo | null> {
    const [app, model] = f.related!.split(".") as [string, string];
    return ctx.services.models.get(app, model, ctx);
  }

  /**
   * An input's link values, as `convertValue` of `define.ts` checks them: an m2m target must
   * exist and be viewable by the writer, or be held already (a PUT echoes it back).
   */
  async convert(
    ctx: WriteContext,
    f: LinkField,
    raw: unknown,
    found: LinksFound,
    existingId: number | null,
  ): Promise<{ value: number[] } | { error: string }> {
    if (raw === null) return { value: [] };
    if (!Array.isArray(raw)) return { error: "Expected a list of items." };
    if (f.type === "object_types") {
      const ids: number[] = [];
      const sight = f.namesAnyType ? null : writerSight(ctx.services, ctx.auth);
      const held = existingId === null ? [] : (found.stored.get(f.name)?.get(existingId) ?? []);
      for (const item of raw) {
        // object types are the process's cache (read once, never changed): no round trip warm
        const ot = await ctx.services.objectTypes.resolve(item);
        // one the writer may not see is unknown, held or not (define.ts `convertValue`, 0187)
        if (!ot || (sight && !sight.sees(ot)))
          return { error: `Unknown object type: ${JSON.stringify(item)}` };
        ids.push(ot.id);
      }
      const named = [...new Set(ids)];
      if (!sight) return { value: named };
      // the types it holds that the writer may not see stay (0187)
      const rows = held.flatMap((id) => (found.types.has(id) ? [found.types.get(id)!] : []));
      return { value: keepUnseen(sight, named, rows) };
    }
    const ids = raw.map(idOf);
    if (!ids.every((x) => typeof x === "number" && Number.isInteger(x)))
      return { error: "Incorrect type. Expected pk value." };
    const held = existingId === null ? [] : (found.stored.get(f.name)?.get(existingId) ?? []);
    const forms = found.forms.get(f.name);
    const viewable = found.viewable.get(f.name);
    for (const id of ids as number[])
      if (!forms?.has(id) || (viewable && !viewable.has(id) && !held.includes(id)))
        return { error: `Related object not found using the provided numeric ID: ${id}` };
    return { value: [...new Set(ids as number[])] };
  }

  /** The record values of rows' links (`recordOf` of `define.ts`): labels or nested forms. */
  async recordLinks(
    ctx: WriteContext,
    found: LinksFound,
    rows: Array<[unknown, Links]>,
  ): Promise<Map<string, Map<unknown, unknown[]>>> {
    const out = new Map<string, Map<unknown, unknown[]>>();
    for (const f of this.fields) {
      const byRow = new Map<unknown, unknown[]>();
      for (const [rowId, links] of rows) {
        const ids = [...(links.get(f.name) ?? [])];
        if (f.type === "object_types") {
          const ots = await ctx.services.objectTypes.byIds(ids);
          byRow.set(
            rowId,
            ids.flatMap((id) => (ots.has(id) ? [otLabel(ots.get(id)!)] : [])).sort(),
          );
        } else {
          const forms = found.forms.get(f.name);
          byRow.set(
            rowId,
            ids.sort((a, b) => a - b).flatMap((id) => (forms?.has(id) ? [forms.get(id)!] : [])),
          );
        }
      }
      out.set(f.name, byRow);
    }
    return out;
  }

  /** Statements that set `own`'s links (replacing what it had when `replace`). */
  stage(ctx: WriteContext, batch: WriteBatch, own: number | SQL, links: Links, replace: boolean) {
    const orm = ctx.services.db.orm;
    for (const f of this.fields) {
      const targets = links.get(f.name);
      if (!targets) continue;
      const { table, own: ownCol, other } = f.link!;
      const t = quoted(getTableName(table));
      if (replace) batch.add(orm.run(sql`DELETE FROM ${t} WHERE ${quoted(ownCol.name)} = ${own}`));
      // rows per INSERT within D1's bound values (decision 0125)
      for (let s = 0; s < targets.length; s += LINK_ROWS)
        batch.add(
          orm.run(
            sql`INSERT INTO ${t} (${quoted(ownCol.name)}, ${quoted(other.name)}) VALUES ${sql.join(
              targets.slice(s, s + LINK_ROWS).map((x) => sql`(${own}, ${x})`),
              sql`, `,
            )}`,
          ),
        );
    }
  }
}
