/** Turns SQLite constraint failures that slip past validation into 400/409 answers, never 500s. */
import { isWriteConflict, WriteConflictError } from "../../db/client";
import { ApiError, ValidationError } from "../errors";

const messageOf = (e: unknown): string => {
  let cur: unknown = e;
  for (let depth = 0; cur && depth < 4; depth++) {
    const m = (cur as { message?: unknown }).message;
    if (typeof m === "string" && /constraint failed|host_check:/i.test(m)) return m;
    cur = (cur as { cause?: unknown }).cause;
  }
  return "";
};

/** The API field a column stands for when the resource says nothing: `site_id` is `site`. */
export function defaultFieldForColumn(column: string): string {
  return column.endsWith("_id") ? column.slice(0, -3) : column;
}

/**
 * A unique key's answer, as NetBox words it: a field's (Django's unique message), a compound
 * key's (REST framework's `UniqueTogetherValidator`, under `non_field_errors`).
 */
export function uniqueAnswer(what: string, fields: string[]): Record<string, string[]> {
  if (fields.length === 1)
    return { [fields[0]!]: [`${what} with this ${fields[0]} already exists.`] };
  return { non_field_errors: [`The fields ${fields.join(", ")} must make a unique set.`] };
}

export function mapConstraintError(
  e: unknown,
  resource: { fieldForColumn?(c: string): string; verboseName: string } | null,
): ApiError | null {
  if (e instanceof ApiError) return null;
  // a write batch's guard: the row changed since the read phase (decision 0071)
  if (isWriteConflict(e)) return new WriteConflictError();
  // D1 appends the result code (`…: sites.name: SQLITE_CONSTRAINT (extended: …)`); it is no column
  const message = messageOf(e).replace(/:\s*SQLITE_[A-Z_]+(?: \(extended: [A-Z_]+\))?\s*$/, "");
  if (!message) return null;
  // a custom object type's check (decision 0087): its trigger raises `host_check:<name>:<fields>`
  const check = /host_check:([a-z][a-z0-9_]*):([a-z0-9_,]*)/.exec(message);
  if (check) {
    const fields = check[2]!.split(",").filter(Boolean);
    const text = `This object does not satisfy the check "${check[1]}" (on ${fields.join(", ")}).`;
    return new ValidationError(
      fields.length
        ? Object.fromEntries(fields.map((f) => [f, [text]]))
        : { non_field_errors: [text] },
    );
  }
  const unique = /UNIQUE constraint failed: (.+)$/i.exec(message);
  if (unique) {
    const toField = resource?.fieldForColumn ?? defaultFieldForColumn;
    const fields = unique[1]!
      .split(",")
      .map((s) => toField(s.trim().split(".").pop()!.replace(/"/g, "")));
    return new ValidationError(uniqueAnswer(resource?.verboseName ?? "object", fields));
  }
  if (/FOREIGN KEY constraint failed/i.test(message)) {
    return ApiError.detail(
      409,
      "Unable to complete the request: other objects depend on this one or a referenced object does not exist.",
      "dependency_conflict",
    );
  }
  if (/NOT NULL constraint failed: (.+)$/i.test(message)) {
    const col = /NOT NULL constraint failed: (.+)$/i.exec(message)![1]!.split(".").pop()!;
    const field = (resource?.fieldForColumn ?? defaultFieldForColumn)(col);
    return new ValidationError({ [field]: ["This field is required."] });
  }
  return ApiError.detail(
    400,
    "The request conflicts with a database constraint.",
    "constraint_violation",
  );
}
