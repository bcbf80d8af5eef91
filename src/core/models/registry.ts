/**
 * Every model the API can point at, keyed by `app_label.model`: its resource and its nested
 * form. Plugins add resolvers for labels known only at run time (custom object types).
 * The types (`ModelInfo`, `Catalog`, the `ModelRegistry` interface) are in `core/context.ts`.
 */
import { type SQL, sql } from "drizzle-orm";
import { unionAll } from "../../db/d1-limits";
import type {
  ApiRecord,
  CachedLookup,
  CachedModel,
  CachedModelRead,
  Catalog,
  Guard,
  ModelInfo,
  ModelRegistry as ModelRegistryApi,
  ReadContext,
  Resolver,
} from "../context";

export type { Catalog, ModelInfo } from "../context";

/** A model a read plans under its proof (`plannedByObjectType`), with its `app_label.model`. */
export type Planned = { label: string; info: ModelInfo };

export class ModelRegistry implements ModelRegistryApi {
  #static = new Map<string, ModelInfo>();
  #resolvers = new Map<string, Resolver>();

  register(info: ModelInfo) {
    this.#static.set(`${info.appLabel}.${info.model}`, info);
  }

  addResolver(appLabel: string, resolver: Resolver) {
    this.#resolvers.set(appLabel, resolver);
  }

  #catalogs = new Map<string, Catalog>();

  /** Lets readers list a run-time app label's models (GraphQL builds a type per model). */
  addCatalog(appLabel: string, catalog: Catalog) {
    this.#catalogs.set(appLabel, catalog);
  }

  /** Every run-time model, and one signature over all of them. */
  async dynamicModels(
    ctx: ReadContext,
    guard?: (g: Guard) => void,
  ): Promise<{ signature: string; models: ModelInfo[] }> {
    const signatures: string[] = [];
    const models: ModelInfo[] = [];
    for (const [label, catalog] of this.#catalogs) {
      const found = await catalog(ctx, guard);
      signatures.push(`${label}=${found.signature}`);
      models.push(...found.models);
    }
    return { signature: signatures.join(";"), models };
  }

  staticModels(): ModelInfo[] {
    return [...this.#static.values()];
  }

  runTimeApps(): Map<string, string[]> {
    const apps = new Map<string, string[]>([...this.#resolvers.keys()].map((app) => [app, []]));
    for (const info of this.#static.values()) apps.get(info.appLabel)?.push(info.model);
    return apps;
  }

  /**
   * Nested records for several models at once: every model with a SQL form is fetched in one
   * UNION ALL statement, the rest one lookup each.
   */
  async nestedMany(
    ctx: ReadContext,
    groups: Array<[ModelInfo, number[]]>,
  ): Promise<Map<ModelInfo, Map<number, ApiRecord>>> {
    const out = new Map<ModelInfo, Map<number, ApiRecord>>();
    const batched = groups.filter(([info, ids]) => info.nestedSql && ids.length);
    for (const [info, ids] of groups) {
      out.set(info, new Map());
      if (!info.nestedSql && ids.length) out.set(info, await info.nested(ctx, ids));
    }
    if (batched.length) {
      // a term per model, grouped within D1's five terms of a compound SELECT (decision 0161)
      const union = unionAll(
        batched.map(
          ([info, ids], k) => sql`SELECT ${k} AS k, id, j FROM (${info.nestedSql!.select(ids)})`,
        ),
      );
      for (const row of (await ctx.db.all(union)) as { k: number; id: number; j: string }[]) {
        const info = batched[Number(row.k)]![0];
        out
          .get(info)!
          .set(Number(row.id), info.nestedSql!.build(ctx, Number(row.id), JSON.parse(row.j)));
      }
    }
    return out;
  }

  #cachedLookups: CachedLookup[] = [];

  addCachedLookup(lookup: CachedLookup) {
    this.#cachedLookups.push(lookup);
  }

  cachedByObjectType(objectTypeId: number): CachedModel | null {
    for (const lookup of this.#cachedLookups) {
      const found = lookup.byObjectType(objectTypeId);
      if (found) return found;
    }
    return null;
  }

  cachedSince(objectTypeId: SQL, since: number): CachedModelRead {
    const reads = this.#cachedLookups.map((lookup) => ({
      lookup,
      read: lookup.cachedSince(objectTypeId, since),
    }));
    return {
      statements: reads.flatMap((r) => r.read.statements),
      settle: async (id, answers) => {
        let at = 0;
        for (const { lookup, read } of reads) {
          const mine = answers.slice(at, (at += read.statements.length));
          if (lookup.byObjectType(id)) return read.settle(id, mine);
        }
        return null;
      },
    };
  }

  typeChangedSince(objectTypeId: SQL, since: number): SQL | null {
    const changed = this.#cachedLookups.map((lookup) => lookup.changedSince(objectTypeId, since));
    return changed.length ? sql`(${sql.join(changed, sql` OR `)})` : null;
  }

  /** Object types whose guard a context's read already carries (one statement per type and read). */
  #plannedIn = new WeakMap<ReadContext, Set<number>>();

  /**
   * The model of object type `objectTypeId` and its label, for a read being built on `ctx` that
   * would plan its objects' nested forms without reading first (decision 0165): a static model
   * (its object type row is cached, and neither ever changes), or a run-time one its plugin caches,
   * proven by a guard riding in that very read — only where the context takes guards. Null: the
   * caller reads it the usual way.
   */
  plannedByObjectType(ctx: ReadContext, objectTypeId: number): Planned | null {
    const row = ctx.services.objectTypes.cachedById(objectTypeId);
    const fixed = row ? this.#static.get(`${row.appLabel}.${row.model}`) : undefined;
    if (fixed) return { label: `${fixed.appLabel}.${fixed.model}`, info: fixed };
    if (!ctx.guard) return null;
    const cached = this.cachedByObjectType(objectTypeId);
    if (!cached) return null;
    const guarded = this.#plannedIn.get(ctx) ?? new Set<number>();
    this.#plannedIn.set(ctx, guarded);
    if (!guarded.has(objectTypeId)) ctx.guard(cached.guard);
    guarded.add(objectTypeId);
    return { label: cached.label, info: cached.info };
  }

  cachedByLabel(label: string): CachedModel | null {
    for (const lookup of this.#cachedLookups) {
      const found = lookup.byLabel(label);
      if (found) return found;
    }
    return null;
  }

  async get(appLabel: string, model: string, ctx: ReadContext): Promise<ModelInfo | null> {
    const found = this.#static.get(`${appLabel}.${model}`);
    if (found) return found;
    const resolver = this.#resolvers.get(appLabel);
    return resolver ? resolver(model, ctx) : null;
  }
}
