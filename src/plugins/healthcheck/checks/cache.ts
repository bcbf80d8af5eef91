/** `health_check.cache.backends.CacheBackend`: the configured cache takes a write and a read. */
import { isResilient, unwrapCache } from "../../../services/cache/resilient";
import {
  BaseHealthCheckBackend,
  messageOf,
  ServiceReturnedUnexpectedResult,
  ServiceUnavailable,
} from "../backends";

/** Long enough to read the value back, short enough that a crash mid-check leaves little behind. */
const PROBE_TTL_SECONDS = 10;

export class CacheBackendHealthCheck extends BaseHealthCheckBackend {
  /**
   * A cache behind the resilient wrapper is optional: while it fails, requests are served from
   * the database, so its failure is reported but does not fail `/readyz` (issue 30, decision 0080).
   */
  override criticalService = !isResilient(this.services.cache);

  override identifier(): string {
    return "CacheBackend";
  }

  async checkStatus(): Promise<void> {
    // Past the resilient wrapper: it hides outages from requests, the check must see them.
    const cache = unwrapCache(this.services.cache);
    const key = `health_check:${crypto.randomUUID()}`;
    const value = `itworks-${crypto.randomUUID()}`;
    try {
      await cache.set(key, value, PROBE_TTL_SECONDS);
      const read = await cache.get<string>(key);
      if (read !== value) {
        this.addError(
          new ServiceReturnedUnexpectedResult(
            `cache backend "${cache.backend}" did not return the value just written`,
          ),
        );
      }
    } catch (e) {
      this.addError(new ServiceUnavailable(`cache backend "${cache.backend}": ${messageOf(e)}`), e);
    } finally {
      // Not awaited: the probe expires by itself, and the check need not wait a third round trip.
      void cache.delete(key).catch(() => undefined);
    }
  }
}
