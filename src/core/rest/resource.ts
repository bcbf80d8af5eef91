/**
 * What the generic REST handlers need from a model. The types live in `core/context.ts` (they
 * and `Services` name each other); this module keeps their old import path.
 */
export type {
  ApiRecord,
  DeleteHook,
  FieldDescription,
  LoadPlan,
  ReadContext,
  Relation,
  Resource,
  WriteContext,
} from "../context";
