/**
 * Result rows shaped as `@libsql/client` shapes them — column names as enumerable own
 * properties, indexes and `length` readable but not enumerable — built cheaply. The client's
 * own builder defines every value twice with `Object.defineProperty`, which leaves each row a
 * dictionary object and was about a tenth of a list request's CPU. Here the names are plain
 * assignments in column order (rows of one column list share one shape) and the indexes are
 * getters on a prototype made once per column list. Drizzle reads rows both ways: by index
 * (`Array.prototype.slice.call(row)`) and by enumerable keys.
 */
import { LibsqlError, type InArgs, type IntMode, type ResultSet, type Row } from "@libsql/client";

type Make = (values: unknown[]) => Row;

const makers = new Map<string, Make>();
const MAX_MAKERS = 512;

/** The row builder for a column list (made once per list, kept for the next result). */
export function rowMaker(columns: readonly string[]): Make {
  const key = columns.join("\u0000");
  let make = makers.get(key);
  if (!make) {
    if (makers.size >= MAX_MAKERS) makers.clear();
    makers.set(key, (make = build(columns)));
  }
  return make;
}

/** Names a plain assignment cannot hold as the driver would: repeats, indexes, the prototype. */
const plain = (columns: readonly string[]) =>
  new Set(columns).size === columns.length &&
  columns.every((c) => c !== "__proto__" && c !== "length" && !/^(0|[1-9]\d*)$/.test(c));

function build(columns: readonly string[]): Make {
  if (!plain(columns)) return (values) => slowRow(values, columns);
  const n = columns.length;
  const proto: Record<string | number, unknown> = Object.create(Object.prototype);
  Object.defineProperty(proto, "length", { value: n });
  for (let i = 0; i < n; i++) {
    const name = columns[i]!;
    Object.defineProperty(proto, i, {
      get(this: Record<string, unknown>) {
        return this[name];
      },
    });
  }
  return (values) => {
    const row = Object.create(proto) as Record<string, unknown>;
    for (let i = 0; i < n; i++) row[columns[i]!] = values[i];
    return row as unknown as Row;
  };
}

/** The driver's own way (`rowFromSql`), for column lists with repeated or index-like names. */
function slowRow(values: unknown[], columns: readonly string[]): Row {
  const row = {} as Record<string | number, unknown>;
  Object.defineProperty(row, "length", { value: values.length });
  for (let i = 0; i < values.length; i++) {
    const value = values[i];
    Object.defineProperty(row, i, { value });
    const column = columns[i]!;
    if (!Object.hasOwn(row, column))
      Object.defineProperty(row, column, {
        value,
        enumerable: true,
        configurable: true,
        writable: true,
      });
  }
  return row as unknown as Row;
}

// ---- values and errors as `@libsql/client` gives them, for our own local connections ----------

const MIN_SAFE = -9007199254740991n;
const MAX_SAFE = 9007199254740991n;
const MIN_INTEGER = -9223372036854775808n;
const MAX_INTEGER = 9223372036854775807n;

/** SQLite's primary result codes by number, as the client names them (0, "OK", is never an error). */
const SQLITE_CODES: Array<string | undefined> = [
  undefined,
  "SQLITE_ERROR",
  "SQLITE_INTERNAL",
  "SQLITE_PERM",
  "SQLITE_ABORT",
  "SQLITE_BUSY",
  "SQLITE_LOCKED",
  "SQLITE_NOMEM",
  "SQLITE_READONLY",
  "SQLITE_INTERRUPT",
  "SQLITE_IOERR",
  "SQLITE_CORRUPT",
  "SQLITE_NOTFOUND",
  "SQLITE_FULL",
  "SQLITE_CANTOPEN",
  "SQLITE_PROTOCOL",
  "SQLITE_EMPTY",
  "SQLITE_SCHEMA",
  "SQLITE_TOOBIG",
  "SQLITE_CONSTRAINT",
  "SQLITE_MISMATCH",
  "SQLITE_MISUSE",
  "SQLITE_NOLFS",
  "SQLITE_AUTH",
  "SQLITE_FORMAT",
  "SQLITE_RANGE",
  "SQLITE_NOTADB",
  "SQLITE_NOTICE",
  "SQLITE_WARNING",
];

/** The client's mapping of a driver error (`mapSqliteError`): base code from the raw code. */
export function toLibsqlError(e: unknown): unknown {
  const err = e as { name?: string; message: string; code?: string; rawCode?: number } | null;
  if (err?.name !== "SqliteError") return e;
  const base =
    err.rawCode === undefined
      ? "SQLITE_UNKNOWN"
      : (SQLITE_CODES[err.rawCode & 0xff] ?? `SQLITE_UNKNOWN_${err.rawCode & 0xff}`);
  return new LibsqlError(err.message, base, err.code, err.rawCode, e as Error);
}

/** An argument as the client passes it to the driver (`valueToSql`), with the same refusals. */
function toSql(value: unknown, intMode: IntMode): unknown {
  if (typeof value === "number") {
    if (!Number.isFinite(value))
      throw new RangeError("Only finite numbers (not Infinity or NaN) can be passed as arguments");
    return value;
  }
  if (typeof value === "bigint") {
    if (value < MIN_INTEGER || value > MAX_INTEGER)
      throw new RangeError(
        "bigint is too large to be represented as a 64-bit integer and passed as argument",
      );
    return value;
  }
  if (typeof value === "boolean")
    return intMode === "bigint"
      ? value
        ? 1n
        : 0n
      : intMode === "string"
        ? value
          ? "1"
          : "0"
        : value
          ? 1
          : 0;
  if (value instanceof ArrayBuffer) return Buffer.from(value);
  if (value instanceof Date) return value.valueOf();
  if (value === undefined)
    throw new TypeError("undefined cannot be passed as argument to the database");
  return value;
}

export function argsToSql(args: InArgs | undefined, intMode: IntMode): unknown {
  if (args === undefined) return [];
  if (Array.isArray(args)) return args.map((v) => toSql(v, intMode));
  const named: Record<string, unknown> = {};
  for (const name in args) {
    const key = name[0] === "@" || name[0] === "$" || name[0] === ":" ? name.substring(1) : name;
    named[key] = toSql((args as Record<string, unknown>)[name], intMode);
  }
  return named;
}

/** Converts one row's values in place as the client does (`valueFromSql`): integers per intMode, blobs as ArrayBuffer. */
export function fromSql(values: unknown[], intMode: IntMode): unknown[] {
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (typeof v === "bigint") {
      if (intMode === "number") {
        if (v < MIN_SAFE || v > MAX_SAFE)
          throw new RangeError(
            "Received integer which cannot be safely represented as a JavaScript number",
          );
        values[i] = Number(v);
      } else if (intMode === "string") values[i] = `${v}`;
    } else if (v instanceof Buffer) values[i] = v.buffer;
  }
  return values;
}

const toJsonValue = (v: unknown) =>
  typeof v === "bigint" ? `${v}` : v instanceof ArrayBuffer ? Buffer.from(v).toString("base64") : v;

/** `ResultSet` with the same fields and `toJSON` as the client's own. */
export class SqlResultSet implements ResultSet {
  constructor(
    readonly columns: string[],
    readonly columnTypes: string[],
    readonly rows: Row[],
    readonly rowsAffected: number,
    readonly lastInsertRowid: bigint | undefined,
  ) {}
  toJSON() {
    return {
      columns: this.columns,
      columnTypes: this.columnTypes,
      rows: this.rows.map((row) => Array.prototype.map.call(row, toJsonValue)),
      rowsAffected: this.rowsAffected,
      lastInsertRowid: this.lastInsertRowid !== undefined ? `${this.lastInsertRowid}` : null,
    };
  }
}
