/** Request plumbing shared by every route: JSON bodies (400 malformed, 413 oversized) and absolute URLs. */
import type { Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import { ApiError } from "./errors";
import type { Ctx } from "./context";
import { MAX_JSON_DEPTH } from "./limits";
import type { ContentfulStatusCode } from "hono/utils/http-status";

/** The status a request gets when its client went away first (nobody reads the answer). */
export const CLIENT_CLOSED_REQUEST = 499;

const tooLarge = (limit: number) =>
  ApiError.detail(
    413,
    `Request body is larger than the limit of ${limit} bytes.`,
    "payload_too_large",
  );

/**
 * Reads the request body as JSON. Empty bodies read as `{}` (DRF does the same); a body that
 * is not JSON answers 400; a non-JSON content type answers 415.
 */
export async function readJson(c: Ctx): Promise<unknown> {
  return (await readJsonBody(c)).body;
}

/**
 * `readJson`, and whether any string or key of the body may hold a NUL: in JSON text one can
 * only be the escape `\u0000` (the parser refuses a raw control character), so a body without
 * that text holds none and need not be walked for one.
 */
export async function readJsonBody(c: Ctx): Promise<{ body: unknown; mayHoldNul: boolean }> {
  const type = c.req.header("content-type");
  if (
    type &&
    !/^application\/([a-z.+-]*\+)?json\b/i.test(type.trim()) &&
    !/^text\/plain\b/i.test(type.trim())
  ) {
    throw ApiError.detail(
      415,
      `Unsupported media type "${type.split(";")[0]}" in request.`,
      "unsupported_media_type",
    );
  }
  const text = new TextDecoder().decode(await readBody(c));
  if (!text.trim()) return { body: {}, mayHoldNul: false };
  const body = parseJsonText(text);
  return { body, mayHoldNul: text.includes("\\u0000") || text.includes("\0") };
}

/**
 * The raw request body within `MAX_BODY_BYTES` (413 past it). `hono/body-limit` does the
 * counting: a declared Content-Length is checked before anything is read, and a streamed body
 * stops being read at the limit. It runs where the body is read, after authentication and
 * permission checks, so a caller who may not write still gets 403 (not 413) whatever they send.
 */
export async function readBody(c: Ctx): Promise<ArrayBuffer> {
  // a write route that runs again on fresh credentials (decision 0089) reads the body it read
  const read = bodies.get(c.req.raw);
  if (read) return read;
  const body = await readBodyOnce(c);
  bodies.set(c.req.raw, body);
  return body;
}
const bodies = new WeakMap<Request, ArrayBuffer>();

async function readBodyOnce(c: Ctx): Promise<ArrayBuffer> {
  const limit = c.get("services").config.maxBodyBytes;
  await bodyLimit({
    maxSize: limit,
    onError: () => {
      throw tooLarge(limit);
    },
  })(c, async () => {});
  try {
    return await c.req.arrayBuffer();
  } catch (e) {
    throw bodyReadFailure(c, e);
  }
}

/**
 * A request body that could not be read is the client's doing, never a 500: a client that
 * closed the connection mid-upload gets 499 (nginx's "client closed request", logged as a client
 * event by the access log), a body the runtime could not decode 400 (decision 0068).
 */
function bodyReadFailure(c: Ctx, e: unknown): ApiError {
  if (e instanceof ApiError) return e;
  const message = String((e as Error)?.message ?? e);
  if (c.req.raw.signal?.aborted || /clos|abort|reset|EPIPE|ECONN/i.test(message)) {
    return ApiError.detail(
      CLIENT_CLOSED_REQUEST as ContentfulStatusCode,
      "The client closed the connection before its request body arrived.",
      "client_closed_request",
    );
  }
  return ApiError.detail(400, "The request body could not be read.", "body_unreadable");
}

/**
 * `JSON.parse` behind the depth limit: the nesting is measured on the text first, in one loop
 * without recursion, so neither the parser nor any code walking the value can overflow the stack.
 */
function parseJsonText(text: string): unknown {
  const depth = jsonDepthExceeds(text, MAX_JSON_DEPTH);
  if (depth) {
    throw ApiError.detail(
      400,
      `JSON nests deeper than the limit of ${MAX_JSON_DEPTH} levels of arrays and objects.`,
      "json_too_deep",
      { limit: MAX_JSON_DEPTH },
    );
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw ApiError.detail(400, `JSON parse error - ${(e as Error).message}`, "parse_error");
  }
}

/** Whether brackets outside strings nest deeper than `limit` (malformed text is left to the parser). */
function jsonDepthExceeds(text: string, limit: number): boolean {
  return jsonShapeExceeds(text, limit, Number.POSITIVE_INFINITY) === "depth";
}

/**
 * Whether JSON text nests deeper than `depth` or holds more than `items` commas outside strings
 * (each separates two items of an array or members of an object): one loop over the text,
 * before any parser builds a value of it. Malformed text is left to the parser.
 */
export function jsonShapeExceeds(
  text: string,
  depth: number,
  items: number,
): "depth" | "items" | null {
  let level = 0;
  let commas = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 92 /* \ */) i++;
      else if (ch === 34 /* " */) inString = false;
    } else if (ch === 34) inString = true;
    else if (ch === 44 /* , */) {
      if (++commas > items) return "items";
    } else if (ch === 91 /* [ */ || ch === 123 /* { */) {
      if (++level > depth) return "depth";
    } else if (ch === 93 /* ] */ || ch === 125 /* } */) level--;
  }
  return null;
}

/** A host name, IPv4 or bracketed IPv6 address, with an optional port. */
const FORWARDED_HOST =
  /^(?:[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?|\[[0-9a-f:.]{2,45}\])(?::\d{1,5})?$/i;

/**
 * The entry of a proxy header that the outermost trusted proxy wrote: with `TRUSTED_PROXY_HOPS`
 * = n, the n-th from the right (a proxy that overwrites the header leaves one entry: that one).
 * Null when no proxy is trusted (n = 0): then a client could write it (decision 0069).
 */
function trustedForwarded(c: Context, header: string): string | null {
  const services = c.get("services") as { config?: { trustedProxyHops?: number } } | undefined;
  const hops = services?.config?.trustedProxyHops;
  if (!hops) return null;
  const entries = (c.req.header(header) ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  if (!entries.length) return null;
  return entries[Math.max(0, entries.length - hops)]!;
}

/**
 * The request's URL as the client addressed it: behind trusted proxies (`TRUSTED_PROXY_HOPS` >
 * 0) with the scheme of X-Forwarded-Proto and the host of X-Forwarded-Host; otherwise as
 * received, whatever those headers say. Absolute URLs (`url`, `next`, API roots) come from it.
 */
export function publicUrlOf(c: Context): URL {
  const url = new URL(c.req.url);
  const proto = trustedForwarded(c, "x-forwarded-proto")?.toLowerCase();
  if (proto === "http" || proto === "https") url.protocol = `${proto}:`;
  const host = trustedForwarded(c, "x-forwarded-host");
  if (host && FORWARDED_HOST.test(host)) url.host = host;
  return url;
}

/** `scheme://host` of the request as the client addressed it (see `publicUrlOf`). */
export function baseUrlOf(c: Context): string {
  const services = c.get("services") as { config?: { trustedProxyHops?: number } } | undefined;
  if (services?.config?.trustedProxyHops) return publicUrlOf(c).origin;
  // no trusted proxy: the origin of the URL as received, parsed once per distinct head (the
  // text before its path: a server answers few), not once per request (decision 0214)
  const url = c.req.url;
  const path = url.indexOf("/", url.indexOf("//") + 2);
  const head = path < 0 ? url : url.slice(0, path);
  let origin = originOfHead.get(head);
  if (origin === undefined) {
    origin = new URL(head).origin;
    if (originOfHead.size >= 64) originOfHead.clear();
    originOfHead.set(head, origin);
  }
  return origin;
}

/** Origins of URL heads (`scheme://host[:port]`) lately seen: a bounded pure memo. */
const originOfHead = new Map<string, string>();
