/**
 * The typed Hono environment: `c.get("services")` holds everything built once per process or
 * isolate; `c.get("auth")` is the authenticated caller of this request.
 *
 * Also the types every part shares and that name each other (`Services` holds the model
 * registry, whose models take a `ReadContext`, which holds `Services`): the read/write contexts,
 * `Resource` (what the generic REST handlers need from a model), `ModelInfo` and the model
 * registry's interface. They live in this one file so that no file of `core/` imports in a
 * circle; `rest/resource.ts` and `models/registry.ts` re-export them under their old names.
 */
import type { Context } from "hono";
import type { Placeholder, SQL, SQLWrapper } from "drizzle-orm";
import type { SQLiteTable } from "drizzle-orm/sqlite-core";
import type { Config } from "../config";
import type { Database, Executor, Queries } from "../db/client";
import type { Cache } from "../services/cache/types";
import type { RedisClient } from "../services/redis-types";
import type { Logger } from "../services/logger";
import type { ObjectTypeRegistry } from "./object-types";
import type { TaskQueue } from "../services/tasks/queue";
import type { ListSpec } from "./rest/query";
import type { Slots } from "./slots";
import type { FieldErrors } from "./errors";
import type { ReadPhase, WriteBatch } from "./rest/write-batch";

export interface AuthUser {
  id: number;
  username: string;
  isSuperuser: boolean;
  /** Codenames `<app_label>.<action>_<model>` granted through object permissions. */
  permissions: Set<string>;
  /**
   * Constraint sets per codename, present only where every grant of that codename is
   * constrained (an unconstrained grant lifts the restriction). See `auth/restrict.ts`.
   */
  constraints?: Map<string, Record<string, unknown>[]>;
}

/**
 * A proof that a cached copy is current, read beside a request's own statements
 * (`core/fresh-read.ts`, decision 0085): `settle` takes the statements' answers, answers true
 * when the copy was current, else brings it up to date and answers false.
 */
export interface Guard {
  name: string;
  statements: Queries[number][];
  /**
   * Statements for a read of their own, where they differ (a local file's readers; the token's
   * full row and grants where `statements` reads only their print). `settle` gets the answers to
   * whichever of the two was read.
   */
  alone?: Queries[number][];
  settle(answers: unknown[]): Promise<boolean>;
  /**
   * Statements for a write batch that fail it unless the cached copy is still current (decision
   * 0107): a write that has nothing else to read carries them instead of a read before it.
   */
  readonly batch?: Queries[number][];
  /**
   * Rides in the write batch only, whatever the read phase reads (decision 0110): its statements
   * are read only to settle it after such a batch failed.
   */
  readonly batchOnly?: true;
  /**
   * Settles the guard by a read of its own that concurrent requests may share (a local file,
   * where the change stamp proves a shared read current); undefined to read `alone` instead.
   */
  settleAlone?(): Promise<boolean>;
}

/** A load as statements for someone else's read (`Resource.loadPlan`). */
export interface LoadPlan {
  statements: Queries[number][];
  /** `known`: nested forms of referenced objects read elsewhere (by object type id, then id). */
  finish(
    answers: unknown[],
    ids: number[],
    known?: Map<number, Map<number, ApiRecord>>,
  ): Promise<ApiRecord[]>;
}

export interface AuthState {
  user: AuthUser | null;
  tokenId: number | null;
  writeEnabled: boolean;
}

/** An enabled plugin as the host sees it: no routes or state, just who it is. */
interface PluginInfo {
  name: string;
  version: string;
  apiBase?: string;
}

export interface Services {
  config: Config;
  db: Database;
  cache: Cache;
  redis: { caching?: RedisClient; tasks?: RedisClient };
  /** Why a Redis role meant to exist is missing (the local redis-server did not start), for the checks. */
  redisDown?: { caching?: string; tasks?: string };
  logger: Logger;
  /** The enabled plugins, in `PLUGINS` order (what they mount is wired by `createApp`). */
  plugins: PluginInfo[];
  objectTypes: ObjectTypeRegistry;
  models: ModelRegistry;
  deleteHooks: DeleteHooks;
  /** The job queue on `REDIS['tasks']`; null when no tasks Redis is configured. */
  tasks: TaskQueue | null;
  /** Work plugins ask to repeat (`hooks.periodic`): run beside retention by the task worker and the Workers cron. */
  periodic: Array<{ name: string; everyMs: number; run(): Promise<unknown> }>;
  startedAt: Date;
  /** State parts keep per app (`core/slots.ts`), created with the services in `createApp`. */
  state: Slots;
}

export type HonoEnv = { Variables: { services: Services; auth: AuthState; requestId: string } };
export type Ctx = Context<HonoEnv>;

/* What the generic REST handlers need from a model. Host models get one from `defineModel`;
   the custom objects plugin builds one per custom object type. */

export interface ReadContext {
  db: Executor;
  services: Services;
  /** Scheme + host of the request, for absolute `url`s. */
  baseUrl: string;
  /** Per-transaction state (`core/slots.ts`); every write context has one. */
  scratch?: Slots;
  /** The request's response byte budget (`core/rest/budget.ts`); none outside requests. */
  budget?: { used: number; readonly limit: number };
  /**
   * Registers a guard of a cache a read's statements were built on, settled in the request's
   * next read (`core/fresh-read.ts`); absent outside a request.
   */
  guard?(g: Guard): void;
  /**
   * A caller's one read (a GET, a list, a GraphQL page): its loads may carry the objects of other
   * custom types and of polymorphic fields' types, their models proven by guards riding in it
   * (decision 0165). Writes' read phases do not: their statements stay as sized for D1.
   */
  carriesForms?: true;
}

export interface WriteContext extends ReadContext {
  auth: AuthState;
  requestId: string;
  /** The request's query parameters (e.g. `allow_destructive`). */
  params: URLSearchParams;
  /** Runs `task` after the transaction commits (not at all on rollback). */
  onCommit?(task: () => Promise<void>): void;
  /** This transaction's own state, created by `writeTransaction` (`core/slots.ts`). */
  scratch: Slots;
  /**
   * Reads a staged write's read phase in one round trip with the request's guards (the caller's
   * token, decision 0089); absent outside a request: a plain `db.read`.
   */
  readPhase?(queries: readonly unknown[]): Promise<unknown[]>;
  /**
   * Runs a staged write's batch with the request's guards leading it when its read phase left
   * them to it (decision 0107); absent outside a request: a plain `db.write`. `explain`: reads
   * that tell why the batch failed, read with the guards' settling should it fail on a guard
   * (`explainedFailure`).
   */
  writeBatch?(items: readonly unknown[], explain?: readonly unknown[]): Promise<unknown[]>;
  /**
   * Registers a guard of a cache the write took on trust: it rides in the read phase, or in the
   * batch when there is nothing else to read (decision 0107); absent outside a request.
   */
  guard?(g: Guard): void;
}

export type ApiRecord = Record<string, unknown>;

/** An object a staged write wrote: its id, its record, and that record's JSON text when known. */
export interface StagedWritten {
  id: number;
  record: ApiRecord;
  json?: string;
}

/** One item of a staged update. */
export interface StagedUpdate {
  id: number;
  input: ApiRecord;
}

export interface StagedOptions {
  /**
   * The resource as routed: its permission limits (an owner column, a scope a wrapper added) are
   * the ones checked, whatever resource the staged writer was built from.
   */
  resource: Resource;
  /** A list request: field errors are answered per item. */
  bulk: boolean;
  /** Checks the stamp (`last_updated`) read for an object (`If-Match`: 412 when it differs). */
  precondition?: (stamp: string | null) => void;
  /** The route authorised the write itself (a login issuing a token): no `add` limits apply. */
  authorised?: boolean;
  /** Refuses (throws) to act on a stored row: a wrapper's rule on the row as read. */
  admit?: (existing: Record<string, any>) => void;
  /** A wrapper's checks of a create or update, staged with it (decision 0092). */
  check?: StagedCheck;
  /**
   * A create's rows take these ids, in order, instead of SQLite's next ones: a revert putting a
   * deleted object back under its old id (decision 0113). A taken id fails the batch.
   */
  ids?: number[];
  /**
   * A create's rows take these `created` stamps, in order, instead of the write's moment: a
   * delete put back keeps its recorded creation time (decision 0171).
   */
  created?: string[];
}

/** One object of a staged create or update as a wrapper's check sees it, once converted. */
export interface StagedCheckItem {
  /** null for a create. */
  id: number | null;
  input: ApiRecord;
  /** The row as the write leaves it (an update: the stored row with the new values). */
  row: Record<string, any>;
  existing: Record<string, any> | null;
  /** The link fields the input sets (target ids by field name). */
  links: Map<string, number[]>;
  /** The links the stored row holds, by field name (empty for a create). */
  storedLinks: Map<string, number[]>;
}

/**
 * A wrapper's checks in a staged create or update (decision 0092): it adds its reads to the
 * write's read phase; the answer, called with the converted items, refuses (throws) or adds its
 * guards to the batch, and explains them when one fails.
 */
export type StagedCheck = (
  ctx: WriteContext,
  phase: ReadPhase,
  items: Array<{ id: number | null; input: ApiRecord }>,
) => Promise<(items: StagedCheckItem[]) => Promise<StagedHook | undefined>>;

/**
 * A resource's writes as one read phase and one atomic write batch (decision 0071): two round
 * trips on a remote database, none of them inside an interactive transaction.
 */
export interface StagedWrites {
  /** Creates and updates fold NetBox 4.6's `add_tags` / `remove_tags` themselves. */
  tagEdits?: boolean;
  /** Absent where the model's creates and updates need its hooks (they run in a transaction). */
  create?(ctx: WriteContext, inputs: ApiRecord[], options: StagedOptions): Promise<StagedWritten[]>;
  /** Deletes `ids` (in order; hooks included), or answers "transaction" when it cannot be staged. */
  delete(
    ctx: WriteContext,
    ids: number[],
    options: StagedOptions,
  ): Promise<"transaction" | undefined>;
  update?(
    ctx: WriteContext,
    items: StagedUpdate[],
    partial: boolean,
    options: StagedOptions,
  ): Promise<StagedWritten[]>;
  /**
   * A partial update of one object whose stored side the caller states instead of reading it (a
   * revert of a change record: the object as its post-change state says, decision 0139): no read,
   * one batch conditioned on the row's stamp, the type's shape and the caller's constraints. Null
   * when the write would need a read first (a relation, a choice, tags, rules not cached: nothing
   * sent); "refused" when the batch refused it (nothing written). The caller then writes the
   * ordinary way, whose reads say why.
   */
  updateAssumed?(
    ctx: WriteContext,
    item: AssumedUpdate,
    options: StagedOptions,
  ): Promise<StagedWritten | "refused" | null>;
  /**
   * A deleted object put back under `id` with no read (a revert of its delete, decision 0139):
   * the related objects and tags as `input` shows them nested (the change record's forms, which
   * the caller's batch proves current); the primary key refuses an id taken. Null or "refused" as
   * `updateAssumed` answers them.
   */
  createAssumed?(
    ctx: WriteContext,
    item: { id: number; input: ApiRecord },
    options: StagedOptions,
  ): Promise<StagedWritten | "refused" | null>;
  /**
   * One object deleted with no read (a revert of its create, decision 0139): `before` is the
   * object as the caller states it (its change record), `stamp` its `last_updated`; the batch
   * proves it (the DELETE conditioned on the stamp, the caller's delete constraints, the delete
   * hooks' guards). "deleted", or null and "refused" as `updateAssumed` answers them.
   */
  deleteAssumed?(
    ctx: WriteContext,
    item: { id: number; stamp: string; before: ApiRecord },
    options: StagedOptions,
  ): Promise<"deleted" | "refused" | null>;
}

/** `StagedWrites.updateAssumed`'s object: the fields to write and the object as assumed now. */
export interface AssumedUpdate {
  id: number;
  input: ApiRecord;
  /** The row's `last_updated` as assumed: the batch's UPDATE is conditioned on it. */
  stamp: string;
  /** The record as assumed now (the change record's prechange). */
  before: ApiRecord;
  /** The record the write leaves, given its new stamp (the change record's postchange). */
  after(stamp: string): ApiRecord;
}

export interface Resource {
  appLabel: string;
  model: string;
  verboseName: string;
  table: SQLiteTable;
  list: ListSpec;
  briefFields: string[];
  /** Serialised records for `ids`, in that order; unknown ids are skipped. */
  load(ctx: ReadContext, ids: number[]): Promise<ApiRecord[]>;
  /**
   * `load` as statements for a caller's one read (decision 0085): `ids` is SQL naming the ids
   * (a list or a subquery) for `WHERE id IN (…)`, or one id (statements whose SQL text is
   * rendered once, 0098); `finish` takes the statements' answers and the ids in answer order.
   * Outside transactions only.
   */
  loadPlan?(ctx: ReadContext, ids: SQL | number): LoadPlan;
  /** Validates and inserts; throws ValidationError with field errors. Returns the new id. */
  create(ctx: WriteContext, input: ApiRecord): Promise<number>;
  /** `create` that also answers with the new object's record (saves reading it back). */
  createLoaded?(ctx: WriteContext, input: ApiRecord): Promise<{ id: number; record: ApiRecord }>;
  /**
   * A bulk create's inputs in one go (faster than `createLoaded` each): per input, in order, the
   * new object or the field errors `createLoaded` would have thrown. Other errors are thrown.
   */
  createMany?(
    ctx: WriteContext,
    inputs: ApiRecord[],
  ): Promise<Array<{ id: number; record: ApiRecord } | { errors: FieldErrors }>>;
  update(ctx: WriteContext, id: number, input: ApiRecord, partial: boolean): Promise<void>;
  /** Deletes one row that is known to exist (delete hooks have already run). */
  delete(ctx: WriteContext, id: number): Promise<void>;
  /** Writes as one read and one atomic batch, where the resource can state them so. */
  staged?: StagedWrites;
  /** The object type id, when the resource knows it (saves a lookup per logged change). */
  objectTypeId?: number;
  /** Maps a constraint column (`site_id`) to its API field (`site`). */
  fieldForColumn?(column: string): string;
  /**
   * Fields whose values are nested objects of other models: read answers hide the ones the
   * caller may not view, and permission constraints can follow them (`site__slug`).
   */
  relations?: Relation[];
  /**
   * What one row's nested forms kept outside its table take (its multi-object links), SQL over
   * `table`'s row: the response budget weighs it with the row's stored values (decision 0190).
   */
  linkBytes?: SQL;
  /**
   * A record some of whose related objects `relations` hid from the caller: what it shows derived
   * from them (a custom object's `_context`) derived again from what is left (decision 0064).
   */
  rederive?(record: ApiRecord): ApiRecord;
  /**
   * Keys whose values name object types (`"app.model"` labels or `{id, app_label, model}`
   * references, one or a list): answers leave out the types the caller may not see (decision
   * 0187, `auth/type-sight.ts`).
   */
  typeFields?: string[];
  /** The column naming the user who owns a row (tokens): others see only their own. */
  ownerColumn?: SQLWrapper;
  /**
   * A further limit on what a non-superuser may see or touch, whatever their permissions
   * (the change log shows only changes to objects the caller may view).
   */
  scope?(user: AuthUser, ctx: ReadContext, auth: AuthState): Promise<SQL | undefined>;
  /** The record's own fields beyond id/url/display/created/last_updated/tags, in record order. */
  describe?: FieldDescription[];
  /** True when records carry `tags`. */
  tagged?: boolean;
  /** Hides what the caller may not view inside records beyond `relations` (change snapshots). */
  hideNested?(ctx: ReadContext, auth: AuthState, records: ApiRecord[]): Promise<ApiRecord[]>;
  /**
   * For the one-read GET and list: a statement judging what `hideNested` would ask after the read
   * (of the objects `ids`), and how its answer is kept on `ctx` for it; null when nothing to judge.
   */
  hideNestedPlan?(
    ctx: ReadContext,
    auth: AuthState,
    ids: SQL | number,
  ): Promise<JudgedInRead | JudgedInRead[] | null>;
}

/** A statement riding last in a one-read GET or list, its answer handed on through the context. */
export interface JudgedInRead {
  statement: SQL;
  proved(ctx: ReadContext, rows: unknown): void;
}

/**
 * What a record's key holds, for readers other than REST (GraphQL): its kind and, for
 * relations, its target(s). Relations are listed in `Resource.relations` with the same name.
 */
export interface FieldDescription {
  name: string;
  kind:
    | "string"
    | "integer"
    | "decimal"
    | "boolean"
    | "date"
    | "datetime"
    | "json"
    | "choice"
    | "select"
    | "multiselect"
    | "relation";
  /** `select`/`multiselect`: the choice set whose labels name the values. */
  choiceSetId?: number | null;
  /** `choice`: the fixed `[value, label]` pairs (host models). */
  choices?: readonly (readonly [string, string])[];
}

export interface Relation {
  /** The record key holding the nested object (or list of them). */
  name: string;
  /** `app_label.model` of the target when the field has one target type. */
  target?: string;
  /** Object type id of the target, when known by id only (custom object fields). */
  targetTypeId?: number;
  /** Polymorphic: each nested object names its type in `object_type`. */
  polymorphic?: boolean;
  /** Polymorphic: the object type ids it may point at. */
  targetTypeIds?: number[];
  many?: boolean;
  /** The column holding the target id (single, non-polymorphic relations), for constraints. */
  expr?: SQLWrapper;
  /**
   * Many relations: the ids the objects `own` (a subquery of ids, or one id) point at, so a
   * one-read GET or list can judge the caller's view of them in its read; polymorphic ones
   * (single or many): those of object type `typeId` (decision 0165).
   */
  targetsOf?(own: SQL, typeId?: number): SQL;
}

/**
 * Runs before any object is deleted, inside the delete's transaction: generic references
 * (tags, custom object fields pointing at it) are cleaned up or the delete is refused.
 */
export type DeleteHook = ((ctx: WriteContext, target: DeleteTarget) => Promise<void>) & {
  /**
   * The hook in a staged delete (decision 0071): it adds its reads to `phase`; the answer, called
   * once the phase has run, refuses (throws) or says what to add to the write batch. A hook
   * without it keeps deletes in a transaction.
   */
  stage?: (ctx: WriteContext, phase: ReadPhase, target: DeleteTarget) => () => Promise<StagedHook>;
  /**
   * The hook in a delete with no read (a revert of a create, decision 0139): its part as batch
   * statements alone, what it would have read proven by guards; null where it must read first.
   */
  stageAssumed?: (ctx: WriteContext, target: DeleteTarget) => StagedHook | null;
  /**
   * The hook for many objects of one type a cascade deletes (decision 0155): its part for all of
   * them in statements whose number does not grow with theirs, with no read; null: each alone.
   */
  stageCascaded?: (ctx: WriteContext, targets: CascadedTargets) => StagedHook | null;
  /**
   * The hook in a staged delete of many objects of one type (decision 0184): its reads for all of
   * them, a statement per dependency whatever their number; null where it must stage each alone
   * (`stage`), which the delete then does for the ids found to exist only.
   */
  stageMany?: (ctx: WriteContext, phase: ReadPhase, targets: ManyTargets) => StagedMany | null;
};
type ManyTargets = { appLabel: string; model: string; ids: number[]; objectTypeId?: number };

/** A delete hook's part of a staged delete of many objects (`DeleteHook.stageMany`). */
export interface StagedMany {
  /** After the read phase: throws the hook's refusal of deleting `id` (a 409), if any. */
  admit(id: number): Promise<void>;
  /** After every id was admitted: the hook's part for all of them. */
  part(): Promise<StagedHook>;
}
type CascadedTargets = { appLabel: string; model: string; objectTypeId: number; ids: number[] };
type DeleteTarget = {
  appLabel: string;
  model: string;
  id: number;
  /** The target's object type id when the deleting write knows it (a custom object's type). */
  objectTypeId?: number;
};

/** A delete hook's part of a staged delete. */
export interface StagedHook {
  /** Adds the hook's statements (clean-ups, guards against what changed since the read). */
  write(batch: WriteBatch): void;
  /**
   * After the batch failed a guard: throws the hook's own answer when one of its guards failed,
   * or answers "transaction" when the delete must run in a transaction after all (a cascade).
   */
  explain?(): Promise<"transaction" | undefined>;
}
type DeleteHooks = DeleteHook[];

/* The model registry: every model the API can point at, keyed by `app_label.model`. */

export interface ModelInfo {
  appLabel: string;
  model: string;
  verboseName: string;
  /** Nested representations `{id, url, display, …}` keyed by id; unknown ids are absent. */
  nested(ctx: ReadContext, ids: number[]): Promise<Map<number, ApiRecord>>;
  resource?: Resource;
  /** A run-time model's own id (a custom object type's), for naming that must be stable. */
  catalogId?: number;
  /**
   * The nested lookup as SQL (rows of `id` and `j`, a JSON object of the columns) plus how to
   * build the record from one row, so several models' lookups can share one statement.
   */
  nestedSql?: {
    /** By ids, or by a placeholder for their JSON array text (a statement built once, 0104). */
    select(ids: number[] | Placeholder): SQL;
    /** `select` of the ids an SQL subquery gives (a read that names objects not yet read). */
    selectIn?(ids: SQL): SQL;
    /** A scalar subquery: the JSON object of the row whose id is `idExpr` (qualified SQL). */
    selectOne?(idExpr: SQL): SQL;
    /**
     * `selectOne` over the model's table under an alias, for a read that may hold the same table
     * outside (a custom type pointing at its own type); what a read plans with (decision 0165).
     */
    selectOneAliased?(idExpr: SQL): SQL;
    build(ctx: ReadContext, id: number, columns: Record<string, unknown>): ApiRecord;
  };
}

export type Resolver = (model: string, ctx: ReadContext) => Promise<ModelInfo | null>;

/**
 * A run-time model a plugin holds in its cache, found by its object type id without a read, with
 * the guard that proves the cached copy current in the request's next read (decision 0118).
 */
export type CachedModel = { label: string; objectTypeId: number; info: ModelInfo; guard: Guard };

/** A plugin's look-ups of its cached run-time models (`ModelRegistry.addCachedLookup`). */
export interface CachedLookup {
  byObjectType(objectTypeId: number): CachedModel | null;
  byLabel(label: string): CachedModel | null;
  /** `ModelRegistry.cachedSince` for this plugin's models. */
  cachedSince(objectTypeId: SQL, since: number): CachedModelRead;
  /** `ModelRegistry.typeChangedSince` for this plugin's models (false for any other type). */
  changedSince(objectTypeId: SQL, since: number): SQL;
}

/**
 * `ModelRegistry.cachedSince`: statements for a read made before the object type is known, and
 * what settles them once it is: the cached model, proven current by those answers, its type
 * unchanged after change record `since` (nothing a record of it shows of the type: its shape,
 * names); or null (none cached, changed since, or a stale copy: dropped, read the ordinary way).
 */
export interface CachedModelRead {
  statements: Queries[number][];
  settle(objectTypeId: number, answers: unknown[]): Promise<CachedModel | null>;
}

/** Every model of an app label known only at run time, with a signature that moves when any changes. */
export type Catalog = (
  ctx: ReadContext,
  guard?: (g: Guard) => void,
) => Promise<{ signature: string; models: ModelInfo[] }>;

/** `Services.models`: every model the API can point at (`ModelRegistry` in `models/registry.ts`). */
export interface ModelRegistry {
  register(info: ModelInfo): void;
  addResolver(appLabel: string, resolver: Resolver): void;
  /** Lets readers list a run-time app label's models (GraphQL builds a type per model). */
  addCatalog(appLabel: string, catalog: Catalog): void;
  /** Every run-time model, and one signature over all of them. */
  /** With `guard`, a catalog may answer from its cache and register the guard that proves it. */
  dynamicModels(
    ctx: ReadContext,
    guard?: (g: Guard) => void,
  ): Promise<{ signature: string; models: ModelInfo[] }>;
  staticModels(): ModelInfo[];
  /**
   * The app labels whose models are known only at run time (custom object types), each with the
   * models it registered at start-up (a plugin's own): the types `auth/type-sight.ts` withholds.
   */
  runTimeApps(): Map<string, string[]>;
  /** Nested records for several models at once (one UNION ALL for every model with a SQL form). */
  nestedMany(
    ctx: ReadContext,
    groups: Array<[ModelInfo, number[]]>,
  ): Promise<Map<ModelInfo, Map<number, ApiRecord>>>;
  get(appLabel: string, model: string, ctx: ReadContext): Promise<ModelInfo | null>;
  /** Lets a plugin answer `cachedByObjectType` and `cachedByLabel` for its run-time models. */
  addCachedLookup(lookup: CachedLookup): void;
  /** A run-time model from a plugin's cache by object type id, or null (read it instead). */
  cachedByObjectType(objectTypeId: number): CachedModel | null;
  /** The same by `app_label.model` (decision 0143: the change log's scope). */
  cachedByLabel(label: string): CachedModel | null;
  /**
   * A model a read being built on `ctx` may plan without reading first: static, or cached and
   * proven by a guard in that read (decision 0165); null where it must be read.
   */
  plannedByObjectType(
    ctx: ReadContext,
    objectTypeId: number,
  ): { label: string; info: ModelInfo } | null;
  /**
   * `cachedByObjectType` proven by a read made before the type is known (`objectTypeId`, SQL
   * naming it), with its type unchanged since change record `since` (decision 0154).
   */
  cachedSince(objectTypeId: SQL, since: number): CachedModelRead;
  /**
   * SQL true when the run-time type `objectTypeId` names changed (its shape, its names: a change
   * record of it came) after change record `since`; null when no plugin has run-time models
   * (decision 0160: a write that takes a record's snapshot for the object guards on it).
   */
  typeChangedSince(objectTypeId: SQL, since: number): SQL | null;
}
