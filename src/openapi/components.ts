/**
 * Components every document has: the §4 error shapes (DRF-style validation map, `{detail,
 * error?}`), their responses, and the token security schemes.
 */
import { ERROR_RESPONSES } from "./builder";
import type { JsonSchema } from "../core/json-schema";

export const ERROR_SCHEMAS: Record<string, JsonSchema> = {
  Error: {
    type: "object",
    description:
      "Any error but a validation 400: a message, plus a machine-readable code for errors clients handle.",
    properties: {
      detail: { type: "string" },
      error: {
        type: "string",
        description:
          "Machine-readable code, e.g. `not_found`, `permission_denied`, `destructive_changes`.",
      },
    },
    required: ["detail"],
    additionalProperties: true,
  },
  ValidationError: {
    type: "object",
    description:
      "A validation 400, keyed by field (`non_field_errors` for the rest); nested objects and lists for nested input.",
    additionalProperties: {
      anyOf: [
        {
          type: "array",
          items: { anyOf: [{ type: "string" }, { $ref: "#/components/schemas/ValidationError" }] },
        },
        { $ref: "#/components/schemas/ValidationError" },
      ],
    },
    examples: [{ name: ["This field is required."] }],
  },
  QueuedJob: {
    type: "object",
    description: "A background write's job (NetBox 4.7); poll its `url` for the outcome.",
    required: ["job"],
    additionalProperties: false,
    properties: {
      job: {
        type: "object",
        required: ["id", "url", "status"],
        additionalProperties: false,
        properties: {
          id: { type: "integer" },
          url: { type: "string", format: "uri" },
          status: { type: "string", enum: ["pending"] },
        },
      },
    },
  },
  BulkDestroyRequest: {
    type: "array",
    minItems: 1,
    description: "The objects to delete, each by its id.",
    items: {
      type: "object",
      properties: { id: { type: "integer", minimum: 1 } },
      required: ["id"],
      additionalProperties: false,
    },
  },
  BulkValidationError: {
    type: "object",
    description:
      "A bulk request's validation 400 (NetBox 4.7): each failing item with its field errors, named by its index in the list (a create; an update's item without a valid id) or by the id it lists (an update); nothing was written.",
    required: ["detail", "errors"],
    additionalProperties: false,
    properties: {
      detail: { type: "string", examples: ["1 of 3 objects failed validation."] },
      errors: {
        type: "array",
        items: {
          type: "object",
          required: ["errors"],
          oneOf: [{ required: ["index"] }, { required: ["id"] }],
          additionalProperties: false,
          properties: {
            index: { type: "integer", minimum: 0 },
            id: { type: "integer", minimum: 1 },
            errors: { $ref: "#/components/schemas/ValidationError" },
          },
        },
      },
    },
  },
};

const errorContent = (schema: JsonSchema) => ({ "application/json": { schema } });
const errorRef = { $ref: "#/components/schemas/Error" };

const RESPONSE_TEXT: Record<string, string> = {
  BadRequest:
    "The request is invalid: a validation map keyed by field, `{detail, errors: [{index, errors}]}` for bulk creates (`{id, errors}` for updates), or `{detail, error}` (malformed JSON, bad parameters).",
  Unauthorized: "Authentication is required (`WWW-Authenticate` says how).",
  Forbidden: "Missing or invalid token, or no permission for this action.",
  NotFound: "No such object or path.",
  MethodNotAllowed: "The path does not take this method (`Allow` lists those it does).",
  Conflict:
    "The change conflicts with the current state (a protected reference, a destructive schema change, a unique value).",
  PreconditionFailed:
    "`If-Match` names no current `ETag` of the object (its `ETag` header is the current one).",
  PayloadTooLarge: "The body is larger than `MAX_BODY_BYTES`.",
  UnsupportedMediaType: "The body is not JSON.",
  ServiceUnavailable:
    "Not now: the database is busy (retry after `Retry-After`), or a background write has no tasks Redis (`tasks_unavailable`).",
};

export const ERROR_RESPONSE_COMPONENTS: Record<string, unknown> = Object.fromEntries(
  Object.values(ERROR_RESPONSES).map((name) => [
    name,
    {
      description: RESPONSE_TEXT[name],
      content: errorContent(
        name === "BadRequest"
          ? {
              anyOf: [
                { $ref: "#/components/schemas/ValidationError" },
                { $ref: "#/components/schemas/BulkValidationError" },
                errorRef,
              ],
            }
          : errorRef,
      ),
    },
  ]),
);

export const SECURITY_SCHEMES = {
  tokenAuth: {
    type: "apiKey",
    in: "header",
    name: "Authorization",
    description:
      "`Authorization: Token <key>`. Create a key with `npm run manage -- create-token` or `POST /api/users/tokens/`.",
  },
  bearerAuth: {
    type: "http",
    scheme: "bearer",
    description: "`Authorization: Bearer <key>`: the same token keys.",
  },
};

/**
 * Answers every bulk write shares, referenced rather than repeated in each model's and custom
 * object type's operations (decision 0210: ~600 bytes a type).
 */
export const SHARED_RESPONSE_COMPONENTS: Record<string, unknown> = {
  Queued: {
    description: "Queued (`?background=true`): the job that runs the write.",
    content: { "application/json": { schema: { $ref: "#/components/schemas/QueuedJob" } } },
  },
};
