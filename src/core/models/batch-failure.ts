/**
 * What a staged write's failed batch means (decisions 0071, 0090, 0092): a constraint's answer, a
 * delete hook's, a lost race (409, or 412 with `If-Match`) or the permission guard (403). Shared
 * by the host models' and the custom objects' staged writers; the reads that tell the guards
 * apart run on failure only.
 */
import { isWriteConflict, WriteConflictError } from "../../db/client";
import type { StagedHook } from "../context";
import { ApiError } from "../errors";

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

/** The write whose batch failed, and how to read what it needs to explain the failure. */
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
  /** The rows' stamps now, read after the failure. */
  stampsNow(ids: number[]): Promise<Array<{ id: unknown; stamp: unknown }>>;
  /** A check that throws its own answer before the hooks are asked (a type's changed shape). */
  checkFirst?(): Promise<void>;
}

/**
 * Runs `run` (the write batch). Resolves to undefined when it committed, or "transaction" when a
 * delete hook asks for the delete to run in a transaction after all; otherwise throws what the
 * failure means.
 */
export async function runStagedBatch(
  run: () => Promise<unknown>,
  failure: BatchFailure,
): Promise<"transaction" | undefined> {
  try {
    await run();
    return undefined;
  } catch (e) {
    if (!isWriteConflict(e)) throw failure.constraintError(e) ?? e;
    return explainGuard(failure);
  }
}

/** A write guard failed: the hooks' answer, a lost race, else the permission guard. */
async function explainGuard(f: BatchFailure): Promise<"transaction"> {
  await f.checkFirst?.();
  for (const hook of f.hooks ?? [])
    if ((await hook.explain?.()) === "transaction") return "transaction";
  if (f.action !== "add" && f.read.size) {
    const now = await f.stampsNow([...f.read.keys()]);
    const moved = now.length < f.read.size || now.some((r) => f.read.get(Number(r.id)) !== r.stamp);
    if (moved) throw f.preconditioned ? preconditionFailed() : new WriteConflictError();
  }
  throw f.action === "delete" ? new WriteConflictError() : outsideConstraints(f.action);
}
