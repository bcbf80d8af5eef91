/**
 * The reads a revert's plan asks (the object, later changes, whether earlier targets exist),
 * answered together: one read — one round trip on a remote database, or a share of the write's
 * own read phase (decision 0118) — outside a transaction; one by one on the transaction's
 * connection inside one (decision 0113).
 */
import type { BatchItem } from "drizzle-orm/batch";
import type { ApiRecord, ReadContext, Resource } from "../rest/resource";

/** Reads statements together (with the request's guards): their rows, in order. */
export type ReadTogether = (queries: BatchItem<"sqlite">[]) => Promise<unknown[]>;

export class PlanReads {
  readonly #queries: BatchItem<"sqlite">[] = [];
  #answers: unknown[] = [];
  readonly #after: Array<() => Promise<void>> = [];

  /** `read`: outside a transaction, where the statements can share one read; null inside one. */
  constructor(
    readonly ctx: ReadContext,
    readonly read: ReadTogether | null,
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
    if (!this.read || !resource.loadPlan) {
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
    if (this.read) this.#answers = [...(await this.read(this.#queries))];
    else for (const q of this.#queries) this.#answers.push(await q);
    for (const read of this.#after) await read();
  }
}

/**
 * Plan reads that ride in someone else's read: `run` hands its statements over and waits;
 * `ride` adds them to a read of the caller's and gives them their rows (decision 0118).
 */
export function ridingReads(ctx: ReadContext): {
  reads: PlanReads;
  ride: (theirs: unknown[], read: (all: unknown[]) => Promise<unknown[]>) => Promise<unknown[]>;
  handedOver: Promise<void>;
} {
  let handOver!: (h: { queries: unknown[]; answer: (rows: unknown[]) => void }) => void;
  const handed = new Promise<{ queries: unknown[]; answer: (rows: unknown[]) => void }>(
    (resolve) => {
      handOver = resolve;
    },
  );
  const reads = new PlanReads(
    ctx,
    (queries) => new Promise((answer) => handOver({ queries, answer })),
  );
  return {
    reads,
    handedOver: handed.then(() => undefined),
    ride: async (theirs, read) => {
      const { queries, answer } = await handed;
      const all = await read([...theirs, ...queries]);
      answer(all.slice(theirs.length));
      return all.slice(0, theirs.length);
    },
  };
}
