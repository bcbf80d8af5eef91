/**
 * A declarative host model's creates and updates as one read phase and one atomic write batch
 * (decision 0071): everything the write looks up is read first in one `db.read`; the rows, tags,
 * change records and outbox rows then go in one `db.write`, races caught inside it.
 */
import { tagNotFound, viewableTags } from "./tag-scope";
import { and, eq, getTableColumns, getTableName, sql, type SQL } from "drizzle-orm";
import type { SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";
import { guardChanged } from "../../db/client";
import { inIds, inJsonList, rowsPerStatement } from "../../db/d1-limits";
import { taggedItems, tags as tagsTable } from "../../db/schema";
import { Prebuilt } from "../../db/driver-internals";
import { ErrorCollector, forbidden, notFound, ValidationError, type FieldErrors } from "../errors";
import { defaultFieldForColumn, mapConstraintError, uniqueAnswer } from "../rest/constraints";
import { restrictWhere } from "../auth/restrict";
import { stageChanges, type StagedChange } from "../changes/record";
import { stageRules } from "../events/dispatch";
import type {
  ApiRecord,
  AssumedUpdate,
  ModelInfo,
  ReadContext,
  Resource,
  StagedCheckItem,
  StagedHook,
  StagedOptions,
  StagedUpdate,
  StagedWrites,
  StagedWritten,
  WriteContext,
} from "../context";
import { createdRowId, newIdMarker, nextStamp, ReadPhase, WriteBatch } from "../rest/write-batch";
import { naturalize } from "../../db/natural";
import { noLinks, StagedLinks, type LinkField, type Links, type LinksFound } from "./staged-links";
import { ranOrRefused, runStagedBatch } from "./batch-failure";
import { clashExplainer, tableUniqueKeys, type UniqueKey, type WrittenRow } from "./unique-clash";
import { editedTags, tagEditsOf } from "../rest/tag-edits";
import { stageDeleteHooks } from "../rest/staged-delete-hooks";
import { yieldWhenDue } from "../../turns";
import { MAX_TAGS_PER_VALUE, TOO_MANY_TAGS_MESSAGE } from "../limits";
import { requireBulkFound } from "../rest/bulk-found";
import { CUSTOM_FIELDS_KEY, customFieldsError } from "./custom-fields";

/** What the staged writer needs of `defineModel`'s internals. */
export interface HostModelParts {
  spec: {
    appLabel: string;
    model: string;
    tags?: boolean;
    customFields?: boolean;
    fields: StagedField[];
    naturalOrdering?: { field: string; column: SQLiteColumn };
    derive?: (values: Record<string, unknown>) => void;
    writerFields?: string[];
    stage?: StagedModelHook;
    /** A check that reads nothing (`validateReadsNothing`): it may fill `values`. */
    validate?: (
      ctx: WriteContext,
      values: Record<string, unknown>,
      existing: Record<string, any> | null,
      errors: ErrorCollector,
    ) => Promise<void>;
  };
  table: SQLiteTable & { id: SQLiteColumn };
  resource: Resource;
  keyOf(col: SQLiteColumn): string;
  /** `convertValue` of `define.ts` (no reads for the field types staged here). */
  convertValue(
    ctx: WriteContext,
    f: StagedField,
    raw: unknown,
  ): Promise<{ value: unknown } | { error: string }>;
  serialize(
    ctx: ReadContext,
    rows: Record<string, any>[],
    tags: Map<unknown, ApiRecord[]>,
    related: Map<string, Map<number, ApiRecord>>,
    links?: Map<string, Map<unknown, unknown[]>>,
    decorated?: (rows: Row[], records: ApiRecord[]) => Promise<void>,
  ): Promise<ApiRecord[]>;
  objectTypeId(ctx: ReadContext): Promise<number>;
  nestedTag(
    baseUrl: string,
    t: { id: number; name: string; slug: string; color: string },
  ): ApiRecord;
}

interface StagedField {
  name: string;
  type: string;
  column?: SQLiteColumn;
  required?: boolean;
  readOnly?: boolean;
  related?: string;
  link?: LinkField["link"];
}

/**
 * A model's part in its staged writes (`ModelSpec.stage`): reads added to the phase for the
 * inputs and the stored rows; the answer, called after the phase ran, stands for the model's
 * `validate`, `afterWrite` and `decorate`, and may add guards to the batch.
 */
export type StagedModelHook = (
  ctx: WriteContext,
  phase: ReadPhase,
  inputs: ApiRecord[],
  storedIds: number[],
) => Promise<() => StagedModelPart>;

export interface StagedModelPart {
  /** `validate` and `afterWrite`'s checks on one converted input (links: as the write leaves them). */
  validate?(
    values: Record<string, unknown>,
    existing: Row | null,
    links: Links,
    errors: ErrorCollector,
  ): Promise<void>;
  /** `decorate` from what was read. */
  decorate?(rows: Row[], records: ApiRecord[]): Promise<void>;
  /** Guards that what the checks read still holds, with how to explain a failed one. */
  write?(batch: WriteBatch): void;
  explain?(): Promise<undefined>;
}

/** Field types a staged write converts without reading (fk targets come from the read phase). */
const STAGED_TYPES = new Set([
  "string",
  "text",
  "slug",
  "integer",
  "decimal",
  "boolean",
  "choice",
  "fk",
  "datetime",
  "json",
  "color",
  // hashed in the process
  "password",
  // the process's object types (`ObjectTypes` keeps every row it read: no round trip warm)
  "object_type_ref",
  "object_type_refs",
  "object_types",
  // targets and held links come from the read phase (`staged-links.ts`)
  "m2m",
]);

/** Whether a model's writes can be staged: no hooks that read or write on their own. */
export function stageable(spec: {
  fields: Array<{ type: string }>;
  validate?: unknown;
  validateReadsNothing?: boolean;
  afterWrite?: unknown;
  decorate?: unknown;
  decorateReadsNothing?: boolean;
  stage?: unknown;
}): boolean {
  if (spec.stage) return spec.fields.every((f) => STAGED_TYPES.has(f.type));
  return (
    (!spec.validate || !!spec.validateReadsNothing) &&
    !spec.afterWrite &&
    (!spec.decorate || !!spec.decorateReadsNothing) &&
    spec.fields.every((f) => STAGED_TYPES.has(f.type))
  );
}

/** The tag keys of a tagged model's input. */
const TAG_KEYS = new Set(["tags", "add_tags", "remove_tags"]);

/** Keys every record carries and writes may echo back; ignored on input. */
const READ_ONLY_KEYS = new Set(["id", "url", "display", "display_url", "created", "last_updated"]);

type Row = Record<string, any>;
export type TagRow = {
  id: number;
  name: string;
  slug: string;
  color: string;
  scope: string | null;
};

const fkId = (raw: unknown) =>
  typeof raw === "object" && raw && !Array.isArray(raw) ? (raw as Record<string, unknown>).id : raw;

/** A tag reference's lookup: `[column, value]`, or null when it is not a valid reference. */
function tagRef(item: unknown): ["id" | "slug" | "name", unknown] | null {
  if (typeof item === "number" && Number.isInteger(item)) return ["id", item];
  if (item && typeof item === "object") {
    const o = item as Record<string, unknown>;
    if (typeof o.id === "number") return ["id", o.id];
    if (typeof o.slug === "string") return ["slug", o.slug];
    if (typeof o.name === "string") return ["name", o.name];
  }
  if (typeof item === "string") return ["slug", item];
  return null;
}

type NestedSql = NonNullable<ModelInfo["nestedSql"]>;
/** Each model's nested-form read by a JSON array of ids, built once (decision 0104). */
const NESTED_READS = new WeakMap<NestedSql, Prebuilt<Array<{ id: number; j: string }>>>();
export function nestedRead(nestedSql: NestedSql) {
  let read = NESTED_READS.get(nestedSql);
  if (!read)
    NESTED_READS.set(
      nestedSql,
      (read = new Prebuilt((orm) => orm.all(nestedSql.select(sql.placeholder("ids"))))),
    );
  return read;
}

/** The tags the inputs name (by id, slug or name) with their scopes, as a read of `phase`. */
export function stageTagLookup(
  ctx: WriteContext,
  phase: ReadPhase,
  inputs: ApiRecord[],
  /** Over `t.id`: the tags the caller may name (others are found as absent). */
  nameable?: SQL,
): () => TagRow[] {
  // a longer list is refused as it is resolved: its first items are all there is to look up
  const listed = (raw: unknown) =>
    Array.isArray(raw) ? raw.slice(0, MAX_TAGS_PER_VALUE).map(tagRef) : [];
  // `tags`, and NetBox 4.6's `add_tags` / `remove_tags`
  const refs = inputs.flatMap((i) => [
    ...listed(i.tags),
    ...listed(i.add_tags),
    ...listed(i.remove_tags),
  ]);
  const valid = refs.filter((r) => r !== null);
  if (!valid.length) return () => [];
  const named = (key: "id" | "slug" | "name") => valid.filter((r) => r[0] === key).map((r) => r[1]);
  return phase.add(
    ctx.services.db.orm.all<TagRow>(
      sql`SELECT t.id, t.name, t.slug, t.color, (SELECT json_group_array(x.object_type_id) FROM tag_object_types x WHERE x.tag_id = t.id) AS scope FROM ${tagsTable} t WHERE (${inJsonList(sql`t.id`, named("id"))} OR ${inJsonList(sql`t.slug`, named("slug"))} OR ${inJsonList(sql`t.name`, named("name"))})${nameable ? sql` AND (${nameable})` : sql``}`,
    ),
  );
}

/** `resolveTags` of `define.ts` over the tags a read phase found; `label` is `app_label.model`. */
export function resolveTagRows(
  raw: unknown,
  found: TagRow[],
  objectTypeId: number,
  label: string,
): { tags: TagRow[] } | { error: string } {
  if (raw === null) return { tags: [] };
  if (!Array.isArray(raw)) return { error: "Expected a list of tags." };
  if (raw.length > MAX_TAGS_PER_VALUE) return { error: TOO_MANY_TAGS_MESSAGE };
  const out = new Map<number, TagRow>();
  for (const item of raw) {
    const ref = tagRef(item);
    if (!ref) return { error: `Invalid tag reference: ${JSON.stringify(item)}` };
    const tag = found.find((t) => t[ref[0]] === ref[1]);
    if (!tag) return { error: tagNotFound(item) };
    const scope = JSON.parse(tag.scope ?? "[]") as number[];
    if (scope.length && !scope.includes(objectTypeId))
      return { error: `Tag "${tag.name}" cannot be applied to ${label} objects.` };
    out.set(tag.id, tag);
  }
  return { tags: [...out.values()] };
}

/** The stored side of an update or delete, as the read phase found it. */
interface Stored {
  byId: Map<number, Row>;
  /** Each row's `lastUpdated` as read: the batch's guards compare against it. */
  read: Map<number, string | null>;
  tags: Map<number, TagRow[]>;
  /** Link fields' values and the targets' nested forms as read (and as this write leaves them). */
  links: LinksFound;
  /** The ids the caller may change (or delete); null when no constraint limits them. */
  actOk: Set<number> | null;
  viewOk: Set<number> | null;
}

/** What the read phase found for the inputs: related objects, tags, viewable ids, rules. */
interface Found {
  related: Map<string, Map<number, ApiRecord>>;
  tagRows: TagRow[];
  viewable: Map<string, Set<number>>;
  /** Link fields: targets named, and (after `readStored`) the links stored rows hold. */
  links: LinksFound;
  /** The stored rows' tags (an update's `readStored` fills it): `remove_tags` works on them. */
  storedTags?: Map<number, TagRow[]>;
  /** The model's own staged part (`ModelSpec.stage`), when it has one. */
  model: StagedModelPart | null;
  rules: Awaited<ReturnType<ReturnType<typeof stageRules>>>;
}

/** A column's value when an insert does not give it (the column's default, else null). */
function defaultOf(col: SQLiteColumn): unknown {
  const c = col as SQLiteColumn & { defaultFn?: () => unknown; default?: unknown };
  if (c.defaultFn) return c.defaultFn();
  if (c.hasDefault && c.default !== undefined && typeof c.default !== "object") return c.default;
  return null;
}

/** Runs `step` per item; field errors are collected per item (a bulk's list) or thrown. */
export async function eachInput<T>(
  items: readonly T[],
  bulk: boolean,
  step: (item: T, index: number) => Promise<void>,
) {
  const errors: FieldErrors[] = [];
  let failed = false;
  for (const [i, item] of items.entries()) {
    await yieldWhenDue(); // thousands of items: other requests are answered meanwhile (0184)
    try {
      await step(item, i);
      errors.push({});
    } catch (e) {
      if (!bulk || !(e instanceof ValidationError) || Array.isArray(e.fields)) throw e;
      failed = true;
      errors.push(e.fields);
    }
  }
  if (failed) throw new ValidationError(errors);
}

/** The stored row `id` is there and the caller may view it. */
const visibleStored = (stored: Stored, id: number) =>
  stored.byId.has(id) && (!stored.viewOk || stored.viewOk.has(id));

/**
 * The stored row `id` if the caller may act on it: 404 when missing or not viewable (whatever the
 * action's own constraints say, decision 0152), 403 when viewable but not theirs to act on.
 */
function admitStored(stored: Stored, id: number, resource: Resource, options: StagedOptions): Row {
  const existing = stored.byId.get(id);
  if (!existing || !visibleStored(stored, id))
    throw notFound(`No ${resource.verboseName} with id ${id}.`);
  if (stored.actOk && !stored.actOk.has(id)) throw forbidden();
  options.admit?.(existing);
  options.precondition?.(existing.lastUpdated ?? existing.created ?? null);
  return existing;
}

/** Groups tag rows read with their object's id by that id (order kept). */
function tagsByObject(rows: Array<TagRow & { objectId: number }>): Map<number, TagRow[]> {
  const out = new Map<number, TagRow[]>();
  for (const t of rows) (out.get(t.objectId) ?? out.set(t.objectId, []).get(t.objectId)!).push(t);
  return out;
}

/** The ids a read-phase query returned, as a set (null when there was no query). */
const idSet = (rows: (() => Array<{ id: unknown }>) | null) =>
  rows ? new Set(rows().map((r) => Number(r.id))) : null;

export function stagedWrites(parts: HostModelParts): StagedWrites {
  const writer = new StagedWriter(parts);
  return {
    tagEdits: true,
    create: (ctx, inputs, options) => writer.create(ctx, inputs, options),
    update: (ctx, items, partial, options) => writer.update(ctx, items, partial, options),
    delete: (ctx, ids, options) => writer.remove(ctx, ids, options),
    updateAssumed: (ctx, item, options) => writer.updateAssumed(ctx, item, options),
    createAssumed: (ctx, item, options) => writer.createAssumed(ctx, item, options),
    deleteAssumed: (ctx, item, options) => writer.deleteAssumed(ctx, item, options),
  };
}

/** One host model's staged writes; its fields are what every write of the model shares. */
class StagedWriter {
  readonly spec: HostModelParts["spec"];
  readonly table: HostModelParts["table"];
  readonly keyOf: HostModelParts["keyOf"];
  readonly tableName: string;
  readonly columns: Array<[string, SQLiteColumn]>;
  readonly fkFields: StagedField[];
  readonly fieldsByName: Map<string, StagedField>;
  readonly links: StagedLinks;

  constructor(readonly parts: HostModelParts) {
    this.spec = parts.spec;
    this.table = parts.table;
    this.keyOf = parts.keyOf;
    this.tableName = getTableName(parts.table);
    this.columns = Object.entries(getTableColumns(parts.table)) as Array<[string, SQLiteColumn]>;
    this.fkFields = parts.spec.fields.filter((f) => f.type === "fk");
    this.fieldsByName = new Map(parts.spec.fields.map((f) => [f.name, f]));
    this.links = new StagedLinks(parts.spec.fields);
  }

  orm(ctx: ReadContext) {
    return ctx.services.db.orm;
  }

  /** The read phase's lookups: related objects named by the inputs (or stored), tags, rules. */
  async lookups(
    ctx: WriteContext,
    phase: ReadPhase,
    inputs: ApiRecord[],
    storedIds: number[] = [],
  ) {
    const related = new Map<string, () => Array<{ id: number; j: string }>>();
    const viewable = new Map<string, () => Set<number>>();
    const infos = new Map<string, ModelInfo>();
    for (const f of this.fkFields) {
      const [app, model] = f.related!.split(".") as [string, string];
      const info = await ctx.services.models.get(app, model, ctx);
      if (!info?.nestedSql) continue;
      infos.set(f.name, info);
      const ids = inputs
        .map((i) => (Object.hasOwn(i, f.name) ? fkId(i[f.name]) : null))
        .filter((id): id is number => typeof id === "number" && Number.isInteger(id));
      // a field `validate` fills with the writer: its nested form for the records
      if (this.spec.writerFields?.includes(f.name) && ctx.auth.user) ids.push(ctx.auth.user.id);
      if (!ids.length) continue;
      const unique = [...new Set(ids)];
      related.set(
        f.name,
        phase.add(nestedRead(info.nestedSql).with(this.orm(ctx), { ids: JSON.stringify(unique) })),
      );
      const ok = await this.viewableRelated(ctx, phase, app, model, info, unique);
      if (ok) viewable.set(f.name, ok);
    }
    const tagRows = await this.tagLookup(ctx, phase, inputs);
    const rules = stageRules(ctx, phase, this.spec);
    const links = await this.links.read(ctx, phase, inputs, [], (app, model, info, ids) =>
      this.viewableRelated(ctx, phase, app, model, info, ids),
    );
    const model = await this.spec.stage?.(ctx, phase, inputs, storedIds);
    return async (): Promise<Found> => {
      // nested forms of the related objects read, by field name
      const out = new Map<string, Map<number, ApiRecord>>();
      for (const f of this.fkFields) {
        const forms = new Map<number, ApiRecord>();
        const info = infos.get(f.name);
        for (const r of related.get(f.name)?.() ?? [])
          forms.set(Number(r.id), info!.nestedSql!.build(ctx, Number(r.id), JSON.parse(r.j)));
        out.set(f.name, forms);
      }
      const linksFound = noLinks();
      links(linksFound);
      return {
        related: out,
        links: linksFound,
        model: model?.() ?? null,
        tagRows: tagRows(),
        // per fk field, the named ids the writer may view (absent: all of them)
        viewable: new Map([...viewable].map(([name, ids]) => [name, ids()])),
        rules: await rules(),
      };
    };
  }

  /**
   * Of the related ids `unique`, those the writer may view, as a read of the phase; undefined when
   * it may view them all. An object the writer may not view answers as an unknown id (decision
   * 0064; `viewableRefs`).
   */
  async viewableRelated(
    ctx: WriteContext,
    phase: ReadPhase,
    app: string,
    model: string,
    info: ModelInfo,
    unique: number[],
  ): Promise<(() => Set<number>) | undefined> {
    const user = ctx.auth.user;
    if (!user || user.isSuperuser) return undefined;
    const target = info.resource;
    const self = app === "users" && model === "user" ? [user.id] : [];
    const where = target
      ? await restrictWhere(ctx, ctx.auth, "view", target)
      : user.permissions.has(`${app}.view_${model}`)
        ? undefined
        : sql`0`;
    if (!where) return undefined;
    const rows = target
      ? phase.add(
          this.orm(ctx)
            .select({ id: sql<number>`${target.list.idExpr}` })
            .from(target.table)
            .where(
              and(
                sql`${target.list.idExpr} IN (${sql.join(
                  unique.map((i) => sql`${i}`),
                  sql`, `,
                )})`,
                where,
              ),
            ),
        )
      : () => [] as Array<{ id: number }>;
    return () => new Set([...rows().map((r) => Number(r.id)), ...self]);
  }

  /** The tags the inputs name (by id, slug or name) with their scopes, as a read of the phase. */
  async tagLookup(ctx: WriteContext, phase: ReadPhase, inputs: ApiRecord[]) {
    if (!this.spec.tags) return () => [] as TagRow[];
    // those the caller may view; an object's own tags come from its stored side (`nameable`)
    return stageTagLookup(ctx, phase, inputs, await viewableTags(ctx, sql`t.id`));
  }

  /** The tags a write of `existing` may name: those the lookup found, and those it holds. */
  nameable(found: Found, existing: Row | null): TagRow[] {
    const held = existing ? (found.storedTags?.get(existing.id) ?? []) : [];
    return held.length ? [...found.tagRows, ...held] : found.tagRows;
  }

  /** `resolveTags` of `define.ts` over the tags the read phase found. */
  resolveTags(
    raw: unknown,
    found: TagRow[],
    objectTypeId: number,
  ): { tags: TagRow[] } | { error: string } {
    return resolveTagRows(raw, found, objectTypeId, `${this.spec.appLabel}.${this.spec.model}`);
  }

  /** `convertInput` of `define.ts`, with related objects and tags from the read phase. */
  async convert(
    ctx: WriteContext,
    input: ApiRecord,
    existing: Row | null,
    partial: boolean,
    found: Found,
    objectTypeId: number,
  ) {
    const { spec, keyOf } = this;
    const errors = new ErrorCollector();
    const values: Record<string, unknown> = {};
    let tags: TagRow[] | null = null;
    const links: Links = new Map();
    const edited = this.foldTagEdits(input, existing, found, objectTypeId);
    if (edited) tags = edited;
    for (const key of Object.keys(input)) {
      if (key === CUSTOM_FIELDS_KEY && spec.customFields) {
        const error = customFieldsError(input[key]);
        if (error) errors.add(key, error);
      } else if (
        !this.fieldsByName.has(key) &&
        !READ_ONLY_KEYS.has(key) &&
        !(spec.tags && TAG_KEYS.has(key))
      )
        errors.add(key, "Unknown field.");
    }
    for (const f of spec.fields) {
      if (f.readOnly) continue;
      if (!Object.hasOwn(input, f.name)) {
        if (f.required && (!existing || !partial) && existing?.[keyOf(f.column!)] == null)
          errors.add(f.name, "This field is required.");
        continue;
      }
      const raw = input[f.name];
      if (f.type === "fk" && raw !== null) {
        const id = fkId(raw);
        if (typeof id !== "number" || !Number.isInteger(id))
          errors.add(f.name, "Incorrect type. Expected pk value.");
        else if (
          !found.related.get(f.name)?.has(id) ||
          // hidden from the writer: unknown, unless the object holds it already (a PUT echoes it)
          (found.viewable.get(f.name)?.has(id) === false && existing?.[keyOf(f.column!)] !== id)
        )
          errors.add(f.name, `Related object not found using the provided numeric ID: ${id}`);
        else values[keyOf(f.column!)] = id;
        continue;
      }
      if (f.type === "m2m" || f.type === "object_types") {
        const result = await this.links.convert(ctx, f, raw, found.links, existing?.id ?? null);
        if ("error" in result) errors.add(f.name, result.error);
        else links.set(f.name, result.value);
        continue;
      }
      const result = await this.parts.convertValue(ctx, f, raw);
      if ("error" in result) errors.add(f.name, result.error);
      else values[keyOf(f.column!)] = result.value;
    }
    if (spec.tags && Object.hasOwn(input, "tags")) {
      const res = this.resolveTags(input.tags, this.nameable(found, existing), objectTypeId);
      if ("error" in res) errors.add("tags", res.error);
      else tags = res.tags.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    }
    // the model's staged checks (`ModelSpec.stage`, over what the phase read: the links as the
    // write leaves them), else a check that reads nothing (`stageable` admits no other)
    if (errors.empty && found.model?.validate) {
      const held = existing ? this.storedLinksOf(found.links, existing.id) : null;
      await found.model.validate(values, existing, new Map([...(held ?? []), ...links]), errors);
    } else if (errors.empty) await spec.validate?.(ctx, values, existing, errors);
    errors.throwIfAny();
    this.naturalize(values);
    spec.derive?.(values);
    return { values, tags, links };
  }

  /**
   * `add_tags` / `remove_tags` (`core/rest/tag-edits.ts`) over the tags the read phase found: the
   * object's tags with those added and removed, sorted; null when the input has neither.
   */
  foldTagEdits(
    input: ApiRecord,
    existing: Row | null,
    found: Found,
    objectTypeId: number,
  ): TagRow[] | null {
    if (!this.spec.tags) return null;
    const edits = tagEditsOf(input, existing !== null);
    if (!edits) return null;
    const resolve = (field: string, raw: unknown) => {
      const r = this.resolveTags(raw, this.nameable(found, existing), objectTypeId);
      if ("error" in r) throw ValidationError.field(field, r.error);
      return r.tags;
    };
    const added = edits.adding ? resolve("add_tags", edits.add) : [];
    const removed = edits.removing ? resolve("remove_tags", edits.remove) : [];
    const held = existing ? (found.storedTags?.get(existing.id) ?? []) : [];
    const rows = new Map([...held, ...added].map((t) => [t.id, t]));
    const ids = (tags: TagRow[]) => tags.map((t) => t.id);
    return editedTags(ids(held), ids(added), ids(removed))
      .map((id) => rows.get(id)!)
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** Fills the natural-ordering column from its source field when the write sets that field. */
  naturalize(values: Record<string, unknown>) {
    const ordering = this.spec.naturalOrdering;
    if (!ordering) return;
    const source = this.fieldsByName.get(ordering.field)?.column;
    if (source && Object.hasOwn(values, this.keyOf(source)))
      values[this.keyOf(ordering.column)] = naturalize(values[this.keyOf(source)] as string | null);
  }

  /** The nested tags of a record from tag rows (sorted by name, as `load` reads them). */
  nestedTags(ctx: ReadContext, rows: TagRow[]) {
    return rows.map((t) => this.parts.nestedTag(ctx.baseUrl, t));
  }

  /** Statements that set an object's tags (replacing what it had when `replace`). */
  stageTags(
    ctx: WriteContext,
    batch: WriteBatch,
    objectTypeId: number,
    objectId: number | SQL,
    tags: TagRow[],
    replace: boolean,
  ) {
    if (replace)
      batch.add(
        this.orm(ctx)
          .delete(taggedItems)
          .where(
            and(
              eq(taggedItems.objectTypeId, objectTypeId),
              sql`${taggedItems.objectId} = ${objectId}`,
            ),
          ),
      );
    // rows per INSERT within D1's bound values (decision 0125)
    const perStatement = rowsPerStatement(3);
    for (let s = 0; s < tags.length; s += perStatement)
      batch.add(
        this.orm(ctx).run(
          sql`INSERT INTO "tagged_items" ("tag_id", "object_type_id", "object_id") VALUES ${sql.join(
            tags
              .slice(s, s + perStatement)
              .map((t) => sql`(${t.id}, ${objectTypeId}, ${objectId})`),
            sql`, `,
          )}`,
        ),
      );
  }

  /** A guard that fails the batch unless `where` admits all `n` rows `ids` selects (403 after). */
  stagePermission(ctx: WriteContext, batch: WriteBatch, ids: SQL, n: number, where: SQL) {
    const admitted = this.orm(ctx)
      .select({ n: sql<number>`count(*)` })
      .from(this.table)
      .where(and(ids, where));
    batch.add(this.orm(ctx).run(sql`INSERT INTO write_guard (ok) SELECT (${admitted}) = ${n}`));
  }

  async create(
    ctx: WriteContext,
    inputs: ApiRecord[],
    options: StagedOptions,
  ): Promise<StagedWritten[]> {
    // the routed resource's limits (a wrapper's owner column or scope) are the ones that hold
    const resource = options.resource;
    const objectTypeId = await this.parts.objectTypeId(ctx);
    const addWhere = options.authorised
      ? undefined
      : await restrictWhere(ctx, ctx.auth, "add", resource);
    const phase = new ReadPhase();
    const lookedUp = await this.lookups(ctx, phase, inputs);
    const checked = await options.check?.(
      ctx,
      phase,
      inputs.map((input) => ({ id: null, input })),
    );
    await phase.run(ctx);
    const found = await lookedUp();
    const now = nextStamp(null);
    const rows: Row[] = [];
    const tags: Array<TagRow[] | null> = [];
    const links: Links[] = [];
    await eachInput(inputs, options.bulk, async (input, k) => {
      const c = await this.convert(ctx, input, null, false, found, objectTypeId);
      const row: Row = {};
      for (const [key, col] of this.columns)
        row[key] = Object.hasOwn(c.values, key) ? c.values[key] : defaultOf(col);
      row.lastUpdated = now;
      row.created = options.created?.[k] ?? now;
      rows.push(row);
      tags.push(c.tags);
      links.push(c.links);
    });
    const verdict = await checked?.(
      rows.map((row, k) => ({
        id: null,
        input: inputs[k]!,
        row,
        existing: null,
        links: links[k]!,
        storedLinks: new Map(),
      })),
    );
    const batch = new WriteBatch();
    const staged = await this.stageCreates(ctx, batch, { rows, tags, links, found }, options, {
      objectTypeId,
      addWhere,
      verdict,
    });
    await this.runBatch(ctx, batch, "add", new Map(), false, explainers(verdict, found.model), {
      rows: rows.map((values) => ({ id: null, values })),
      bulk: !!options.bulk,
    });
    return staged();
  }

  /**
   * The batch of a create of `rows`: their INSERTs (under `options.ids` where given), tags,
   * links, change records and the caller's add constraints. The answer, once the batch ran: the
   * objects written.
   */
  async stageCreates(
    ctx: WriteContext,
    batch: WriteBatch,
    made: { rows: Row[]; tags: Array<TagRow[] | null>; links: Links[]; found: Found },
    options: StagedOptions,
    o: { objectTypeId: number; addWhere: SQL | undefined; verdict?: StagedHook },
  ): Promise<() => Promise<StagedWritten[]>> {
    const { rows, tags, links, found } = made;
    const { objectTypeId, addWhere, verdict } = o;
    const resource = options.resource;
    const records = await this.newRecords(ctx, rows, tags, links, found);
    const fixed = options.ids;
    const ids = await this.stageInserts(ctx, batch, objectTypeId, rows, tags, links, fixed);
    verdict?.write(batch);
    found.model?.write?.(batch);
    const n = rows.length;
    const texts = await stageChanges(
      ctx,
      batch,
      resource,
      objectTypeId,
      found.rules,
      records.map((r, k) => ({
        action: "create",
        id: createdRowId(this.tableName, k, n, fixed),
        prechange: null,
        postchange: r,
      })),
    );
    if (addWhere)
      this.stagePermission(
        ctx,
        batch,
        fixed
          ? inIds(this.table.id, fixed)
          : sql`${this.table.id} > (SELECT max("id") FROM ${this.table}) - ${n}`,
        n,
        addWhere,
      );
    return async () => {
      ids.sort((a, b) => a - b);
      const written: StagedWritten[] = [];
      for (const [k, json] of texts().entries()) {
        await yieldWhenDue(); // thousands of records to parse: turns meanwhile (0186)
        written.push({ id: ids[k]!, record: JSON.parse(json!), json });
      }
      return written;
    };
  }

  /** The records as `load` will read them, the id still SQLite's to give (`newIdMarker()`). */
  async newRecords(
    ctx: WriteContext,
    rows: Row[],
    tags: Array<TagRow[] | null>,
    links: Links[],
    found: Found,
  ): Promise<ApiRecord[]> {
    const records: ApiRecord[] = [];
    for (const [i, row] of rows.entries()) {
      await yieldWhenDue();
      records.push(
        ...(await this.parts.serialize(
          ctx,
          [{ ...row, id: newIdMarker() }],
          new Map([[newIdMarker(), tags[i] ? this.nestedTags(ctx, tags[i]) : []]]),
          found.related,
          await this.links.recordLinks(ctx, found.links, [[newIdMarker(), links[i]!]]),
          decorator(found.model),
        )),
      );
    }
    return records;
  }

  /**
   * Multi-row INSERTs of `rows` and their tags; the returned list fills with the new ids.
   * Thousands of rows give the event loop turns between statements (decision 0186).
   */
  async stageInserts(
    ctx: WriteContext,
    batch: WriteBatch,
    objectTypeId: number,
    rows: Row[],
    tags: Array<TagRow[] | null>,
    links: Links[],
    fixed?: number[],
  ): Promise<number[]> {
    const ids: number[] = [];
    const withId = ({ id: _id, ...r }: Row, k: number) => (fixed ? { id: fixed[k], ...r } : r);
    // a value per column at most: rows per INSERT within D1's bound values (decision 0125)
    const perStatement = rowsPerStatement(this.columns.length);
    for (let s = 0; s < rows.length; s += perStatement) {
      await yieldWhenDue();
      batch.add(
        this.orm(ctx)
          .insert(this.table)
          .values(rows.slice(s, s + perStatement).map((r, k) => withId(r, s + k)) as never)
          .returning({ id: this.table.id }),
        (out) => ids.push(...(out as Array<{ id: number }>).map((r) => r.id)),
      );
    }
    const n = rows.length;
    for (const [k, t] of tags.entries()) {
      if (!t) continue;
      await yieldWhenDue();
      this.stageTags(ctx, batch, objectTypeId, createdRowId(this.tableName, k, n, fixed), t, false);
    }
    for (const [k, l] of links.entries()) {
      await yieldWhenDue();
      this.links.stage(ctx, batch, createdRowId(this.tableName, k, n, fixed), l, false);
    }
    return ids;
  }

  /** The stored rows of `ids`, each with its related objects' nested forms (`__fk_<field>`). */
  readExisting(
    ctx: WriteContext,
    phase: ReadPhase,
    ids: number[],
    infos: Map<string, ModelInfo | null>,
  ) {
    const nestedColumns: Record<string, SQL> = {};
    for (const f of this.fkFields) {
      const info = infos.get(f.name);
      if (info?.nestedSql?.selectOne)
        nestedColumns[`__fk_${f.name}`] = info.nestedSql.selectOne(
          sql.raw(`"${this.tableName}"."${f.column!.name}"`),
        );
    }
    const rows = phase.add(
      this.orm(ctx)
        .select({ ...getTableColumns(this.table), ...nestedColumns })
        .from(this.table)
        .where(inIds(this.table.id, ids)),
    );
    return rows as () => Row[];
  }

  /** The ids among `ids` that `where` admits, as a query of the read phase. */
  admittedQuery(ctx: WriteContext, ids: number[], where: SQL) {
    return this.orm(ctx)
      .select({ id: this.table.id })
      .from(this.table)
      .where(and(inIds(this.table.id, ids), where));
  }

  /** The stored tags of `ids`, as a query of the read phase (ordered by name, as `load`). */
  storedTagsQuery(ctx: WriteContext, objectTypeId: number, ids: number[]) {
    return this.orm(ctx)
      .select({
        objectId: taggedItems.objectId,
        id: tagsTable.id,
        name: tagsTable.name,
        slug: tagsTable.slug,
        color: tagsTable.color,
        scope: sql<null>`NULL`,
      })
      .from(taggedItems)
      .innerJoin(tagsTable, eq(tagsTable.id, taggedItems.tagId))
      .where(and(eq(taggedItems.objectTypeId, objectTypeId), inIds(taggedItems.objectId, ids)))
      .orderBy(tagsTable.name);
  }

  /** The model info of each fk field's target (null when it is not registered). */
  async relatedInfos(ctx: WriteContext): Promise<Map<string, ModelInfo | null>> {
    const infos = new Map<string, ModelInfo | null>();
    for (const f of this.fkFields) {
      const [app, model] = f.related!.split(".") as [string, string];
      infos.set(f.name, await ctx.services.models.get(app, model, ctx));
    }
    return infos;
  }

  /**
   * Adds the reads of an update's or delete's stored side to the phase: the rows of `ids`, their
   * tags, and which of them `actWhere` / `viewWhere` admit. The answer, called after the phase
   * ran, moves the rows' related nested forms into `related` and tells the stored side.
   */
  async readStored(
    ctx: WriteContext,
    phase: ReadPhase,
    objectTypeId: number,
    ids: number[],
    actWhere: SQL | undefined,
    viewWhere: SQL | undefined,
  ) {
    const infos = await this.relatedInfos(ctx);
    const existingRows = this.readExisting(ctx, phase, ids, infos);
    const existingTags = this.spec.tags
      ? phase.add(this.storedTagsQuery(ctx, objectTypeId, ids))
      : () => [] as Array<TagRow & { objectId: number }>;
    const mayAct = actWhere ? phase.add(this.admittedQuery(ctx, ids, actWhere)) : null;
    const mayView = viewWhere ? phase.add(this.admittedQuery(ctx, ids, viewWhere)) : null;
    const storedLinks = await this.links.read(ctx, phase, [], ids, async () => undefined);
    return (related: Map<string, Map<number, ApiRecord>>, links: LinksFound): Stored => {
      storedLinks(links);
      const byId = new Map<number, Row>();
      const read = new Map<number, string | null>();
      for (const row of existingRows()) {
        // the stored related objects' nested forms join those the inputs name
        takeNested(ctx, row, related, infos);
        byId.set(row.id, row);
        read.set(row.id, row.lastUpdated ?? null);
      }
      const tags = tagsByObject(existingTags() as Array<TagRow & { objectId: number }>);
      return { byId, read, tags, links, actOk: idSet(mayAct), viewOk: idSet(mayView) };
    };
  }

  /**
   * Runs the batch; constraint failures map to 400/409 as in a transaction, a failed guard is
   * explained by `runStagedBatch` (a delete hook's answer, a lost race, else 403).
   */
  runBatch(
    ctx: WriteContext,
    batch: WriteBatch,
    action: "add" | "change" | "delete",
    read: Map<number, string | null>,
    preconditioned: boolean,
    hooks: StagedHook[] = [],
    written?: { rows: WrittenRow[]; bulk: boolean },
  ): Promise<"transaction" | undefined> {
    return runStagedBatch(ctx, batch, () => batch.run(ctx), {
      action,
      read,
      preconditioned,
      hooks,
      constraintError: (e) => mapConstraintError(e, this.parts.resource),
      clashes: written
        ? () =>
            clashExplainer(
              this.orm(ctx),
              this.table as never,
              this.uniqueKeys(),
              written.rows,
              written.bulk,
            )
        : undefined,
      stamps: (ids) =>
        this.orm(ctx)
          .select({ id: this.table.id, stamp: (this.table as any).lastUpdated })
          .from(this.table)
          .where(inIds(this.table.id, ids)),
    });
  }

  #uniqueKeys: UniqueKey[] | undefined;

  /** The table's unique keys, each with its answer (made once). */
  uniqueKeys(): UniqueKey[] {
    const resource = this.parts.resource;
    this.#uniqueKeys ??= tableUniqueKeys(
      this.table,
      (fields) => uniqueAnswer(resource?.verboseName ?? "object", fields),
      (column) => resource?.fieldForColumn?.(column) ?? defaultFieldForColumn(column),
    );
    return this.#uniqueKeys;
  }

  async update(
    ctx: WriteContext,
    items: StagedUpdate[],
    partial: boolean,
    options: StagedOptions,
  ): Promise<StagedWritten[]> {
    // the routed resource's limits (a wrapper's owner column or scope) are the ones that hold
    const resource = options.resource;
    const objectTypeId = await this.parts.objectTypeId(ctx);
    const ids = [...new Set(items.map((i) => i.id))];
    const changeWhere = await restrictWhere(ctx, ctx.auth, "change", resource);
    const viewWhere = await restrictWhere(ctx, ctx.auth, "view", resource);
    const phase = new ReadPhase();
    const lookedUp = await this.lookups(
      ctx,
      phase,
      items.map((i) => i.input),
      ids,
    );
    const storedRead = await this.readStored(ctx, phase, objectTypeId, ids, changeWhere, viewWhere);
    const checked = await options.check?.(ctx, phase, items);
    await phase.run(ctx);
    const found = await lookedUp();
    const stored = storedRead(found.related, found.links);
    found.storedTags = stored.tags;
    const batch = new WriteBatch();
    const changes: StagedChange[] = [];
    const seen: StagedCheckItem[] = [];
    // the properties each item sets: a unique key it leaves alone cannot clash (decision 0146)
    const touched = new Map<StagedCheckItem, Set<string>>();
    if (options.bulk)
      requireBulkFound(
        items.map((i) => i.id),
        (id) => visibleStored(stored, id),
      );
    await eachInput(items, options.bulk, async ({ id, input }) => {
      const existing = admitStored(stored, id, resource, options);
      const c = await this.convert(ctx, input, existing, partial, found, objectTypeId);
      const item: StagedCheckItem = {
        id,
        input,
        row: { ...existing, ...c.values },
        existing,
        links: c.links,
        storedLinks: this.storedLinksOf(stored.links, id),
      };
      seen.push(item);
      touched.set(item, new Set(Object.keys(c.values)));
      changes.push(await this.stageUpdate(ctx, batch, stored, found, objectTypeId, id, c));
    });
    const verdict = await checked?.(seen);
    verdict?.write(batch);
    found.model?.write?.(batch);
    const texts = await stageChanges(ctx, batch, resource, objectTypeId, found.rules, changes);
    if (changeWhere)
      this.stagePermission(ctx, batch, inIds(this.table.id, ids), ids.length, changeWhere);
    await this.runBatch(
      ctx,
      batch,
      "change",
      stored.read,
      !!options.precondition,
      explainers(verdict, found.model),
      {
        rows: seen.map((s) => ({ id: s.id, values: s.row, touched: touched.get(s) })),
        bulk: !!options.bulk,
      },
    );
    return texts().map((json, k) => ({
      id: changes[k]!.id as number,
      record: json === undefined ? changes[k]!.postchange! : JSON.parse(json),
      json,
    }));
  }

  /**
   * `StagedWrites.createAssumed` (decision 0139): a deleted object put back under its id with no
   * read, its related objects' nested forms and its tags taken from the input (the change
   * record's). Null where something must be read first (links, related objects the caller's view
   * is limited on, rules not cached, a model's own checks); "refused" when the batch refused it.
   */
  async createAssumed(
    ctx: WriteContext,
    item: { id: number; input: ApiRecord },
    options: StagedOptions,
  ): Promise<StagedWritten | "refused" | null> {
    if (this.spec.stage || this.spec.validate || options.check || options.admit) return null;
    const { input } = item;
    const shown = new Set([...this.fkFields.map((f) => f.name), "tags"]);
    if (this.links.fields.some((f) => [input[f.name] ?? []].flat().length)) return null;
    const objectTypeId = await this.parts.objectTypeId(ctx);
    const addWhere = await restrictWhere(ctx, ctx.auth, "add", options.resource);
    const phase = new ReadPhase();
    const rest = Object.fromEntries(Object.entries(input).filter(([k]) => !shown.has(k)));
    const lookedUp = await this.lookups(ctx, phase, [rest]);
    if (phase.size || !(await this.viewsAllShown(ctx, input))) return null;
    await phase.run(ctx); // nothing to read: the request's guards lead the batch (0107)
    const found = await lookedUp();
    for (const f of this.fkFields) {
      const v = input[f.name];
      if (v && typeof v === "object" && typeof (v as ApiRecord).id === "number")
        found.related.get(f.name)?.set((v as { id: number }).id, v as ApiRecord);
    }
    found.tagRows = [input.tags ?? []].flat().map((t) => ({ ...(t as TagRow), scope: null }));
    const c = await this.convert(ctx, input, null, false, found, objectTypeId).catch((e) =>
      e instanceof ValidationError ? null : Promise.reject(e),
    );
    if (!c) return null;
    const row: Row = {};
    for (const [key, col] of this.columns)
      row[key] = Object.hasOwn(c.values, key) ? c.values[key] : defaultOf(col);
    row.lastUpdated = nextStamp(null);
    row.created = options.created?.[0] ?? row.lastUpdated;
    const made = { rows: [row], tags: [c.tags], links: [c.links], found };
    const batch = new WriteBatch();
    const fixed = { ...options, ids: [item.id] };
    const written = await this.stageCreates(ctx, batch, made, fixed, { objectTypeId, addWhere });
    if (!(await ranOrRefused(ctx, batch, this.parts.resource))) return "refused";
    return (await written())[0] ?? null;
  }

  /**
   * `StagedWrites.deleteAssumed` (decision 0139): one object deleted with no read, as `before`
   * states it; the batch proves it (the caller's delete constraints, the hooks' guards, the row's
   * stamp). Null where something must be read first (a model's own part, a hook's, rules).
   */
  async deleteAssumed(
    ctx: WriteContext,
    item: { id: number; stamp: string; before: ApiRecord },
    options: StagedOptions,
  ): Promise<"deleted" | "refused" | null> {
    if (this.spec.stage || options.check || options.admit) return null;
    const target = { appLabel: this.spec.appLabel, model: this.spec.model, id: item.id };
    const hooks = ctx.services.deleteHooks.map((h) => h.stageAssumed?.(ctx, target) ?? null);
    if (hooks.some((h) => !h)) return null;
    const resource = options.resource;
    const objectTypeId = await this.parts.objectTypeId(ctx);
    const deleteWhere = await restrictWhere(ctx, ctx.auth, "delete", resource);
    // a hidden object is refused as a missing one (decision 0152): its view constraints guard too
    const viewWhere = await restrictWhere(ctx, ctx.auth, "view", resource);
    const phase = new ReadPhase();
    const rules = stageRules(ctx, phase, this.spec);
    if (phase.size) return null;
    await phase.run(ctx); // nothing to read: the request's guards lead the batch (0107)
    const batch = new WriteBatch();
    const row = eq(this.table.id, item.id);
    if (viewWhere) this.stagePermission(ctx, batch, row, 1, viewWhere);
    if (deleteWhere) this.stagePermission(ctx, batch, row, 1, deleteWhere);
    for (const hook of hooks) hook!.write(batch);
    batch.add(
      this.orm(ctx)
        .delete(this.table)
        .where(and(row, eq((this.table as any).lastUpdated, item.stamp))),
    );
    batch.add(guardChanged(this.orm(ctx)));
    const change: StagedChange = {
      action: "delete",
      id: item.id,
      prechange: item.before,
      postchange: null,
    };
    await stageChanges(ctx, batch, resource, objectTypeId, await rules(), [change]);
    if (!(await ranOrRefused(ctx, batch, this.parts.resource))) return "refused";
    return "deleted";
  }

  /** Whether the caller's view of every object `input` shows nested is unlimited (no read). */
  async viewsAllShown(ctx: WriteContext, input: ApiRecord): Promise<boolean> {
    for (const f of this.fkFields) {
      const v = input[f.name];
      if (!v || typeof v !== "object") continue;
      const [app, model] = f.related!.split(".") as [string, string];
      const info = await ctx.services.models.get(app, model, ctx);
      if (!info?.nestedSql) return false;
      const scratch = new ReadPhase();
      const id = (v as { id: number }).id;
      if (await this.viewableRelated(ctx, scratch, app, model, info, [id])) return false;
    }
    return true;
  }

  /**
   * `StagedWrites.updateAssumed` (decision 0139): one object's update with no read, its stored
   * side as the caller states it, proven by the batch (the row's stamp as assumed, the caller's
   * change constraints on the row before and after). Null when something must be read first
   * (related objects, tags, links, rules not cached, a model's own checks of the stored row);
   * "refused" when the batch refused it. Nothing is written either way.
   */
  async updateAssumed(
    ctx: WriteContext,
    item: AssumedUpdate,
    options: StagedOptions,
  ): Promise<StagedWritten | "refused" | null> {
    // a wrapper's checks of the stored row (0065, 0092) read it: the ordinary update
    if (this.spec.stage || this.spec.validate || options.check || options.admit) return null;
    const resource = options.resource;
    const objectTypeId = await this.parts.objectTypeId(ctx);
    const changeWhere = await restrictWhere(ctx, ctx.auth, "change", resource);
    // a hidden object is refused as a missing one (decision 0152): its view constraints guard too
    const viewWhere = await restrictWhere(ctx, ctx.auth, "view", resource);
    const phase = new ReadPhase();
    const lookedUp = await this.lookups(ctx, phase, [item.input]);
    if (phase.size) return null;
    // nothing to read: the request's guards lead the batch instead (decision 0107)
    await phase.run(ctx);
    const found = await lookedUp();
    const c = await this.convert(ctx, item.input, { id: item.id }, true, found, objectTypeId).catch(
      (e) => (e instanceof ValidationError ? null : Promise.reject(e)),
    );
    if (!c || c.tags || c.links.size) return null;
    const batch = new WriteBatch();
    const row = eq(this.table.id, item.id);
    if (viewWhere) this.stagePermission(ctx, batch, row, 1, viewWhere);
    if (changeWhere) this.stagePermission(ctx, batch, row, 1, changeWhere);
    const stamp = nextStamp(item.stamp);
    batch.add(
      this.orm(ctx)
        .update(this.table)
        .set({ ...c.values, lastUpdated: stamp } as never)
        .where(and(row, eq((this.table as any).lastUpdated, item.stamp))),
    );
    batch.add(guardChanged(this.orm(ctx)));
    const change: StagedChange = {
      action: "update",
      id: item.id,
      prechange: item.before,
      postchange: item.after(stamp),
    };
    const texts = await stageChanges(ctx, batch, resource, objectTypeId, found.rules, [change]);
    if (changeWhere) this.stagePermission(ctx, batch, row, 1, changeWhere);
    if (!(await ranOrRefused(ctx, batch, this.parts.resource))) return "refused";
    const json = texts()[0];
    return {
      id: item.id,
      record: json === undefined ? change.postchange! : JSON.parse(json),
      json,
    };
  }

  /**
   * Stages one row's guarded UPDATE and its tags, and records the row as written in `stored` (an
   * item later in the request sees it so); answers the change to log.
   */
  async stageUpdate(
    ctx: WriteContext,
    batch: WriteBatch,
    stored: Stored,
    found: Found,
    objectTypeId: number,
    id: number,
    {
      values,
      tags,
      links,
    }: { values: Record<string, unknown>; tags: TagRow[] | null; links: Links },
  ): Promise<StagedChange> {
    const existing = stored.byId.get(id)!; // as `admitStored` answered it
    const stamp = nextStamp(existing.lastUpdated);
    const after: Row = { ...existing, ...values, lastUpdated: stamp };
    const beforeTags = stored.tags.get(id) ?? [];
    const beforeLinks = this.storedLinksOf(stored.links, id);
    const afterLinks = new Map([...beforeLinks, ...links]);
    const [before] = await this.parts.serialize(
      ctx,
      [existing],
      new Map([[id, this.nestedTags(ctx, beforeTags)]]),
      found.related,
      await this.links.recordLinks(ctx, stored.links, [[id, beforeLinks]]),
      decorator(found.model),
    );
    const [post] = await this.parts.serialize(
      ctx,
      [after],
      new Map([[id, this.nestedTags(ctx, tags ?? beforeTags)]]),
      found.related,
      await this.links.recordLinks(ctx, stored.links, [[id, afterLinks]]),
      decorator(found.model),
    );
    // conditioned on the stamp read: a write that came between fails the guard after it
    batch.add(
      this.orm(ctx)
        .update(this.table)
        .set({ ...values, lastUpdated: stamp } as never)
        .where(
          and(eq(this.table.id, id), eq((this.table as any).lastUpdated, existing.lastUpdated)),
        ),
    );
    batch.add(guardChanged(this.orm(ctx)));
    stored.byId.set(id, after);
    if (tags) {
      this.stageTags(ctx, batch, objectTypeId, id, tags, true);
      stored.tags.set(id, tags);
    }
    this.links.stage(ctx, batch, id, links, true);
    for (const [name, targets] of links) {
      const byOwn = stored.links.stored.get(name) ?? new Map<number, number[]>();
      stored.links.stored.set(name, byOwn.set(id, targets));
    }
    return { action: "update", id, prechange: before!, postchange: post! };
  }

  /** The links stored row `id` holds (as read, or as this write leaves them), by field. */
  storedLinksOf(found: LinksFound, id: number): Links {
    return new Map(this.links.fields.map((f) => [f.name, found.stored.get(f.name)?.get(id) ?? []]));
  }

  async remove(
    ctx: WriteContext,
    ids: number[],
    options: StagedOptions,
  ): Promise<"transaction" | undefined> {
    // the routed resource's limits (a wrapper's owner column or scope) are the ones that hold
    const resource = options.resource;
    const hooks = ctx.services.deleteHooks;
    if (hooks.some((h) => !h.stage)) return "transaction";
    const objectTypeId = await this.parts.objectTypeId(ctx);
    const unique = [...new Set(ids)];
    const deleteWhere = await restrictWhere(ctx, ctx.auth, "delete", resource);
    const viewWhere = await restrictWhere(ctx, ctx.auth, "view", resource);
    const phase = new ReadPhase();
    const rules = stageRules(ctx, phase, this.spec);
    const storedRead = await this.readStored(
      ctx,
      phase,
      objectTypeId,
      unique,
      deleteWhere,
      viewWhere,
    );
    const model = await this.spec.stage?.(ctx, phase, [], unique);
    const { appLabel, model: name } = this.spec;
    const hookParts = stageDeleteHooks(ctx, phase, { appLabel, model: name, ids: unique });
    await phase.run(ctx);
    const staged = await rules();
    const related = new Map(this.fkFields.map((f) => [f.name, new Map<number, ApiRecord>()]));
    const stored = storedRead(related, noLinks());
    const decorate = decorator(model?.() ?? null);
    const batch = new WriteBatch();
    const admitted: Array<[number, Row]> = [];
    // every id is found (404; a list's 400), the caller's (403) and free of dependants (409)
    // before any is staged
    if (options.bulk) requireBulkFound(ids, (id) => visibleStored(stored, id));
    for (const id of ids) {
      admitted.push([id, admitStored(stored, id, resource, options)]);
      stored.byId.delete(id); // named twice: the second is not found, as it would be one by one
      await hookParts.admit(id);
      await yieldWhenDue();
    }
    const explain = await hookParts.parts();
    for (const part of explain) part.write(batch);
    const changes: StagedChange[] = [];
    const one = admitted.length === 1;
    for (const [id, existing] of admitted) {
      const read = { related, decorate };
      changes.push(await this.stageDelete(ctx, one ? batch : null, stored, read, id, existing));
      await yieldWhenDue();
    }
    if (!one) for (const s of deletesAsRead(this.table, admitted)) batch.add(this.orm(ctx).run(s));
    await stageChanges(ctx, batch, resource, objectTypeId, staged, changes);
    return this.runBatch(ctx, batch, "delete", stored.read, !!options.precondition, explain);
  }

  /** Stages one row's guarded DELETE (into `batch`, if given); answers the change to log. */
  async stageDelete(
    ctx: WriteContext,
    batch: WriteBatch | null,
    stored: Stored,
    read: { related: Map<string, Map<number, ApiRecord>>; decorate: Decorate | undefined },
    id: number,
    existing: Row,
  ): Promise<StagedChange> {
    const [before] = await this.parts.serialize(
      ctx,
      [existing],
      new Map([[id, this.nestedTags(ctx, stored.tags.get(id) ?? [])]]),
      read.related,
      await this.links.recordLinks(ctx, stored.links, [[id, this.storedLinksOf(stored.links, id)]]),
      read.decorate,
    );
    batch?.add(
      this.orm(ctx)
        .delete(this.table)
        .where(
          and(eq(this.table.id, id), eq((this.table as any).lastUpdated, existing.lastUpdated)),
        ),
    );
    if (batch) batch.add(guardChanged(this.orm(ctx)));
    return { action: "delete", id, prechange: before!, postchange: null };
  }
}

/** The parts whose guards may explain a failed batch. */
const explainers = (...parts: Array<StagedHook | StagedModelPart | null | undefined>) =>
  parts.flatMap((p) => (p?.explain ? [{ write() {}, explain: p.explain }] : []));

type Decorate = (rows: Row[], records: ApiRecord[]) => Promise<void>;

/** A model part's `decorate` as the serializer takes it. */
function decorator(part: StagedModelPart | null): Decorate | undefined {
  const decorate = part?.decorate;
  return decorate ? async (rows, records) => decorate(rows, records) : undefined;
}

/** Moves the related objects' nested forms a row was read with (`__fk_<field>`) into `related`. */
function takeNested(
  ctx: ReadContext,
  row: Row,
  related: Map<string, Map<number, ApiRecord>>,
  infos: Map<string, ModelInfo | null>,
) {
  for (const [name, info] of infos) {
    const j = row[`__fk_${name}`];
    delete row[`__fk_${name}`];
    const build = info?.nestedSql?.build;
    const id = j == null ? null : (JSON.parse(j as string) as Record<string, unknown>).id;
    if (typeof j === "string" && typeof id === "number" && build)
      related.get(name)!.set(id, build(ctx, id, JSON.parse(j)));
  }
}

/** Rows one statement deletes at most: their ids and stamps as one bound JSON value. */
const ROWS_PER_DELETE = 2_000;

/**
 * Many rows of `table` deleted as they were read (decision 0184, as a cascade's levels, 0155):
 * each still there with the `last_updated` read, a statement and its guard (a row changed or gone
 * since fails it) per `ROWS_PER_DELETE`, not two per row.
 */
export function deletesAsRead(
  table: SQLiteTable | SQL,
  rows: ReadonlyArray<readonly [number, { lastUpdated?: unknown }]>,
): SQL[] {
  const out: SQL[] = [];
  for (let i = 0; i < rows.length; i += ROWS_PER_DELETE) {
    const chunk = rows.slice(i, i + ROWS_PER_DELETE);
    const read = JSON.stringify(chunk.map(([id, row]) => [id, row.lastUpdated ?? null]));
    // `[id, stamp]` pairs as one bound JSON value: rows of two columns, not `inJsonList`'s list
    const pairs = sql`(SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS stamp FROM json_each(${read}))`;
    out.push(
      sql`DELETE FROM ${table} WHERE id IN (SELECT j.id FROM ${pairs} AS j JOIN ${table} AS now ON now.id = j.id AND now.last_updated IS j.stamp)`,
      sql`INSERT INTO write_guard (ok) VALUES (changes() = ${chunk.length})`,
    );
  }
  return out;
}
