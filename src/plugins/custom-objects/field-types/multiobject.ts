/** `multiobject`: an ordered list of references, kept in a link table of its own. */
import { MAX_LINKS_PER_VALUE } from "../../../core/limits";
import { describe, linkFilters, requestValue } from "./base";
import { refReadSchema, refWriteSchema } from "./reference";
import type { FieldTypeModule } from "./types";

export const multiobject: FieldTypeModule = {
  name: "multiobject",
  storage: "links",
  sqlType: "INTEGER",
  indexed: false,
  canBeUnique: false,
  canBePrimary: false,
  orderable: false,
  searchable: false,
  takesDefault: false,
  takes: { related: true },
  describeKind: "relation",
  lossless: [],
  encode: () => ({ error: "References are resolved by the model." }),
  decode: (stored) => stored ?? null,
  filters: linkFilters,
  readSchema: (f, env) => ({ type: "array", items: refReadSchema(f, env), ...describe(f) }),
  writeSchema: (f, env) =>
    requestValue(f, {
      type: "array",
      items: refWriteSchema(f, env),
      maxItems: MAX_LINKS_PER_VALUE,
      ...(f.required ? { minItems: 1 } : {}),
    }),
};
