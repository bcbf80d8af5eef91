/**
 * What a staged write's failed batch means (decisions 0071, 0090, 0092): a constraint's answer, a
 * delete hook's, a lost race (409, or 412 with `If-Match`) or the permission guard (403). Shared
 * by the host models' and the custom objects' staged writers; the reads that tell the guards
 * apart are sent on failure only, with the read that settles the request's guards (decision 0140).
 */
import type { BatchItem } from "drizzle-orm/batch";
import { isWriteConflict, type Queries, WriteConflictError } from "../../db/client";
import type { StagedHook, WriteContext } from "../context";
import { ApiError } from "../errors";
import { explainedFailure } from "../fresh-read";
import { mapConstraintError } from "../rest/constraints";
import type { WriteBatch } from "../rest/write-batch";
import { type clashExplainer, explainClashes, refusedByKeyOf } from "./unique-clash";

/** A lost race on a write that sent `If-Match` (NetBox 4.6): the ETag no longer matches. */
const preconditionFailed = () =>
  new ApiError(412, {
    detail: "Precondition failed: the object has changed since the ETag in If-Match was issued.",
    error: "precondition_failed",
  });

/** `requireAfterWrite`'s answer: the object as written would fall outside the caller's constraints. */
export const outsideConstraints = (action: "add" | "change") =>
  ApiError.detail(
    403,
    `You do not have permission to ${action === "add" ? "create" : "change"} this object as submitted: it would fall outside the objects you may ${action === "add" ? "create" : "change"}.`,
    "permission_denied",
  );

/** The write whose batch failed, and the reads that explain its failure. */
export interface BatchFailure {
  action: "add" | "change" | "delete";
  /** The stamps (`last_updated`) the read phase saw, by row id. */
  read: Map<number, string | null>;
  /** The caller sent `If-Match`: a lost race answers 412, not 409. */
  preconditioned: boolean;
  /** The delete hooks staged in the batch, asked first. */
  hooks?: StagedHook[];
  /** A constraint failure's answer (400/409 naming the field), or null when `e` is not one. */
  constraintError(e: unknown): unknown;
  /**
   * The clash explanation of a unique index's refusal, built on failure only (decision 0146):
   * every clashing field named, in one read.
   */
  clashes?(): ReturnType<typeof clashExplainer>;
  /** The statement reading the stamps of the rows `ids` as rows of `id` and `stamp`. */
  stamps(ids: number[]): Read;
  /**
   * A check that throws its own answer before the hooks are asked (a type's changed shape): its
   * statement, and what its rows say.
   */
  first?: { read: Read; check(rows: unknown[]): void };
}

type Read = BatchItem<"sqlite">;

/**
 * Runs `run` (the write batch `batch`). Resolves to undefined when it committed, or "transaction"
 * when a delete hook asks for the delete to run in a transaction after all; otherwise throws what
 * the failure means. The reads that explain a failed guard ride with the read that settles the
 * request's guards after it (`WriteBatch.explainWith`, decision 0140): a lost race costs no round
 * trip of its own where there is such a read, one where there is none.
 */
export async function runStagedBatch(
  ctx: Pick<WriteContext, "services">,
  batch: WriteBatch,
  run: () => Promise<unknown>,
  failure: BatchFailure,
): Promise<"transaction" | undefined> {
  const reads = explainingReads(failure);
  batch.explainWith(reads);
  try {
    await run();
    return undefined;
  } catch (e) {
    if (!isWriteConflict(e)) throw (await explainConstraint(ctx, failure, e)) ?? e;
    let answers: Promise<unknown[]> | undefined;
    // read on their own, once, only when no settling read carried them and they are needed
    const rows = () =>
      (answers ??= Promise.resolve(
        explainedFailure(e) ?? ctx.services.db.read(reads as unknown as Queries),
      ) as Promise<unknown[]>);
    return explainGuard(failure, rows);
  }
}

/** A constraint failure's answer: a unique index's names every clashing field (one read). */
async function explainConstraint(
  ctx: Pick<WriteContext, "services">,
  failure: BatchFailure,
  e: unknown,
): Promise<unknown> {
  const mapped = failure.constraintError(e);
  if (!mapped || !failure.clashes) return mapped;
  const explainer = failure.clashes();
  if (!refusedByKeyOf(explainer.keys, e)) return mapped;
  const read = (reads: Read[]) =>
    ctx.services.db.read(reads as unknown as Queries) as unknown as Promise<unknown[]>;
  return (await explainClashes(explainer, read)) ?? mapped;
}

/** The failure's reads: the first check's, then the stamps of the rows read (not for a create). */
function explainingReads(f: BatchFailure): Read[] {
  const reads: Read[] = [];
  if (f.first) reads.push(f.first.read);
  if (stampsMatter(f)) reads.push(f.stamps([...f.read.keys()]));
  return reads;
}

const stampsMatter = (f: BatchFailure) => f.action !== "add" && f.read.size > 0;

/** A write guard failed: the hooks' answer, a lost race, else the permission guard. */
async function explainGuard(
  f: BatchFailure,
  rows: () => Promise<unknown[]>,
): Promise<"transaction"> {
  if (f.first) f.first.check((await rows())[0] as unknown[]);
  for (const hook of f.hooks ?? [])
    if ((await hook.explain?.()) === "transaction") return "transaction";
  if (stampsMatter(f)) {
    const now = (await rows())[f.first ? 1 : 0] as Array<{ id: unknown; stamp: unknown }>;
    const moved = now.length < f.read.size || now.some((r) => f.read.get(Number(r.id)) !== r.stamp);
    if (moved) throw f.preconditioned ? preconditionFailed() : new WriteConflictError();
  }
  throw f.action === "delete" ? new WriteConflictError() : outsideConstraints(f.action);
}

/**
 * Runs a read-free write's batch (decision 0139): false when the batch refused it (a guard, a
 * key, a foreign key), so the caller falls back to the ordinary path, which reads and explains.
 */
export async function ranOrRefused(
  ctx: WriteContext,
  batch: WriteBatch,
  resource: Parameters<typeof mapConstraintError>[1],
): Promise<boolean> {
  try {
    await batch.run(ctx);
    return true;
  } catch (e) {
    if (isWriteConflict(e) || mapConstraintError(e, resource)) return false;
    throw e;
  }
}
