/**
 * Statements built on every request whose SQL text never changes, only their values (a write
 * batch's cache guards, decision 0107): Drizzle renders the text once per ORM, and each use binds
 * its values into it. Rendering the token guard took ~0.4 ms a create; binding takes microseconds.
 */
import { sql, type SQL } from "drizzle-orm";
import type { Executor } from "./client";
import { renderSql } from "./driver-internals";

interface Rendered {
  /** The text between the `?` placeholders. */
  parts: string[];
  /** Each placeholder's value: a fixed parameter, or (a number in `slots`) the caller's value. */
  params: unknown[];
  slots: Array<number | null>;
}

export class RenderedOnce<V extends readonly unknown[]> {
  readonly #byOrm = new WeakMap<object, Rendered | null>();
  constructor(private readonly build: (orm: Executor, values: V) => SQL) {}

  /** The statement `build` makes for `values`, from the text rendered once. */
  on(orm: Executor, values: V): SQL {
    let rendered = this.#byOrm.get(orm);
    if (rendered === undefined) this.#byOrm.set(orm, (rendered = this.#render(orm, values.length)));
    if (!rendered) return this.build(orm, values);
    const chunks: SQL[] = [sql.raw(rendered.parts[0]!)];
    rendered.params.forEach((fixed, k) => {
      const slot = rendered.slots[k];
      chunks.push(sql`${slot === null ? fixed : values[slot!]}`, sql.raw(rendered.parts[k + 1]!));
    });
    return sql.join(chunks);
  }

  /** The text with marked values in the caller's places; null when it cannot be told apart. */
  #render(orm: Executor, arity: number): Rendered | null {
    const marks = Array.from({ length: arity }, (_, i) => `\u0000rendered-once-${i}\u0000`);
    const query = renderSql(orm, this.build(orm, marks as unknown as V));
    if (!query) return null;
    const parts = query.sql.split("?");
    if (parts.length !== query.params.length + 1) return null;
    const slots = query.params.map((p) => (typeof p === "string" ? marks.indexOf(p) : -1));
    if (marks.some((_, i) => slots.filter((s) => s === i).length !== 1)) return null;
    return { parts, params: query.params, slots: slots.map((s) => (s < 0 ? null : s)) };
  }
}
