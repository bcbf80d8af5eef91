/**
 * Per-request batch loading for GraphQL: every object a query touches is loaded once per
 * model and request, through the model's resource, limited to what the caller may view. A
 * page of 50 records with relation fields costs a fixed number of statements.
 */
import DataLoader from "dataloader";
import { sql } from "drizzle-orm";
import { admitted, restrictWhere } from "../core/auth/restrict";
import { typeSight, withholdTypes } from "../core/auth/type-sight";
import type { AuthState, Ctx, LoadPlan } from "../core/context";
import { freshRead } from "../core/fresh-read";
import type { ApiRecord, ReadContext } from "../core/rest/resource";
import { databaseStamp } from "../core/database-stamp";
import type { Queries } from "../db/client";
import { idsList, inJsonList } from "../db/d1-limits";
import { choiceSets } from "../db/schema";
import type { AnswerWeight } from "./answer-weight";
import type { Entry } from "./shared";

/** The model label a loaded record belongs to (unions resolve their member type by it). */
export const LABEL = Symbol("label");

export interface GraphQLContext {
  ctx: ReadContext;
  auth: AuthState;
  loaders: Loaders;
  /** The HTTP request it answers (its guards ride in the first list's read, decision 0085). */
  http: Ctx;
  /** What the answer holds so far (decision 0190). */
  weight: AnswerWeight;
}

export class Loaders {
  #byLabel = new Map<string, DataLoader<number, ApiRecord | null>>();
  #choiceSets: DataLoader<number, Map<string, string>>;

  constructor(
    private readonly ctx: ReadContext,
    private readonly auth: AuthState,
    /** The request, where its reads may carry its guards (`freshRead`). */
    private readonly http?: Ctx,
  ) {
    this.#choiceSets = new DataLoader(async (ids) => {
      const rows = await ctx.db
        .select({ id: choiceSets.id, extra: choiceSets.extraChoices })
        .from(choiceSets)
        .where(inJsonList(choiceSets.id, [...ids]));
      const byId = new Map(
        rows.map((r) => [r.id, new Map((r.extra ?? []).map(([v, l]) => [String(v), String(l)]))]),
      );
      return ids.map((id) => byId.get(id) ?? new Map());
    });
  }

  /** The loader of one model's records by id; ids the caller may not view load as null. */
  of(entry: Entry): DataLoader<number, ApiRecord | null> {
    let loader = this.#byLabel.get(entry.label);
    if (!loader) {
      loader = new DataLoader(async (ids) => {
        // the object types records name that the caller may not see are left out (0187)
        const sight = typeSight(this.ctx.services, this.auth);
        const records = withholdTypes(
          sight,
          entry.resource,
          await this.#loadVisible(entry, [...ids]),
        );
        const byId = new Map(records.map((rec) => [rec.id as number, labelled(rec, entry.label)]));
        return ids.map((id) => byId.get(id) ?? null);
      });
      this.#byLabel.set(entry.label, loader);
    }
    return loader;
  }

  /**
   * The records of `ids` that `where` admits. Where a read costs a round trip and the model states
   * its load as statements, one read (decision 0166): the view condition inside it, and the nested
   * forms of what the records point at riding on it; else a look-up, then the load.
   */
  async #loadVisible(entry: Entry, ids: number[]) {
    const r = entry.resource;
    const viewable = () => restrictWhere(this.ctx, this.auth, "view", r);
    if (!r.loadPlan || !this.http || databaseStamp(this.ctx.services) !== null) {
      const where = await viewable();
      const visible = where ? [...(await admitted(this.ctx, r, ids, where))] : ids;
      return r.load(this.ctx, visible);
    }
    // a page's hundreds of ids ride as one JSON value (`idsList`, decision 0188)
    const listed = idsList(ids);
    let plan!: LoadPlan;
    // the request's guards ride in it when no list's read took them (an object by id)
    const answers = await freshRead(this.http, async () => {
      const where = await viewable();
      const admit = where ? sql` AND (${where})` : sql``;
      plan = r.loadPlan!(
        this.ctx,
        sql`SELECT ${r.list.idExpr} FROM ${r.table} WHERE ${r.list.idExpr} IN (${listed})${admit}`,
      );
      return plan.statements as unknown as Queries;
    });
    return plan.finish([...answers], ids);
  }

  /** `{value, label}` of a select value; the label is the value when the set does not name it. */
  async choice(
    choiceSetId: number | null,
    value: string,
  ): Promise<{ value: string; label: string }> {
    const labels = choiceSetId == null ? null : await this.#choiceSets.load(choiceSetId);
    return { value, label: labels?.get(value) ?? value };
  }
}

export function labelled(rec: ApiRecord, label: string): ApiRecord {
  (rec as Record<symbol, unknown>)[LABEL] = label;
  return rec;
}
