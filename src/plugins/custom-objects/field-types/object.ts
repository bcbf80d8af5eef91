/**
 * `object`: a reference to one object of a host model or custom object type, stored as
 * `<name>_id` (and `<name>_type` when polymorphic). Filters and sorts by the id.
 */
import { orNull } from "../../../core/json-schema";
import { sql } from "drizzle-orm";
import { describe, polymorphicFilters, requestValue } from "./base";
import { refReadSchema, refWriteSchema } from "./reference";
import type { FieldTypeModule } from "./types";

export const object: FieldTypeModule = {
  name: "object",
  storage: "reference",
  sqlType: "INTEGER",
  indexed: true,
  canBeUnique: true,
  canBePrimary: true,
  orderable: true,
  searchable: false,
  takesDefault: false,
  takes: { related: true },
  describeKind: "relation",
  lossless: [],
  encode: () => ({ error: "References are resolved by the model." }),
  decode: (stored) => stored ?? null,
  filters: (f, ctx) => {
    if (!f.isPolymorphic)
      return {
        [`${f.name}_id`]: { kind: "number", expr: ctx.column },
        [f.name]: { kind: "number", expr: ctx.column },
      };
    const type = ctx.columnNamed(`${f.name}_type`);
    return polymorphicFilters(
      f,
      ctx,
      (typeId, ids) => sql`(${type} = ${typeId} AND ${ctx.column} IN (${ids}))`,
      sql`${ctx.column} IS NULL`,
    );
  },
  readSchema: (f, env) => ({ ...orNull(refReadSchema(f, env)), ...describe(f) }),
  writeSchema: (f, env) => requestValue(f, refWriteSchema(f, env)),
};
