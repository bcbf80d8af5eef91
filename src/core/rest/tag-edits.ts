/**
 * NetBox 4.6's `add_tags` / `remove_tags` on writes: apply only the given additions or removals to
 * an object's tags, leaving the rest alone. Turned into the `tags` list the resource already
 * validates (scope, existence), so every taggable model gets them.
 */
import { nameableTagsOf } from "../models/tag-scope";
import { ValidationError } from "../errors";
import { resolveTags } from "../models/define";
import type { ApiRecord, Resource, WriteContext } from "./resource";

const idsOf = (tags: unknown): number[] =>
  Array.isArray(tags)
    ? tags
        .map((t) => (t as { id?: unknown })?.id)
        .filter((id): id is number => typeof id === "number")
    : [];

/** A request's `add_tags`/`remove_tags`, checked for what needs no look-up; `rest` is the input without them. */
export interface TagEdits {
  adding: boolean;
  removing: boolean;
  add: unknown;
  remove: unknown;
  rest: ApiRecord;
}

/**
 * The tag edits of `input`, or null when it gives neither. Refuses them beside `tags`, and
 * `remove_tags` on a create (`updating` false). Shared by every writer that folds them.
 */
export function tagEditsOf(input: ApiRecord, updating: boolean): TagEdits | null {
  const adding = Object.hasOwn(input, "add_tags");
  const removing = Object.hasOwn(input, "remove_tags");
  if (!adding && !removing) return null;
  const { add_tags, remove_tags, ...rest } = input;
  if (Object.hasOwn(input, "tags"))
    throw ValidationError.field(
      "tags",
      "tags may not be combined with add_tags or remove_tags in the same request.",
    );
  if (removing && !updating)
    throw ValidationError.field(
      "remove_tags",
      "remove_tags is only valid when updating an object.",
    );
  return { adding, removing, add: add_tags, remove: remove_tags, rest };
}

/** The tag ids after the edits: `held` less `removed`, plus `added`; a tag in both is refused. */
export function editedTags(held: number[], added: number[], removed: number[]): number[] {
  if (added.some((id) => removed.includes(id)))
    throw ValidationError.field(
      "add_tags",
      "The same tag may not appear in both add_tags and remove_tags.",
    );
  const kept = held.filter((id) => !removed.includes(id));
  return [...new Set([...kept, ...added])];
}

/**
 * `input` with `add_tags`/`remove_tags` folded into `tags` (the object's current tags for an
 * update, `current` null for a create); unchanged when neither is given.
 */
export async function foldTagEdits(
  ctx: WriteContext,
  resource: Resource,
  input: ApiRecord,
  current: ApiRecord | null,
): Promise<ApiRecord> {
  const edits = tagEditsOf(input, current !== null);
  if (!edits) return input;
  const held = typeof current?.id === "number" ? current.id : null;
  const nameable = await nameableTagsOf(ctx, resource.appLabel, resource.model, held);
  const resolve = async (field: string, raw: unknown) => {
    const r = await resolveTags(ctx, raw, resource.appLabel, resource.model, nameable);
    if ("error" in r) throw ValidationError.field(field, r.error);
    return r.ids;
  };
  const added = edits.adding ? await resolve("add_tags", edits.add) : [];
  const removed = edits.removing ? await resolve("remove_tags", edits.remove) : [];
  return { ...edits.rest, tags: editedTags(idsOf(current?.tags), added, removed) };
}
