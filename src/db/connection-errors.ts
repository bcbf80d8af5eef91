/**
 * Names why a database connection failed, in one line: unauthorized, refused, not found, TLS,
 * DNS, timeout, or a local file that cannot be opened. Drizzle wraps the driver's error in
 * "Failed query: <SQL>", which says nothing about the cause; the cause chain does.
 */
import { redactUrl } from "../config";

type DatabaseFailureKind =
  | "unauthorized"
  | "refused"
  | "not_found"
  | "tls"
  | "dns"
  | "timeout"
  | "server_error"
  | "unreachable"
  | "bad_answer"
  | "local_file";

export interface DatabaseFailure {
  kind: DatabaseFailureKind;
  /** A short reason, without the URL or any secret. */
  reason: string;
}

function chainOf(error: unknown): Array<{ code: string; message: string }> {
  const chain: Array<{ code: string; message: string }> = [];
  let e: any = error;
  for (let depth = 0; e && depth < 8; depth++, e = e.cause) {
    chain.push({ code: String(e.code ?? e.errno ?? ""), message: String(e.message ?? e) });
  }
  return chain;
}

/**
 * Whether `error` says this process closed the database: libSQL's `CLIENT_CLOSED`, which our own
 * connections throw too, wrapped or not by Drizzle's "Failed query". Work that meets it has
 * nothing left to retry.
 */
export function isClosedDatabaseError(error: unknown): boolean {
  return chainOf(error).some((c) => c.code === "CLIENT_CLOSED");
}

/** The failure a connection error stands for, or null when it is not a connection failure (e.g. bad SQL). */
export function classifyDatabaseError(error: unknown, authTokenSet = true): DatabaseFailure | null {
  const chain = chainOf(error);
  const has = (re: RegExp) => chain.some((c) => re.test(c.code) || re.test(c.message));
  const status = chain.map((c) => /HTTP status (\d{3})/i.exec(c.message)?.[1]).find(Boolean);
  if (status === "401" || status === "403") {
    return {
      kind: "unauthorized",
      reason: authTokenSet
        ? `unauthorized: the server refused DATABASE_AUTH_TOKEN (HTTP ${status})`
        : `unauthorized: the server needs DATABASE_AUTH_TOKEN (HTTP ${status})`,
    };
  }
  if (status === "404")
    return {
      kind: "not_found",
      reason: "not found: the server answered HTTP 404 (is DATABASE_URL the database's own URL?)",
    };
  if (has(/ECONNREFUSED|connection refused|Unable to connect/i))
    return { kind: "refused", reason: "connection refused: nothing listens at that address" };
  // workerd reports a refused connection (and one dropped before any answer) only as this.
  if (has(/Network connection lost/i))
    return {
      kind: "refused",
      reason: "connection refused or dropped: nothing answered at that address",
    };
  if (has(/ENOTFOUND|EAI_AGAIN|getaddrinfo|DNS lookup|name not resolved/i))
    return { kind: "dns", reason: "host not found (DNS lookup failed)" };
  if (has(/EPROTO|TLS|SSL|certificate|CERT_|handshake/i)) {
    const detail =
      chain.find((c) => /TLS|SSL|certificate|CERT_|handshake/i.test(c.message))?.message ??
      "handshake failed";
    return { kind: "tls", reason: `TLS failed: ${oneLine(detail)}` };
  }
  if (has(/ETIMEDOUT|timed? ?out|TimeoutError|aborted due to timeout/i))
    return { kind: "timeout", reason: "timed out waiting for the server" };
  if (status && status >= "500")
    return { kind: "server_error", reason: `the server failed (HTTP ${status})` };
  if (status) return { kind: "server_error", reason: `the server answered HTTP ${status}` };
  if (has(/ECONNRESET|socket|network|fetch failed|Network connection lost/i))
    return { kind: "unreachable", reason: `unreachable: ${oneLine(chain.at(-1)!.message)}` };
  const fileProblem = FILE_PROBLEMS.find(([re]) => has(re));
  if (fileProblem) return { kind: "local_file", reason: fileProblem[1] };
  if (
    has(
      /ENOENT|EACCES|EPERM|EROFS|Unable to open connection to local database|SQLITE_CANTOPEN|unable to open database file/i,
    )
  ) {
    return {
      kind: "local_file",
      reason: `cannot open the database file: ${oneLine(chain.at(-1)!.message)}`,
    };
  }
  return null;
}

/**
 * The failure of a remote database's link (the HTTP round trip to Turso, sqld, the Hrana tool)
 * that `error` stands for, or null for anything else: a statement's own error (a code of SQLite's
 * or the server's SQL layer, such as a constraint or a busy lock), a Redis client's, a bug. An
 * answer that is not Hrana (a 200 whose body is not the protocol's JSON) is `bad_answer`.
 */
export function remoteFailureOf(error: unknown): DatabaseFailure | null {
  const chain = chainOf(error);
  if (chain.some((c) => /^(SQLITE_|SQL_)/.test(c.code))) return null;
  let e: any = error;
  for (let depth = 0; e && depth < 8; depth++, e = e.cause)
    if (e?.name === "RedisClientError") return null;
  const known = classifyDatabaseError(error);
  if (known) return known.kind === "local_file" ? null : known;
  const unreadable = chain.some(
    (c) =>
      /^(HRANA_PROTO_ERROR|HRANA_CLOSED_ERROR|SERVER_ERROR|STREAM_EXPIRED)$/.test(c.code) ||
      /JSON Parse error|Unexpected end of JSON|is not valid JSON|Unexpected token|Unterminated string/i.test(
        c.message,
      ),
  );
  return unreadable
    ? { kind: "bad_answer", reason: "the server's answer could not be read" }
    : null;
}

/** What SQLite says about the file itself, in words an operator can act on. */
const FILE_PROBLEMS: Array<[RegExp, string]> = [
  [/SQLITE_READONLY|readonly database/i, "the database file (or its folder) is read-only"],
  [/SQLITE_CORRUPT|malformed/i, "the database file is damaged (SQLITE_CORRUPT); restore a backup"],
  [/SQLITE_NOTADB|not a database/i, "the file is not a SQLite database"],
  [/SQLITE_FULL|database or disk is full/i, "the disk is full"],
  [/SQLITE_IOERR|disk I\/O error/i, "the disk failed to read or write the file (SQLITE_IOERR)"],
];

function oneLine(s: string): string {
  return s.replace(/\s+/g, " ").trim().replace(/\.+$/, "").slice(0, 200);
}

/** `database <url>: <reason>` for a connection failure, else null. Secrets never appear. */
export function describeDatabaseError(
  error: unknown,
  url: string,
  authToken?: string,
): string | null {
  const failure = classifyDatabaseError(error, authToken !== undefined);
  if (!failure) return null;
  let line = `database ${redactUrl(url)}: ${failure.reason}`;
  if (authToken) line = line.split(authToken).join("***");
  return line;
}
