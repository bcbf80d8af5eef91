/**
 * The schema assembled with turns (decision 0217) is the one graphql-js's constructor builds:
 * the same types in the same order (introspection lists them so), the same interfaces'
 * implementations, the same refusals; validated a few types at a step, it is valid or invalid
 * exactly as `assertValidSchema` finds it.
 */
import { describe, expect, test } from "bun:test";
import {
  assertValidSchema,
  getIntrospectionQuery,
  graphql,
  GraphQLBoolean,
  GraphQLID,
  GraphQLInputObjectType,
  GraphQLInterfaceType,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLSchema,
  GraphQLString,
  GraphQLUnionType,
  printSchema,
  validateSchema,
  type GraphQLFieldConfigMap,
} from "graphql";
import { schemaWithTurns, validateWithTurns } from "../../src/graphql/assemble";

/** A root over `n` object types that point at one another, a union, an interface, filters. */
function sampleQuery(n: number): GraphQLObjectType {
  const node = new GraphQLInterfaceType({ name: "Node", fields: { id: { type: GraphQLID } } });
  const types: GraphQLObjectType[] = [];
  const filters: GraphQLInputObjectType[] = [];
  for (let i = 0; i < n; i++) {
    const filter: GraphQLInputObjectType = new GraphQLInputObjectType({
      name: `T${i}Filter`,
      fields: () => ({
        name: { type: GraphQLString },
        next: { type: filters[(i + 1) % n]! },
        AND: { type: new GraphQLList(new GraphQLNonNull(filter)) },
      }),
    });
    filters.push(filter);
    types.push(
      new GraphQLObjectType({
        name: `T${i}`,
        interfaces: i % 3 === 0 ? [node] : [],
        fields: () => ({
          id: { type: GraphQLID },
          name: { type: GraphQLString },
          next: { type: types[(i + 1) % n]! },
          back: { type: new GraphQLList(new GraphQLNonNull(types[(i + n - 1) % n]!)) },
        }),
      }),
    );
  }
  const either = new GraphQLUnionType({ name: "Either", types: () => [types[1]!, types[2]!] });
  const fields: GraphQLFieldConfigMap<unknown, unknown> = {};
  // the root names the types from the last, so the map's order is not the types' own
  for (let i = n - 1; i >= 0; i--) {
    fields[`t${i}`] = { type: types[i]!, args: { id: { type: new GraphQLNonNull(GraphQLID) } } };
    fields[`t${i}_list`] = {
      type: new GraphQLList(types[i]!),
      args: { filters: { type: filters[i]! } },
    };
  }
  fields.either = { type: either };
  fields.node = { type: node };
  fields.flag = { type: GraphQLBoolean };
  return new GraphQLObjectType({ name: "Query", fields });
}

describe("the schema assembled with turns", () => {
  test("has graphql-js's type map, in its order, and answers introspection the same", async () => {
    const query = sampleQuery(40);
    const plain = new GraphQLSchema({ query });
    const stepped = await schemaWithTurns(query);
    await validateWithTurns(stepped);
    expect(Object.keys(stepped.getTypeMap())).toEqual(Object.keys(plain.getTypeMap()));
    for (const [name, type] of Object.entries(plain.getTypeMap()))
      expect(stepped.getType(name)).toBe(type);
    expect(printSchema(stepped)).toBe(printSchema(plain));
    const node = plain.getType("Node") as GraphQLInterfaceType;
    expect(stepped.getImplementations(node)).toEqual(plain.getImplementations(node));
    expect(stepped.getPossibleTypes(node).map((t) => t.name)).toEqual(
      plain.getPossibleTypes(node).map((t) => t.name),
    );
    assertValidSchema(plain);
    const asked = getIntrospectionQuery();
    const [a, b] = await Promise.all([
      graphql({ schema: plain, source: asked }),
      graphql({ schema: stepped, source: asked }),
    ]);
    expect(a.errors).toBeUndefined();
    expect(b).toEqual(a);
  });

  test("refuses two types of one name as the constructor does", async () => {
    const one = new GraphQLObjectType({ name: "Same", fields: { a: { type: GraphQLString } } });
    const two = new GraphQLObjectType({ name: "Same", fields: { b: { type: GraphQLString } } });
    const query = new GraphQLObjectType({
      name: "Query",
      fields: { one: { type: one }, two: { type: two } },
    });
    const plain = (() => {
      try {
        new GraphQLSchema({ query });
        return null;
      } catch (e) {
        return (e as Error).message;
      }
    })();
    expect(plain).toContain('multiple types named "Same"');
    await expect(schemaWithTurns(query)).rejects.toThrow(plain!);
  });

  test("an invalid schema fails validation with graphql-js's own error", async () => {
    // an object type of no fields, and an input object that needs itself: both invalid
    const empty = new GraphQLObjectType({ name: "Empty", fields: {} });
    const loop: GraphQLInputObjectType = new GraphQLInputObjectType({
      name: "Loop",
      fields: () => ({ self: { type: new GraphQLNonNull(loop) } }),
    });
    const fields: GraphQLFieldConfigMap<unknown, unknown> = {
      empty: { type: empty },
      looped: { type: GraphQLString, args: { by: { type: loop } } },
    };
    // types enough that the two invalid ones fall in different steps
    for (let i = 0; i < 40; i++)
      fields[`s${i}`] = {
        type: new GraphQLObjectType({ name: `S${i}`, fields: { a: { type: GraphQLString } } }),
      };
    const query = new GraphQLObjectType({ name: "Query", fields });
    const expected = validateSchema(new GraphQLSchema({ query }))
      .map((e) => e.message)
      .join("\n\n");
    expect(expected).toContain("Empty");
    expect(expected).toContain("Loop");
    const stepped = await schemaWithTurns(query);
    await expect(validateWithTurns(stepped)).rejects.toThrow(expected);
  });
});
