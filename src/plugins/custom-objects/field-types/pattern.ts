/**
 * `validation_regex` patterns come from users: checked when a field is defined and matched by
 * RE2 (re2js), whose time is linear in the value, never by the backtracking `RegExp`
 * (decision 0068). Compiled patterns live in a small LRU, so distinct patterns sent to
 * schema preview cannot grow memory without bound.
 */
import { RE2JS } from "re2js";

/** Compiled patterns kept; the least recently used one goes first. */
export const PATTERN_CACHE_SIZE = 128;

/** A pattern RE2 refuses is at most this long in an error message. */
const MAX_PATTERN_IN_MESSAGE = 80;

/** A compiled pattern (`test` searches, as NetBox's `RegexValidator` does) or why it was refused. */
export type CompiledPattern = { test(value: string): boolean } | { refused: string };

// Module-level on purpose: a pure memo of immutable inputs (a pattern → its compiled form),
// bounded (docs/architecture.md, decision 0068).
const compiled = new Map<string, CompiledPattern>();

function compileUncached(source: string): CompiledPattern {
  try {
    const re = RE2JS.compile(source);
    return { test: (value: string) => re.test(value) };
  } catch (e) {
    const reason = String((e as Error)?.message ?? e).replace(/^error parsing regexp: /, "");
    return { refused: reason.slice(0, MAX_PATTERN_IN_MESSAGE * 2) };
  }
}

/** The compiled form of `source`, from the LRU or compiled now. */
export function compilePattern(source: string): CompiledPattern {
  const hit = compiled.get(source);
  if (hit) {
    // Re-inserted so that Map order is recency order.
    compiled.delete(source);
    compiled.set(source, hit);
    return hit;
  }
  const made = compileUncached(source);
  if (compiled.size >= PATTERN_CACHE_SIZE) compiled.delete(compiled.keys().next().value!);
  compiled.set(source, made);
  return made;
}

/** How many compiled patterns are kept now (tests pin the bound). */
export function cachedPatternCount(): number {
  return compiled.size;
}

/** Null when `source` is a pattern the server runs, else the message a definition answers. */
export function patternProblem(source: string): string | null {
  const c = compilePattern(source);
  if (!("refused" in c)) return null;
  return (
    `Not a valid regular expression (${c.refused}). Patterns run on a linear-time engine (RE2): ` +
    "lookarounds, backreferences and repeat counts above 1000 are not supported."
  );
}
