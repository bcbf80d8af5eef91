/**
 * What the generic REST handlers need from a model. Host models get one from
 * `defineModel`; the custom objects plugin builds one per custom object type.
 */
import type { SQL, SQLWrapper } from "drizzle-orm";
import type { SQLiteTable } from "drizzle-orm/sqlite-core";
import type { Executor } from "../../db/client";
import type { AuthState, AuthUser, Services } from "../context";
import type { ListSpec } from "./query";

export interface ReadContext {
  db: Executor;
  services: Services;
  /** Scheme + host of the request, for absolute `url`s. */
  baseUrl: string;
}

export interface WriteContext extends ReadContext {
  auth: AuthState;
  requestId: string;
  /** The request's query parameters (e.g. `allow_destructive`). */
  params: URLSearchParams;
  /** Runs `task` after the transaction commits (not at all on rollback). */
  onCommit?(task: () => Promise<void>): void;
}

export type ApiRecord = Record<string, unknown>;

export interface Resource {
  appLabel: string;
  model: string;
  verboseName: string;
  table: SQLiteTable;
  list: ListSpec;
  briefFields: string[];
  /** Serialised records for `ids`, in that order; unknown ids are skipped. */
  load(ctx: ReadContext, ids: number[]): Promise<ApiRecord[]>;
  /** Validates and inserts; throws ValidationError with field errors. Returns the new id. */
  create(ctx: WriteContext, input: ApiRecord): Promise<number>;
  /** `create` that also answers with the new object's record (saves reading it back). */
  createLoaded?(ctx: WriteContext, input: ApiRecord): Promise<{ id: number; record: ApiRecord }>;
  update(ctx: WriteContext, id: number, input: ApiRecord, partial: boolean): Promise<void>;
  /** Deletes one row that is known to exist (delete hooks have already run). */
  delete(ctx: WriteContext, id: number): Promise<void>;
  /** The object type id, when the resource knows it (saves a lookup per logged change). */
  objectTypeId?: number;
  /** Maps a constraint column (`site_id`) to its API field (`site`). */
  fieldForColumn?(column: string): string;
  /**
   * Fields whose values are nested objects of other models: read answers hide the ones the
   * caller may not view, and permission constraints can follow them (`site__slug`).
   */
  relations?: Relation[];
  /** The column naming the user who owns a row (tokens): others see only their own. */
  ownerColumn?: SQLWrapper;
  /**
   * A further limit on what a non-superuser may see or touch, whatever their permissions
   * (the change log shows only changes to types the caller may view).
   */
  scope?(user: AuthUser): SQL | undefined;
  /** The record's own fields beyond id/url/display/created/last_updated/tags, in record order. */
  describe?: FieldDescription[];
  /** True when records carry `tags`. */
  tagged?: boolean;
  /** Hides what the caller may not view inside records beyond `relations` (change snapshots). */
  hideNested?(ctx: ReadContext, auth: AuthState, records: ApiRecord[]): Promise<ApiRecord[]>;
}

/**
 * What a record's key holds, for readers other than REST (GraphQL): its kind and, for
 * relations, its target(s). Relations are listed in `Resource.relations` with the same name.
 */
export interface FieldDescription {
  name: string;
  kind: "string" | "integer" | "decimal" | "boolean" | "date" | "datetime" | "json" | "choice" | "select" | "multiselect" | "relation";
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
}

/**
 * Runs before any object is deleted, inside the delete's transaction: generic references
 * (tags, custom object fields pointing at it) are cleaned up or the delete is refused.
 */
export type DeleteHook = (ctx: WriteContext, target: { appLabel: string; model: string; id: number }) => Promise<void>;
export type DeleteHooks = DeleteHook[];
