/**
 * Settling before a round-trip count: a warm request leaves background work that would
 * otherwise land inside the measured one.
 */
import { sql } from "drizzle-orm";
import { servicesOf } from "../../src/app";
import { flushSearchIndexesNow } from "../../src/plugins/custom-objects/search/flush";
import { waitFor } from "./wait";

/**
 * A token use this recent is not written again by a request that starts now (it writes once a
 * minute): the measured request has the 10 s left to finish.
 */
const RECENT_USE_MS = 50_000;
/** The longest a settle can take: a use just older than `RECENT_USE_MS` is written again at 60 s. */
const SETTLE_MS = 75_000;

/**
 * Waits until the deferred search-index flush is done and `username`'s token use (every token's,
 * without a name) is recorded recently enough that the measured request does not write it
 * again; `use` is one request as that caller, sent while it is not (it records the use).
 */
export async function settleBeforeCounting(
  app: Parameters<typeof servicesOf>[0],
  use: (() => Promise<unknown>) | null,
  username?: string,
) {
  const services = servicesOf(app);
  await flushSearchIndexesNow(services);
  const who = username === undefined ? sql`` : sql` WHERE u.username = ${username}`;
  const lastUsed = async () => {
    const [row] = (await services.db.orm.all(
      sql`SELECT max(t.last_used) AS at FROM tokens t JOIN users u ON u.id = t.user_id${who}`,
    )) as Array<{ at: string | null }>;
    return row?.at ? Date.parse(row.at) : 0;
  };
  await waitFor(
    async () => {
      if (Date.now() - (await lastUsed()) < RECENT_USE_MS) return true;
      await use?.();
      return false;
    },
    // polled gently: a use older than RECENT_USE_MS is written again only at the minute
    { message: `${username ?? "the"} token's use recorded`, timeoutMs: SETTLE_MS, intervalMs: 200 },
  );
}
