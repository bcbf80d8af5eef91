/**
 * The condition language of event rules (NetBox-style, see docs/decisions/0017-tasks-event-conditions.md):
 * a leaf `{attr, value, op?, negate?, snapshot?}` or a group `{and: […]}` / `{or: […]}`,
 * evaluated against the changed object's serialised record. NetBox 4.7's snapshot conditions:
 * `changed` / `unchanged` (no `value`) compare `attr` across the prechange and postchange
 * records, and `snapshots.prechange.<attr>` / `snapshots.postchange.<attr>` read one of them.
 */
import { MAX_CONDITIONS_CHARS } from "../limits";

const CONDITION_OPS = [
  "eq",
  "neq",
  "in",
  "contains",
  "gt",
  "gte",
  "lt",
  "lte",
  "changed",
  "unchanged",
] as const;
type SnapshotOp = "changed" | "unchanged";
const SNAPSHOT_OPS: readonly string[] = ["changed", "unchanged"];
const SNAPSHOT_PREFIX = "snapshots.";
type ConditionOp = (typeof CONDITION_OPS)[number];

interface LeafCondition {
  /** Dotted path into the record: `status.value`, `tags.slug` (lists map), `ports.0`. */
  attr: string;
  /** Not given for `changed` / `unchanged`. */
  value?: unknown;
  op?: ConditionOp;
  negate?: boolean;
  /** Which record: default `data` (postchange; prechange for deletes). */
  snapshot?: "prechange" | "postchange";
}
export type Condition = LeafCondition | { and: Condition[] } | { or: Condition[] };

/** What conditions look at: the event's data and both snapshots. */
export interface ConditionInput {
  data: unknown;
  prechange: unknown;
  postchange: unknown;
}

const LEAF_KEYS = new Set(["attr", "value", "op", "negate", "snapshot"]);
const MAX_DEPTH = 8;
const MAX_NODES = 100;

const isObject = (v: unknown): v is Record<string, unknown> =>
  !!v && typeof v === "object" && !Array.isArray(v);

/** Checks a condition document; returns the first problem (with its path), or null. */
export function conditionError(raw: unknown): string | null {
  // matched on every write of a watched type: bounded as a whole (decision 0196)
  if (raw !== null && JSON.stringify(raw).length > MAX_CONDITIONS_CHARS)
    return `conditions hold at most ${MAX_CONDITIONS_CHARS} characters of JSON`;
  let nodes = 0;
  const check = (node: unknown, path: string, depth: number): string | null => {
    if (++nodes > MAX_NODES) return `at most ${MAX_NODES} conditions are allowed`;
    if (depth > MAX_DEPTH) return `${path}: conditions nest at most ${MAX_DEPTH} deep`;
    if (!isObject(node)) return `${path}: expected an object`;
    const keys = Object.keys(node);
    if ("and" in node || "or" in node) {
      if (keys.length !== 1) return `${path}: a group has exactly one key, "and" or "or"`;
      const op = keys[0]!;
      const items = node[op];
      if (!Array.isArray(items) || !items.length)
        return `${path}.${op}: expected a non-empty list of conditions`;
      for (const [i, item] of items.entries()) {
        const e = check(item, `${path}.${op}[${i}]`, depth + 1);
        if (e) return e;
      }
      return null;
    }
    for (const k of keys) if (!LEAF_KEYS.has(k)) return `${path}: unknown key "${k}"`;
    if (typeof node.attr !== "string" || !node.attr.trim() || node.attr.length > 200)
      return `${path}.attr: expected a dotted path`;
    const op = node.op ?? "eq";
    if (typeof op !== "string" || !(CONDITION_OPS as readonly string[]).includes(op))
      return `${path}.op: expected one of ${CONDITION_OPS.join(", ")}`;
    if (SNAPSHOT_OPS.includes(op)) {
      if ("value" in node)
        return `${path}.value: the '${op}' operator compares snapshots and does not accept a value`;
      if (node.attr.startsWith(SNAPSHOT_PREFIX) || node.snapshot !== undefined)
        return `${path}.attr: '${op}' takes the bare attribute name (e.g. "status"), not a snapshot path`;
    } else if (!("value" in node)) return `${path}.value: required`;
    if (node.negate !== undefined && typeof node.negate !== "boolean")
      return `${path}.negate: expected true or false`;
    if (
      node.snapshot !== undefined &&
      node.snapshot !== "prechange" &&
      node.snapshot !== "postchange"
    )
      return `${path}.snapshot: expected "prechange" or "postchange"`;
    if (op === "in" && !Array.isArray(node.value)) return `${path}.value: "in" needs a list`;
    if (
      ["gt", "gte", "lt", "lte"].includes(op) &&
      typeof node.value !== "number" &&
      typeof node.value !== "string"
    ) {
      return `${path}.value: "${op}" needs a number or a string`;
    }
    return null;
  };
  return check(raw, "conditions", 1);
}

/**
 * Resolves a dotted path. A numeric segment indexes a list; any other segment applied to a list
 * maps over its items (`tags.slug` → every tag's slug). Missing values are `undefined`.
 */
export function resolvePath(root: unknown, path: string): unknown {
  let current: unknown = root;
  for (const segment of path.split(".")) current = stepInto(current, segment);
  return current;
}

/** One segment of `resolvePath`'s walk from `current` (undefined past a missing value). */
function stepInto(current: unknown, segment: string): unknown {
  if (Array.isArray(current)) {
    if (/^\d+$/.test(segment)) return current[Number(segment)];
    return current.flatMap((item) =>
      isObject(item) && Object.hasOwn(item, segment) ? [item[segment]] : [],
    );
  }
  if (isObject(current)) return Object.hasOwn(current, segment) ? current[segment] : undefined;
  return undefined;
}

function equal(a: unknown, b: unknown): boolean {
  return equalTo(a)(b);
}

/**
 * Equality with `a`, its JSON text taken once: `in` and `contains` compare one value with many,
 * and a record's text taken for each of a long list was seconds of held loop (decision 0196).
 */
function equalTo(a: unknown): (b: unknown) => boolean {
  if (a === undefined) a = null;
  let text: string | undefined;
  return (b) => {
    if (b === undefined) b = null;
    if (a === b) return true;
    if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
    text ??= JSON.stringify(a);
    return text === JSON.stringify(b);
  };
}

function compare(a: unknown, b: unknown): number | null {
  if (typeof a === "number" && typeof b === "number") return a - b;
  if (typeof a === "string" && typeof b === "string") return a < b ? -1 : a > b ? 1 : 0;
  return null;
}

function applyOp(op: ConditionOp, actual: unknown, expected: unknown): boolean {
  switch (op) {
    case "eq":
      return equal(actual, expected);
    case "neq":
      return !equal(actual, expected);
    case "in":
      return Array.isArray(expected) && expected.some(equalTo(actual));
    case "contains":
      if (typeof actual === "string" && typeof expected === "string")
        return actual.includes(expected);
      return Array.isArray(actual) && actual.some(equalTo(expected));
    case "gt":
    case "gte":
    case "lt":
    case "lte": {
      const c = compare(actual, expected);
      if (c === null) return false;
      return op === "gt" ? c > 0 : op === "gte" ? c >= 0 : op === "lt" ? c < 0 : c <= 0;
    }
    default:
      return false; // the snapshot operators are evaluated by `snapshotOp`
  }
}

/**
 * `changed` / `unchanged` as NetBox 4.7 documents them: an attribute found in neither snapshot
 * fails closed (null, whatever `negate` says); a missing snapshot (create, delete) counts as a
 * change for an attribute the other one has.
 */
function snapshotOp(op: SnapshotOp, attr: string, input: ConditionInput): boolean | null {
  const side = (snapshot: unknown) =>
    snapshot === null || snapshot === undefined ? undefined : resolvePath(snapshot, attr);
  const before = side(input.prechange);
  const after = side(input.postchange);
  if (before === undefined && after === undefined) return null;
  const same = before !== undefined && after !== undefined && equal(before, after);
  return op === "changed" ? !same : same;
}

/** What `attr` reads: `snapshots.<which>.…` one snapshot (null when absent), else the data. */
function leafValue(condition: LeafCondition, input: ConditionInput): unknown {
  if (condition.attr.startsWith(SNAPSHOT_PREFIX)) {
    const snapshots = { prechange: input.prechange ?? null, postchange: input.postchange ?? null };
    return resolvePath({ snapshots }, condition.attr) ?? null;
  }
  const root = condition.snapshot ? input[condition.snapshot] : input.data;
  return resolvePath(root, condition.attr);
}

/** A nested record (an object with an `id`), or a list holding one: what an owner's view may cut. */
const reducible = (v: unknown): boolean =>
  Array.isArray(v) ? v.some(reducible) : isObject(v) && Object.hasOwn(v, "id");

/**
 * True when walking `path` from `root` (as `resolvePath` does) passes into a nested record, or
 * starts at a key of `shaped` (one a view rewrites in place: a withheld type label, a count).
 */
function pathReachesNested(root: unknown, path: string, shaped: ReadonlySet<string>): boolean {
  let current: unknown = root;
  const segments = path.split(".");
  if (shaped.has(segments[0]!)) return true;
  for (const segment of segments) {
    current = stepInto(current, segment);
    if (current === undefined) return false;
    if (reducible(current)) return true;
  }
  return false;
}

/**
 * True when the condition reads a related object or a tag of the changed record, or a key of
 * `shaped` (a value a view rewrites without nesting a record: object type labels, a withheld
 * count): what a rule's owner may not view, so its answer on the full record must not decide
 * alone (decisions 0187, 0191).
 */
export function conditionReachesNested(
  condition: Condition | null | undefined,
  input: ConditionInput,
  shaped: ReadonlySet<string> = new Set(),
): boolean {
  if (condition === null || condition === undefined) return false;
  const reaches = (c: Condition) => conditionReachesNested(c, input, shaped);
  if ("and" in condition) return condition.and.some(reaches);
  if ("or" in condition) return condition.or.some(reaches);
  const op = condition.op ?? "eq";
  const walk = (root: unknown, path: string) => pathReachesNested(root, path, shaped);
  if (op === "changed" || op === "unchanged")
    return [input.prechange, input.postchange].some((s) => walk(s, condition.attr));
  const snapshot = /^snapshots\.(prechange|postchange)(?:\.(.*))?$/.exec(condition.attr);
  if (snapshot) {
    const root = input[snapshot[1] as "prechange" | "postchange"];
    // the whole snapshot compared: it holds its relations and tags
    return snapshot[2] === undefined ? reducible([root]) : walk(root, snapshot[2]);
  }
  return walk(condition.snapshot ? input[condition.snapshot] : input.data, condition.attr);
}

/** True when the (already validated) condition holds; an empty condition (null) always holds. */
export function evaluateCondition(
  condition: Condition | null | undefined,
  input: ConditionInput,
): boolean {
  if (condition === null || condition === undefined) return true;
  if ("and" in condition) return condition.and.every((c) => evaluateCondition(c, input));
  if ("or" in condition) return condition.or.some((c) => evaluateCondition(c, input));
  const op = condition.op ?? "eq";
  if (op === "changed" || op === "unchanged") {
    const result = snapshotOp(op, condition.attr, input);
    if (result === null) return false;
    return condition.negate ? !result : result;
  }
  const result = applyOp(op, leafValue(condition, input), condition.value);
  return condition.negate ? !result : result;
}
