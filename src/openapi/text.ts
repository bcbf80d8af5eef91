/**
 * The OpenAPI document's text, kept as bytes: written a path and a component schema a step,
 * encoded in chunks with turns between, around a hole where each request's `servers` goes
 * (decision 0210). A request's answer streams the kept chunks: nothing is written, joined or
 * encoded again per request, whatever its origin.
 */
import { yieldWhenDue } from "../turns";
import { type Steps, yamlMember, yamlPieces } from "./yaml";

export type Format = "json" | "yaml";

/** A document's text as bytes, before and after the member each request writes for itself. */
export interface Encoded {
  head: Uint8Array[];
  tail: Uint8Array[];
}

/** Marks the hole among a text's pieces: a raw NUL is never a piece of JSON or YAML text. */
const HOLE = "\u0000";
/** What is written a member a step: each path, each component schema. */
const STEPS: Steps = { paths: {}, components: { schemas: {} } };
/** Characters encoded in one step. */
const CHUNK = 65_536;
/** The member each request writes: the document names the origin it was asked at. */
const OWN_MEMBER = "servers";

/** `doc`'s text in `format` as bytes, its `servers` member left as a hole. */
export async function encodedText(doc: Record<string, unknown>, format: Format): Promise<Encoded> {
  const pieces =
    format === "yaml"
      ? await yamlPieces(doc, STEPS, { key: OWN_MEMBER, marker: HOLE })
      : await jsonPieces(doc, STEPS, OWN_MEMBER);
  return encoded(pieces);
}

/** The answer: the kept bytes with this request's `servers` in the hole, and its length. */
export function answerBody(
  text: Encoded,
  format: Format,
  servers: unknown,
): { body: ReadableStream<Uint8Array>; length: number } {
  const own = new TextEncoder().encode(
    format === "yaml"
      ? yamlMember(OWN_MEMBER, servers)
      : `${JSON.stringify(OWN_MEMBER)}:${JSON.stringify(servers)}`,
  );
  const chunks = [...text.head, own, ...text.tail];
  const length = chunks.reduce((n, c) => n + c.byteLength, 0);
  let next = 0;
  const source: UnderlyingDefaultSource<Uint8Array> & KnownLength = {
    pull(controller) {
      if (next < chunks.length) controller.enqueue(chunks[next++]!);
      else controller.close();
    },
    // workerd sends a stream's length only when told it (else chunked, no Content-Length); Bun
    // takes the header
    expectedLength: length,
  };
  return { body: new ReadableStream<Uint8Array>(source), length };
}

/** workerd's own member of a stream's source: the bytes it will give, sent as Content-Length. */
interface KnownLength {
  expectedLength: number;
}

/** Pieces grouped into chunks of about `CHUNK` characters, each encoded in a step of its own. */
async function encoded(pieces: string[]): Promise<Encoded> {
  const encoder = new TextEncoder();
  const out: Encoded = { head: [], tail: [] };
  let into = out.head;
  let group: string[] = [];
  let size = 0;
  const flush = async () => {
    if (!group.length) return;
    await yieldWhenDue();
    into.push(encoder.encode(group.join("")));
    group = [];
    size = 0;
  };
  for (const piece of pieces) {
    if (piece === HOLE) {
      await flush();
      into = out.tail;
      continue;
    }
    group.push(piece);
    size += piece.length;
    if (size >= CHUNK) await flush();
  }
  await flush();
  return out;
}

/**
 * `JSON.stringify(obj)` in pieces, `hole` (a top-level member) as `HOLE`; the members named in
 * `steps` are written a member a step with turns between (decision 0205): the whole text of a
 * document of hundreds of types (~12 MB at 300) in one go held the loop. Joined, the same text.
 */
async function jsonPieces(
  obj: Record<string, unknown>,
  steps: Steps,
  hole?: string,
  step = false,
  out: string[] = [],
): Promise<string[]> {
  out.push("{");
  let first = true;
  for (const [k, v] of Object.entries(obj)) {
    if (v === undefined) continue;
    if (step) await yieldWhenDue();
    if (!first) out.push(",");
    first = false;
    const inner = steps[k];
    if (k === hole) out.push(HOLE);
    else if (inner && v && typeof v === "object" && !Array.isArray(v)) {
      out.push(`${JSON.stringify(k)}:`);
      await jsonPieces(v as Record<string, unknown>, inner, undefined, true, out);
    } else out.push(`${JSON.stringify(k)}:${JSON.stringify(v)}`);
  }
  out.push("}");
  return out;
}
