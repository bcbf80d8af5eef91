/**
 * A `GraphQLSchema` assembled and validated with the event loop's turns (decision 0217): at 1,000
 * custom object types graphql-js's constructor (every type's fields walked to collect the type
 * map) and `assertValidSchema` (every type checked) each held the loop in one stretch. The type
 * map here is the one the constructor collects, in its order; validation is graphql-js's own, a
 * few types at a step. `tests/graphql/assemble.test.ts` compares both with graphql-js's.
 */
import {
  __Schema,
  assertValidSchema,
  getNamedType,
  GraphQLSchema,
  isInputObjectType,
  isInterfaceType,
  isObjectType,
  isUnionType,
  specifiedDirectives,
  validateSchema,
  type GraphQLNamedType,
  type GraphQLObjectType,
  type GraphQLType,
} from "graphql";
import { yieldWhenDue } from "../turns";

/** Types validated in one step (a filter input has ~20 fields, a type ~10, the root thousands). */
const VALIDATED_AT_A_STEP = 16;

/** The types a named type refers to, in the order `collectReferencedTypes` (graphql-js) visits them. */
function referencedBy(named: GraphQLNamedType): GraphQLType[] {
  if (isUnionType(named)) return [...named.getTypes()];
  if (isObjectType(named) || isInterfaceType(named)) {
    const out: GraphQLType[] = [...named.getInterfaces()];
    for (const field of Object.values(named.getFields())) {
      out.push(field.type);
      for (const arg of field.args) out.push(arg.type);
    }
    return out;
  }
  if (isInputObjectType(named)) return Object.values(named.getFields()).map((f) => f.type);
  return [];
}

/**
 * Adds the named types reachable from `root` to `found` in graphql-js's order (depth first, each
 * when first reached), a type a step with a turn given between when due. The stack stands for
 * `collectReferencedTypes`' recursion, so a long chain of relations cannot overflow it.
 */
async function collectWithTurns(root: GraphQLType, found: Set<GraphQLNamedType>): Promise<void> {
  const stack: Iterator<GraphQLType>[] = [];
  const reach = (type: GraphQLType) => {
    const named = getNamedType(type);
    if (found.has(named)) return;
    found.add(named);
    stack.push(referencedBy(named)[Symbol.iterator]());
  };
  reach(root);
  while (stack.length) {
    const next = stack[stack.length - 1]!.next();
    if (next.done) stack.pop();
    else {
      await yieldWhenDue();
      reach(next.value);
    }
  }
}

/** The parts of a schema its constructor fills (graphql-js declares them private). */
interface SchemaParts {
  _queryType: GraphQLObjectType;
  _typeMap: Record<string, GraphQLNamedType>;
  _implementationsMap: Record<
    string,
    { objects: GraphQLObjectType[]; interfaces: GraphQLNamedType[] }
  >;
}

/**
 * `new GraphQLSchema({ query })`, its type map collected with turns: the same types in the same
 * order (the root's, the specified directives' arguments', introspection's), the same refusal
 * of two types of one name, the same implementations of interfaces. Not yet validated.
 */
export async function schemaWithTurns(query: GraphQLObjectType): Promise<GraphQLSchema> {
  const found = new Set<GraphQLNamedType>();
  await collectWithTurns(query, found);
  for (const directive of specifiedDirectives)
    for (const arg of directive.args) await collectWithTurns(arg.type, found);
  await collectWithTurns(__Schema, found);
  // a schema of no root, marked valid: its constructor walks only the directives and introspection
  const schema = new GraphQLSchema({ assumeValid: true });
  const parts = schema as unknown as SchemaParts;
  const typeMap: SchemaParts["_typeMap"] = Object.create(null);
  const implementations: SchemaParts["_implementationsMap"] = Object.create(null);
  const implementing = (name: string) =>
    (implementations[name] ??= { objects: [], interfaces: [] });
  for (const type of found) {
    if (typeMap[type.name] !== undefined)
      throw new Error(
        `Schema must contain uniquely named types but contains multiple types named "${type.name}".`,
      );
    typeMap[type.name] = type;
    if (isInterfaceType(type)) {
      for (const iface of type.getInterfaces()) implementing(iface.name).interfaces.push(type);
    } else if (isObjectType(type)) {
      for (const iface of type.getInterfaces()) implementing(iface.name).objects.push(type);
    }
  }
  parts._queryType = query;
  parts._typeMap = typeMap;
  parts._implementationsMap = implementations;
  schema.__validationErrors = undefined;
  return schema;
}

/**
 * graphql-js's validation of `schema` (`validateSchema`), a few types at a step with turns
 * between: each step validates a view of the schema whose type map holds those types (the root
 * types and directives are checked in every view, in a few µs). Valid: the schema keeps an empty
 * list of errors, as `assertValidSchema` leaves it. Invalid: `assertValidSchema` over the whole
 * schema throws its own error.
 */
export async function validateWithTurns(schema: GraphQLSchema): Promise<void> {
  const types = Object.values(schema.getTypeMap());
  for (let i = 0; i < types.length; i += VALIDATED_AT_A_STEP) {
    await yieldWhenDue();
    const part: Record<string, GraphQLNamedType> = Object.create(null);
    for (const type of types.slice(i, i + VALIDATED_AT_A_STEP)) part[type.name] = type;
    const view = Object.create(schema, {
      __validationErrors: { value: undefined, writable: true },
      getTypeMap: { value: () => part },
    }) as GraphQLSchema;
    if (validateSchema(view).length) {
      schema.__validationErrors = undefined;
      assertValidSchema(schema);
    }
  }
  schema.__validationErrors = [];
}
