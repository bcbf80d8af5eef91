/**
 * Result rows shaped as `@libsql/client` shapes them — column names as enumerable own
 * properties, indexes and `length` readable but not enumerable — built cheaply. The client's
 * own builder defines every value twice with `Object.defineProperty`, which leaves each row a
 * dictionary object and was about a tenth of a list request's CPU. Here the names are plain
 * assignments in column order (rows of one column list share one shape) and the indexes are
 * getters on a prototype made once per column list. Drizzle reads rows both ways: by index
 * (`Array.prototype.slice.call(row)`) and by enumerable keys.
 */
import type { Row } from "@libsql/client";

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
