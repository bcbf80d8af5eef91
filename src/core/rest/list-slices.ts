/**
 * A large list page read, built and written in slices with the event loop's turns between
 * (decision 0210): 800 custom object types (3 MB) read and built in one go held it 60–70 ms.
 */
import { yieldWhenDue } from "../../turns";
import { ROW_OVERHEAD_BYTES } from "./budget";
import type { PageRow } from "./page-anchors";
import type { ApiRecord, ReadContext, Resource } from "./resource";

/** Page weight (its rows' bytes as the response budget counts them) loaded in one step. */
const SLICE_BYTES = 128 * 1024;
/** Rows loaded in one step at most, weighed or not. */
const SLICE_ROWS = 250;

/** The page's ids in slices of at most `SLICE_ROWS` rows and (where weighed) `SLICE_BYTES`. */
function slicesOf(page: readonly PageRow[]): number[][] {
  const slices: number[][] = [];
  let slice: number[] = [];
  let bytes = 0;
  for (const row of page) {
    const weight = ROW_OVERHEAD_BYTES + Number(row.bytes ?? 0);
    if (slice.length && (slice.length >= SLICE_ROWS || bytes + weight > SLICE_BYTES)) {
      slices.push(slice);
      slice = [];
      bytes = 0;
    }
    slice.push(Number(row.id));
    bytes += weight;
  }
  if (slice.length) slices.push(slice);
  return slices;
}

/**
 * The page's records, in its order: a slice's rows read and built a step, a turn given between
 * when due. A page of one slice is one load, as before; a larger one reads its slices one after
 * another, as its rows and their embedded records already were (no snapshot spans them).
 */
export async function loadInSlices(
  ctx: ReadContext,
  resource: Resource,
  page: readonly PageRow[],
): Promise<ApiRecord[]> {
  const slices = slicesOf(page);
  if (slices.length <= 1) return resource.load(ctx, slices[0] ?? []);
  const out: ApiRecord[] = [];
  for (const ids of slices) {
    await yieldWhenDue();
    out.push(...(await resource.load(ctx, ids)));
  }
  return out;
}

/** Records written in one `JSON.stringify` (a default page) before the text is written a record a step. */
const ONE_GO = 50;

/**
 * A list's JSON body: `head` (`{"count":…,"results":`, see `listHead`) and the records, a record
 * a step with a turn between when due. The text `c.json` writes for the same answer.
 */
export async function listJsonWithTurns(
  head: string,
  results: readonly unknown[],
): Promise<string> {
  if (results.length <= ONE_GO) return `${head}${JSON.stringify(results)}}`;
  const parts: string[] = [];
  for (const record of results) {
    await yieldWhenDue();
    parts.push(JSON.stringify(record));
  }
  return `${head}[${parts.join(",")}]}`;
}
