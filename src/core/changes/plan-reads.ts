/**
 * The reads a revert's plan asks (the object, later changes, whether earlier targets exist),
 * answered together: one `db.read` — one round trip on a remote database — outside a
 * transaction (decision 0113); one by one on the transaction's connection inside one.
 */
import type { BatchItem } from "drizzle-orm/batch";
import type { Queries } from "../../db/client";
import type { ApiRecord, ReadContext, Resource } from "../rest/resource";

export class PlanReads {
  readonly #queries: BatchItem<"sqlite">[] = [];
  #answers: unknown[] = [];
  readonly #after: Array<() => Promise<void>> = [];

  /** `together`: outside a transaction, where the statements can share one read. */
  constructor(
    readonly ctx: ReadContext,
    readonly together: boolean,
  ) {}

  /** A query (built on `ctx.db`); the getter answers its rows once `run` has resolved. */
  add<T>(query: BatchItem<"sqlite"> & PromiseLike<T>): () => T {
    const at = this.#queries.push(query) - 1;
    return () => this.#answers[at] as T;
  }

  /** A read with no statement form, made after the shared one. */
  defer<T>(read: () => Promise<T>): () => T {
    let value: T;
    this.#after.push(async () => {
      value = await read();
    });
    return () => value;
  }

  /** The object `id` as `resource.load` gives it (absent: undefined). */
  load(resource: Resource, id: number): () => Promise<ApiRecord | undefined> {
    if (!this.together || !resource.loadPlan) {
      const loaded = this.defer(() => resource.load(this.ctx, [id]));
      return async () => loaded()[0];
    }
    const plan = resource.loadPlan(this.ctx, id);
    const at = this.#queries.length;
    this.#queries.push(...plan.statements);
    const answers = () => this.#answers.slice(at, at + plan.statements.length);
    return async () => (await plan.finish(answers(), [id]))[0];
  }

  async run(): Promise<void> {
    if (this.#queries.length && this.together)
      this.#answers = [
        ...((await this.ctx.services.db.read(
          this.#queries as unknown as Queries,
        )) as unknown as unknown[]),
      ];
    else for (const q of this.#queries) this.#answers.push(await q);
    for (const read of this.#after) await read();
  }
}
