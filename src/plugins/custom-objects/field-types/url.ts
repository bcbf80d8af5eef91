/**
 * `url`: an http(s)/ftp(s) URL of at most 2000 characters, with an optional link title beside it
 * (custom objects 0.7): the title lives in `<name>_title` and reads `""` when unset (decision
 * 0100). Like upstream, a url field never changes type: its columns would not match.
 */
import * as v from "valibot";
import { MAX_TEXT_CHARS } from "../../../core/limits";
import { parseWith } from "./base";
import { textLike } from "./text";
import type { Companion, FieldTypeModule } from "./types";

const URL_SCHEMES = new Set(["http:", "https:", "ftp:", "ftps:"]);

function isUrl(raw: string): boolean {
  try {
    const u = new URL(raw);
    return URL_SCHEMES.has(u.protocol) && !!u.host;
  } catch {
    return false;
  }
}

/** At most 2000 characters: the URL check the schema's pipe makes after `isUrl`. */
const URL_MAX_CHARS = 2000;

/** Upstream's title column is a CharField(max_length=200). */
const LINK_TITLE_MAX = 200;

/**
 * Control characters (C0, DEL, C1) and bidirectional embeddings, overrides and isolates: a link
 * title is one line of text shown in place of its URL, and these only serve to disguise it.
 * Stricter than upstream, which refuses only NUL (DRF's CharField).
 */
function disguising(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || (c >= 0x7f && c <= 0x9f)) return true;
    if ((c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069)) return true;
  }
  return false;
}

const titleSchema = v.pipe(
  v.string("Not a valid string."),
  // DRF's CharField trims surrounding whitespace before it measures
  v.trim(),
  v.maxLength(LINK_TITLE_MAX, `Ensure this field has no more than ${LINK_TITLE_MAX} characters.`),
  v.check(
    (s) => !disguising(s),
    "Control characters and bidirectional formatting characters are not allowed.",
  ),
) as v.GenericSchema<unknown, unknown>;

const linkTitle: Companion = {
  suffix: "title",
  sqlType: "TEXT",
  encode: (raw) => {
    if (raw === null || raw === undefined) return { value: null };
    const r = parseWith(titleSchema, raw);
    return "error" in r || r.value !== "" ? r : { value: null };
  },
  decode: (stored) => (stored === null || stored === undefined ? "" : String(stored)),
  describeKind: "string",
  readSchema: {
    type: "string",
    description: "The link title shown instead of the URL (empty when it has none).",
  },
  writeSchema: {
    type: ["string", "null"],
    maxLength: LINK_TITLE_MAX,
    description: "The link title shown instead of the URL; null or an empty string clears it.",
  },
};

export const url: FieldTypeModule = {
  ...textLike({
    name: "url",
    indexed: false,
    canBeUnique: true,
    lossless: [],
    format: "uri",
    maxChars: MAX_TEXT_CHARS,
    actions: () => [
      v.check(isUrl, "Enter a valid URL."),
      v.maxLength(URL_MAX_CHARS, `Ensure this field has no more than ${URL_MAX_CHARS} characters.`),
    ],
    accepts: (s) => s.length <= URL_MAX_CHARS && isUrl(s),
  }),
  companions: [linkTitle],
  fixedType: true,
};
