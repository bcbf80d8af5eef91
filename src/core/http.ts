/** Request plumbing shared by every route: JSON bodies (400 malformed, 413 oversized) and absolute URLs. */
import type { Context } from "hono";
import { ApiError } from "./errors";
import type { Ctx } from "./context";

export const tooLarge = (limit: number) =>
  ApiError.detail(413, `Request body is larger than the limit of ${limit} bytes.`, "payload_too_large");

/**
 * Reads the request body as JSON. Empty bodies read as `{}` (DRF does the same); a body that
 * is not JSON answers 400; a non-JSON content type answers 415.
 */
export async function readJson(c: Ctx): Promise<unknown> {
  const type = c.req.header("content-type");
  if (type && !/^application\/([a-z.+-]*\+)?json\b/i.test(type.trim()) && !/^text\/plain\b/i.test(type.trim())) {
    throw ApiError.detail(415, `Unsupported media type "${type.split(";")[0]}" in request.`, "unsupported_media_type");
  }
  const limit = c.var.services.config.maxBodyBytes;
  const declared = Number(c.req.header("content-length") ?? "0");
  if (declared > limit) throw tooLarge(limit);
  const buf = await c.req.arrayBuffer();
  if (buf.byteLength > limit) throw tooLarge(limit);
  const text = new TextDecoder().decode(buf);
  if (!text.trim()) return {};
  try {
    return JSON.parse(text);
  } catch (e) {
    throw ApiError.detail(400, `JSON parse error - ${(e as Error).message}`, "parse_error");
  }
}

/** `scheme://host` of the request, honouring X-Forwarded-Proto behind a proxy. */
export function baseUrlOf(c: Context): string {
  const url = new URL(c.req.url);
  const proto = c.req.header("x-forwarded-proto")?.split(",")[0]?.trim();
  if (proto === "http" || proto === "https") url.protocol = proto + ":";
  return url.origin;
}
