/** `longtext`: text that is neither indexed nor unique. */
import { MAX_LONGTEXT_CHARS } from "../../../core/limits";
import { textLike } from "./text";

export const longtext = textLike({
  name: "longtext",
  indexed: false,
  canBeUnique: false,
  lossless: ["text"],
  maxChars: MAX_LONGTEXT_CHARS,
});
