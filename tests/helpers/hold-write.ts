/**
 * A race staged on purpose, on any backend: the next atomic write (`Database.write`) whose
 * statements `match` accepts waits, after its read phase, until `release()`; another writer runs
 * meanwhile. Works on a local file, a remote server and D1 alike (the proxy's `hold` is remote only).
 */
import type { Database } from "../../src/db/client";

type Statement = { toSQL?: () => { sql: string }; getQuery?: () => { sql: string } };

/** The SQL text of a batch's statements: a builder's `toSQL`, a raw statement's `getQuery`. */
function statementsOf(queries: readonly unknown[]): string[] {
  return queries.map((q) => {
    try {
      const s = q as Statement;
      return String(s.toSQL?.().sql ?? s.getQuery?.().sql ?? "");
    } catch {
      return "";
    }
  });
}

export interface HeldWrite {
  /** Resolves when the matching write arrived and waits. */
  readonly arrived: Promise<void>;
  /** Lets it through (and stops holding); safe to call twice. */
  release(): void;
}

/** Holds the next write of `db` whose statements match, once. */
export function holdNextWrite(db: Database, match: (sql: string[]) => boolean): HeldWrite {
  const write = db.write;
  let arrive!: () => void;
  let go!: () => void;
  const arrived = new Promise<void>((done) => {
    arrive = done;
  });
  const released = new Promise<void>((done) => {
    go = done;
  });
  let taken = false;
  const mutable = db as { write: Database["write"] };
  const held = async (queries: Parameters<Database["write"]>[0]) => {
    if (!taken && match(statementsOf(queries as unknown as unknown[]))) {
      taken = true;
      arrive();
      await released;
    }
    return write.call(db, queries);
  };
  mutable.write = held as unknown as Database["write"];
  return {
    arrived,
    release() {
      mutable.write = write;
      go();
    },
  };
}
