/**
 * The one error type of the API and the §4 shapes: validation 400s are DRF-shaped
 * `{field: [messages]}`, everything else `{detail}` plus an optional machine `error` code.
 */
import { ApiError } from "../api-error";

export { ApiError } from "../api-error";

export interface FieldErrors {
  [field: string]: string[] | FieldErrors | FieldErrors[];
}

/**
 * A 400 keyed by field (`non_field_errors` for the rest); for a bulk write (one entry per item)
 * NetBox 4.7's shape naming each failing item: `{detail: "1 of 3 objects failed validation.",
 * errors: [{index, errors}]}` for a create, `[{id, errors}]` for an update, whose items have ids.
 */
export class ValidationError extends ApiError {
  constructor(
    readonly fields: FieldErrors | FieldErrors[],
    ids?: ReadonlyArray<unknown>,
  ) {
    super(
      400,
      Array.isArray(fields) ? bulkErrorBody(fields, ids) : (fields as Record<string, unknown>),
    );
  }
  static field(name: string, message: string) {
    return new ValidationError({ [name]: [message] });
  }
}

/**
 * For a bulk update: rethrows a list's field errors with each failing item named by the id it
 * listed, as NetBox 4.7's bulk update does; an item without a valid id keeps its index.
 */
export const keyedByListedIds =
  (body: unknown[]) =>
  (e: unknown): never => {
    if (!(e instanceof ValidationError) || !Array.isArray(e.fields)) throw e;
    throw new ValidationError(e.fields, listedIdsOf(body));
  };

/** The `id` each item of a list names (undefined where it is no object). */
export const listedIdsOf = (body: unknown[]): unknown[] =>
  body.map((item) =>
    item !== null && typeof item === "object" && !Array.isArray(item)
      ? (item as { id?: unknown }).id
      : undefined,
  );

const isListedId = (id: unknown): id is number =>
  typeof id === "number" && Number.isInteger(id) && id >= 1;

function bulkErrorBody(
  items: FieldErrors[],
  ids?: ReadonlyArray<unknown>,
): Record<string, unknown> {
  const errors = items
    .map((e, index) => {
      const id = ids?.[index];
      return isListedId(id) ? { id, errors: e } : { index, errors: e };
    })
    .filter((e) => Object.keys(e.errors).length > 0);
  return {
    detail: `${errors.length} of ${items.length} objects failed validation.`,
    errors,
  };
}

export const notFound = (detail = "Not found.") => ApiError.detail(404, detail, "not_found");
export const forbidden = (detail = "You do not have permission to perform this action.") =>
  ApiError.detail(403, detail, "permission_denied");
export const notAuthenticated = () =>
  ApiError.detail(403, "Authentication credentials were not provided.", "not_authenticated");

/** Collects field errors while validating, then throws once. */
export class ErrorCollector {
  /** No prototype: a field called `constructor` or `__proto__` is just another key. */
  readonly errors: Record<string, string[]> = Object.create(null);
  /** Messages added: `empty` is asked several times per input of a bulk, with no key list. */
  #added = 0;
  add(field: string, message: string) {
    const list = Object.hasOwn(this.errors, field)
      ? this.errors[field]!
      : (this.errors[field] = []);
    list.push(message);
    this.#added++;
  }
  get empty() {
    return this.#added === 0;
  }
  throwIfAny() {
    if (!this.empty) throw new ValidationError(this.errors);
  }
}
