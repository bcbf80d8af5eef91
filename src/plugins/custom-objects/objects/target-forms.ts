/**
 * The nested forms of objects a custom-object write names (a site in an object field), cached per
 * app and proven by the write's own batch (decision 0107) instead of read before it.
 */
import { sql } from "drizzle-orm";
import type { ModelInfo, WriteContext } from "../../../core/context";
import { slotKey } from "../../../core/slots";
import { Prebuilt } from "../../../db/driver-internals";
import { readsCostRoundTrip } from "../../../db/policy";

/** Each referenced object's nested form as SQL made it (its JSON text), by type and id. */
const FORMS = slotKey<Map<string, string>>("custom-objects.target-forms");
const FORMS_MAX = 10_000;
/** Between forms in a print: JSON text escapes control characters, so none holds this one. */
const SEPARATOR = "\u001e";

const keyOf = (info: ModelInfo, id: number) => `${info.appLabel}.${info.model}#${id}`;

/** A request whose guards can ride in its batch, on a database one round trip away. */
const cacheable = (ctx: WriteContext) => !!ctx.guard && readsCostRoundTrip(ctx.services.db);

/**
 * The forms of the ids as one value, their JSON texts as SQL makes them, in id order. One
 * subquery over the ids' JSON array (one bound value): its depth, text and values stay the same
 * however many ids a write names, within D1's limits (decision 0169). A row gone prints nothing,
 * so the print is shorter than the cached one and differs from it.
 */
const printOf = (nested: NestedSql) =>
  sql`coalesce((SELECT group_concat(j, char(30)) FROM (SELECT j FROM (${nested.select(sql.placeholder("ids"))}) ORDER BY id)), '')`;

/** The guard's read and its batch statement, their text rendered once per model. */
interface FormStatements {
  read: Prebuilt<Array<{ p: string }>>;
  guard: Prebuilt<unknown>;
}

function formStatements(nested: NestedSql): FormStatements {
  let found = rendered.get(nested);
  if (!found) {
    found = {
      read: new Prebuilt((orm) => orm.all(sql`SELECT ${printOf(nested)} AS p`)),
      guard: new Prebuilt((orm) =>
        orm.run(
          sql`INSERT INTO write_guard (ok) SELECT ${printOf(nested)} = ${sql.placeholder("print")}`,
        ),
      ),
    };
    rendered.set(nested, found);
  }
  return found;
}

type NestedSql = NonNullable<ModelInfo["nestedSql"]>;
const rendered = new WeakMap<NestedSql, FormStatements>();

/**
 * The forms of `ids` from the cache when it holds them all, with a guard on the request that
 * proves them in the write's batch (or its read phase): any of them changed or gone fails the
 * batch, the entries are dropped and the write runs again reading them. Null when not cached.
 */
export function cachedForms(
  ctx: WriteContext,
  info: ModelInfo,
  ids: number[],
): Array<{ id: number; j: string }> | null {
  const forms = ctx.services.state.get(FORMS);
  if (!forms || !info.nestedSql || !cacheable(ctx)) return null;
  const sorted = [...new Set(ids)].sort((x, y) => x - y);
  const rows: Array<{ id: number; j: string }> = [];
  for (const id of sorted) {
    const j = forms.get(keyOf(info, id));
    if (j === undefined) return null;
    rows.push({ id, j });
  }
  const print = rows.map((r) => r.j).join(SEPARATOR);
  const orm = ctx.services.db.orm;
  const statements = formStatements(info.nestedSql);
  const values = { ids: JSON.stringify(sorted), print };
  ctx.guard!({
    name: `forms of ${info.appLabel}.${info.model}`,
    // built when taken: a write that reads nothing else sends only `batch`
    get statements() {
      return [statements.read.with(orm, values)];
    },
    get batch() {
      return [statements.guard.with(orm, values)];
    },
    async settle([answer]) {
      if ((answer as Array<{ p: string }>)[0]?.p === print) return true;
      for (const id of sorted) forms.delete(keyOf(info, id));
      return false;
    },
  });
  return rows;
}

/** Keeps forms a write's read phase read, for the next write that names them. */
export function rememberForms(
  ctx: WriteContext,
  info: ModelInfo,
  rows: Array<{ id: number; j: string }>,
) {
  if (!info.nestedSql || !cacheable(ctx)) return;
  const forms = ctx.services.state.ensure(FORMS, () => new Map());
  if (forms.size >= FORMS_MAX) forms.clear();
  for (const r of rows) forms.set(keyOf(info, Number(r.id)), r.j);
}
