/**
 * What a revert's first read proves of the change record it reads, named by the record's id alone
 * (decision 0154): the later change records of the objects its post-change state nests, and the
 * guard of its type's cached model. A dry run of another process's record is answered from it.
 */
import { type SQL, sql } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import { objectChanges, objectTypes } from "../../db/schema";
import type { CachedModel } from "../context";
import type { ReadContext } from "../rest/resource";

/** Later change records read at most: past this, the record is taken as unproven. */
const LATER_MAX = 100;

/** A later change record's object: its type and id. */
export type ObjectRef = { type: number; id: number };

/** The read's answers: later records of nested objects, and the type's cached model proven. */
export interface RecordProven {
  /** Null when more than `LATER_MAX` were found. */
  later: ObjectRef[] | null;
  /**
   * The cached model of the record's type, proven current by the read, its type unchanged since
   * the record (null: not cached, stale, or changed since).
   */
  model(objectTypeId: number): Promise<CachedModel | null>;
}

export interface RecordProof {
  statements: BatchItem<"sqlite">[];
  proven(answers: unknown[]): RecordProven;
}

/**
 * The statements for record `id`: change records after it of any object whose id its post-change
 * state nests (any type: the index on type and id is used, the types are judged after), and the
 * guard of its type's cached model, with whether the type changed since (`ModelRegistry.cachedSince`).
 */
export function recordProof(ctx: ReadContext, id: number): RecordProof {
  const record = (column: string) =>
    sql.raw(`(SELECT r."${column}" FROM "object_changes" r WHERE r."id" = `);
  const typeOf: SQL = sql`${record("changed_object_type_id")}${id})`;
  const nestedIds = sql`SELECT j.value FROM "object_changes" r, json_tree(r."postchange_data") j WHERE r."id" = ${id} AND j.key = 'id' AND j.type = 'integer' AND j.fullkey <> '$.id'`;
  const later = ctx.db
    .selectDistinct({ type: objectChanges.changedObjectTypeId, id: objectChanges.changedObjectId })
    .from(objectChanges)
    .where(
      sql`${objectChanges.changedObjectTypeId} IN (SELECT ${objectTypes.id} FROM ${objectTypes}) AND ${objectChanges.changedObjectId} IN (${nestedIds}) AND ${objectChanges.id} > ${id}`,
    )
    .limit(LATER_MAX + 1);
  const models = ctx.services.models.cachedSince(typeOf, id);
  return {
    statements: [later as never, ...(models.statements as BatchItem<"sqlite">[])],
    proven([rows, ...guards]) {
      const found = rows as ObjectRef[];
      return {
        later: found.length > LATER_MAX ? null : found,
        model: (objectTypeId) => models.settle(objectTypeId, guards),
      };
    },
  };
}
