/** `longtext`: text that is neither indexed nor unique. */
import { textLike } from "./text";

export const longtext = textLike({
  name: "longtext",
  indexed: false,
  canBeUnique: false,
  lossless: ["text"],
});
