/**
 * NetBox 4.6's `add_tags` / `remove_tags` on writes: apply only the given additions or removals to
 * an object's tags, leaving the rest alone. Turned into the `tags` list the resource already
 * validates (scope, existence), so every taggable model gets them.
 */
import { ValidationError } from "../errors";
import { resolveTags } from "../models/define";
import type { ApiRecord, Resource, WriteContext } from "./resource";

const idsOf = (tags: unknown): number[] =>
  Array.isArray(tags)
    ? tags
        .map((t) => (t as { id?: unknown })?.id)
        .filter((id): id is number => typeof id === "number")
    : [];

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
  const adding = Object.hasOwn(input, "add_tags");
  const removing = Object.hasOwn(input, "remove_tags");
  if (!adding && !removing) return input;
  const { add_tags, remove_tags, ...rest } = input;
  if (Object.hasOwn(input, "tags"))
    throw ValidationError.field(
      "tags",
      "tags may not be combined with add_tags or remove_tags in the same request.",
    );
  if (removing && !current)
    throw ValidationError.field(
      "remove_tags",
      "remove_tags is only valid when updating an object.",
    );
  const resolve = async (field: string, raw: unknown) => {
    const r = await resolveTags(ctx, raw, resource.appLabel, resource.model);
    if ("error" in r) throw ValidationError.field(field, r.error);
    return r.ids;
  };
  const added = adding ? await resolve("add_tags", add_tags) : [];
  const removed = removing ? await resolve("remove_tags", remove_tags) : [];
  if (added.some((id) => removed.includes(id)))
    throw ValidationError.field(
      "add_tags",
      "The same tag may not appear in both add_tags and remove_tags.",
    );
  const kept = idsOf(current?.tags).filter((id) => !removed.includes(id));
  return { ...rest, tags: [...new Set([...kept, ...added])] };
}
