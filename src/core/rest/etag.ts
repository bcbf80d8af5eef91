/**
 * NetBox 4.6's concurrent update protection: a weak `ETag` derived from a record's
 * `last_updated` (else `created`), and `If-Match` on writes to one object (412 on a mismatch).
 * The check is a condition on the row's stamp (`stampsFromIfMatch`), so the write that carries it
 * can compare inside its own transaction (or statement: `… WHERE id = ? AND last_updated IN (…)`).
 */
import { ApiError } from "../errors";

type Stamped = { last_updated?: unknown; created?: unknown };

/** The stamp an ETag stands for: the record's `last_updated`, else `created`. */
const stampOf = (record: Stamped): string | null => {
  const stamp = record.last_updated ?? record.created;
  return typeof stamp === "string" && stamp ? stamp : null;
};

/** `W/"<last_updated>"`, or null for a record without timestamps. */
export function etagOf(record: Stamped): string | null {
  const stamp = stampOf(record);
  return stamp === null ? null : `W/"${stamp}"`;
}

/**
 * What `If-Match` asks for: null (no header: last write wins), "*" (the object must exist) or
 * the stamps it accepts. A weak or strong tag of the same stamp matches (RFC 9110's weak
 * comparison is what NetBox applies).
 */
export function stampsFromIfMatch(header: string | undefined): "*" | string[] | null {
  if (header === undefined || !header.trim()) return null;
  if (header.trim() === "*") return "*";
  const stamps: string[] = [];
  for (const m of header.slice(0, 4096).matchAll(/(?:W\/)?"([^"]*)"/g)) stamps.push(m[1]!);
  return stamps;
}

/** 412 unless `record` still carries a stamp `If-Match` accepts; the answer names the current ETag. */
export function requireMatch(expected: "*" | string[] | null, record: Stamped): void {
  if (expected === null || expected === "*") return;
  const stamp = stampOf(record);
  if (stamp !== null && expected.includes(stamp)) return;
  const current = etagOf(record);
  throw new ApiError(
    412,
    {
      detail: "Precondition failed: the object has changed since the ETag in If-Match was issued.",
      error: "precondition_failed",
    },
    current ? { ETag: current } : {},
  );
}
