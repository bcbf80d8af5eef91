/**
 * A `json_object()` key written into a statement's text as a string literal, not bound as a value
 * (decision 0214): a nested form's keys are the same in every statement that carries it, and each
 * bound key was one more value to encode, send and bind on every read (a site's GET sent 14 of
 * them). Only names of letters, digits and underscores are written (a model's property names, a
 * custom field's name); any other is refused, never quoted around.
 */
import { sql, type SQL } from "drizzle-orm";

const KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;

export function jsonKey(name: string): SQL {
  if (!KEY.test(name)) throw new Error(`refusing unsafe JSON key ${JSON.stringify(name)}`);
  return sql.raw(`'${name}'`);
}
