/** `url`: an http(s)/ftp(s) URL of at most 2000 characters. */
import * as v from "valibot";
import { MAX_TEXT_CHARS } from "../../../core/limits";
import { textLike } from "./text";

const URL_SCHEMES = new Set(["http:", "https:", "ftp:", "ftps:"]);

function isUrl(raw: string): boolean {
  try {
    const u = new URL(raw);
    return URL_SCHEMES.has(u.protocol) && !!u.host;
  } catch {
    return false;
  }
}

export const url = textLike({
  name: "url",
  indexed: false,
  canBeUnique: true,
  lossless: ["text", "longtext"],
  format: "uri",
  checkOther: true,
  maxChars: MAX_TEXT_CHARS,
  actions: () => [
    v.check(isUrl, "Enter a valid URL."),
    v.maxLength(2000, "Ensure this field has no more than 2000 characters."),
  ],
});
