/** Tags (scoped by object types) and custom-field choice sets. */
import { choiceSets, tagObjectTypes, tags } from "../../db/schema";
import { defineModel } from "./define";
import { NUL_MESSAGE, nulPaths } from "../nul";

export const tagModel = defineModel({
  appLabel: "extras",
  model: "tag",
  verboseName: "tag",
  path: "extras/tags",
  table: tags,
  defaultOrdering: ["name"],
  display: (r) => r.name,
  fields: [
    {
      name: "name",
      type: "string",
      column: tags.name,
      required: true,
      maxLength: 100,
      search: true,
      brief: true,
    },
    {
      name: "slug",
      type: "slug",
      column: tags.slug,
      required: true,
      maxLength: 100,
      search: true,
      brief: true,
    },
    { name: "color", type: "color", column: tags.color, maxLength: 6, brief: true },
    {
      name: "description",
      type: "string",
      column: tags.description,
      maxLength: 200,
      search: true,
      brief: true,
    },
    {
      name: "object_types",
      type: "object_types",
      link: {
        table: tagObjectTypes,
        own: tagObjectTypes.tagId,
        other: tagObjectTypes.objectTypeId,
      },
    },
  ],
});

function checkChoices(value: unknown): string | null {
  if (!Array.isArray(value) || !value.length)
    return "Provide a non-empty list of [value, label] pairs.";
  const seen = new Set<string>();
  for (const pair of value) {
    if (
      !Array.isArray(pair) ||
      pair.length !== 2 ||
      typeof pair[0] !== "string" ||
      typeof pair[1] !== "string" ||
      !pair[0]
    ) {
      return "Each choice must be a [value, label] pair of strings.";
    }
    // a choice is a value stored in text columns, where a NUL would cut it (decision 0124)
    if (nulPaths(pair, undefined, 1).length) return NUL_MESSAGE;
    if (seen.has(pair[0])) return `Duplicate choice value: ${pair[0]}`;
    seen.add(pair[0]);
  }
  return null;
}

export const choiceSetModel = defineModel({
  appLabel: "extras",
  model: "customfieldchoiceset",
  verboseName: "custom field choice set",
  path: "extras/custom-field-choice-sets",
  table: choiceSets,
  defaultOrdering: ["name"],
  display: (r) => r.name,
  fields: [
    {
      name: "name",
      type: "string",
      column: choiceSets.name,
      required: true,
      maxLength: 100,
      search: true,
      brief: true,
    },
    {
      name: "description",
      type: "string",
      column: choiceSets.description,
      maxLength: 200,
      search: true,
      brief: true,
    },
    {
      name: "extra_choices",
      type: "json",
      column: choiceSets.extraChoices,
      required: true,
      check: checkChoices,
    },
    { name: "order_alphabetically", type: "boolean", column: choiceSets.orderAlphabetically },
  ],
  openapi: { record: { choices_count: { type: "integer", minimum: 0 } } },
  // counted from the row: choice set writes are staged (one read, one batch; decision 0092)
  decorateReadsNothing: true,
  async decorate(_ctx, rows, records) {
    rows.forEach((row, i) => {
      const choices = [...(row.extraChoices as [string, string][])];
      if (row.orderAlphabetically) choices.sort((a, b) => a[1].localeCompare(b[1]));
      records[i]!.choices_count = choices.length;
    });
  },
});
