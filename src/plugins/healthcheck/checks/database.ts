/**
 * `health_check.Database`: the libSQL database answers `SELECT 1` (reachable, authenticated,
 * working). It observes the driver (`file`: a local file through the native libSQL library;
 * `libsql`: a libSQL server over HTTP) and the `SELECT 1` round trip as `latency`.
 */
import {
  BaseHealthCheckBackend,
  messageOf,
  ServiceReturnedUnexpectedResult,
  ServiceUnavailable,
} from "../backends";

export class DatabaseHealthCheck extends BaseHealthCheckBackend {
  override identifier(): string {
    return "Database";
  }

  async checkStatus(): Promise<void> {
    const db = this.services.db;
    this.observe("driver", db.kind === "local" ? "file" : db.kind === "d1" ? "d1" : "libsql");
    let value: unknown;
    try {
      const started = performance.now();
      const result = await db.execute({ sql: "SELECT 1 AS ok", args: [] });
      this.observe("latency", Math.round((performance.now() - started) * 1000) / 1000, "ms");
      value = result.rows[0]?.ok;
    } catch (e) {
      this.addError(new ServiceUnavailable(`SELECT 1 failed: ${messageOf(e)}`), e);
      return;
    }
    if (Number(value) !== 1)
      this.addError(new ServiceReturnedUnexpectedResult(`SELECT 1 returned ${String(value)}`));
  }
}
