/**
 * Which object types a caller may see named (decision 0187): every model registered at start-up
 * (host models, a plugin's own), and a run-time type (a custom object type) only while the caller
 * holds a permission on it, as its endpoints decide (0178). Records, lists, filters and writes ask
 * here, from the caller's permissions in memory.
 */
import { and, or, sql, type SQL, type SQLWrapper } from "drizzle-orm";
import { inJsonList } from "../../db/d1-limits";
import type { ApiRecord, AuthState, Resource, Services } from "../context";
import { holdsAny, modelsHeld } from "./permissions";

type TypeName = { appLabel: string; model: string };

export interface TypeSight {
  /** Nothing is withheld (a superuser; anonymous reads where login is not required). */
  readonly whole: boolean;
  sees(type: TypeName): boolean;
  /** The `object_types` rows the caller sees, as SQL over their two columns; undefined: all. */
  rows(appLabel: SQLWrapper, model: SQLWrapper): SQL | undefined;
}

const WHOLE: TypeSight = { whole: true, sees: () => true, rows: () => undefined };

/** What `auth` sees of the object types: for reads and the answers to writes. */
export function typeSight(services: Services, auth: AuthState): TypeSight {
  const loginRequired = services.config.loginRequired;
  const user = auth.user;
  if (user?.isSuperuser || (!user && !loginRequired)) return WHOLE;
  const apps = services.models.runTimeApps();
  if (!apps.size) return WHOLE;
  const shown = new Map<string, string[]>();
  for (const [app, fixed] of apps)
    shown.set(app, [...fixed, ...(user ? modelsHeld(user, app) : [])]);
  return {
    whole: false,
    sees: (t) =>
      !apps.has(t.appLabel) ||
      apps.get(t.appLabel)!.includes(t.model) ||
      holdsAny(auth, loginRequired, t.appLabel, t.model),
    rows: (appLabel, model) =>
      and(
        ...[...shown].map(([app, models]) =>
          or(sql`${appLabel} <> ${app}`, inJsonList(model, models)),
        ),
      ),
  };
}

/**
 * What a writer sees: as `typeSight`, except a write no user makes (provisioning, the command
 * line) sees every type; an anonymous caller never writes.
 */
export const writerSight = (services: Services, auth: AuthState): TypeSight =>
  auth.user ? typeSight(services, auth) : WHOLE;

/** A label `app.model`, or a `{id, app_label, model}` reference, as a type name; else null. */
function nameOf(value: unknown): TypeName | null {
  if (typeof value === "string") {
    const dot = value.indexOf(".");
    return dot > 0 ? { appLabel: value.slice(0, dot), model: value.slice(dot + 1) } : null;
  }
  if (!value || typeof value !== "object" || Array.isArray(value)) return null;
  const v = value as Record<string, unknown>;
  return typeof v.app_label === "string" && typeof v.model === "string"
    ? { appLabel: v.app_label, model: v.model }
    : null;
}

/** One key's value with the types `sight` does not see withheld; the value itself when none is. */
function withheld(sight: TypeSight, value: unknown): unknown {
  if (Array.isArray(value)) {
    const kept = value.filter((v) => {
      const name = nameOf(v);
      return !name || sight.sees(name);
    });
    return kept.length === value.length ? value : kept;
  }
  const name = nameOf(value);
  if (!name || sight.sees(name)) return value;
  // a reference keeps the id its record stores (as a hidden relation does); a label goes
  return typeof value === "string" ? null : { id: (value as { id?: unknown }).id };
}

/**
 * `records` with the object types their `Resource.typeFields` name left out where `sight` does not
 * see them: a list loses the entry, a reference keeps only its id, a label becomes null. The same
 * array when nothing is withheld (a kept page's bytes stay usable).
 */
export function withholdTypes(
  sight: TypeSight,
  resource: Pick<Resource, "typeFields">,
  records: ApiRecord[],
): ApiRecord[] {
  const keys = resource.typeFields;
  if (sight.whole || !keys?.length) return records;
  let changed = false;
  const out = records.map((rec) => {
    let next = rec;
    for (const key of keys) {
      if (!(key in rec)) continue;
      const value = withheld(sight, rec[key]);
      if (value === rec[key]) continue;
      if (next === rec) next = { ...rec };
      next[key] = value;
    }
    if (next !== rec) changed = true;
    return next;
  });
  return changed ? out : records;
}

/**
 * A write's new list of object type ids for a link field: those the writer named, then those the
 * object holds that the writer does not see (decision 0187: a write keeps what it did not see).
 */
export function keepUnseen(
  sight: TypeSight,
  named: number[],
  held: Array<{ id: number } & TypeName>,
): number[] {
  if (sight.whole) return named;
  const unseen = held.filter((t) => !sight.sees(t) && !named.includes(t.id)).map((t) => t.id);
  return unseen.length ? [...named, ...unseen] : named;
}
