/** `health_check.Database`: the libSQL database answers `SELECT 1` (reachable, authenticated, working). */
import { BaseHealthCheckBackend, messageOf, ServiceReturnedUnexpectedResult, ServiceUnavailable } from "../backends";

export class DatabaseHealthCheck extends BaseHealthCheckBackend {
  override identifier(): string {
    return "Database";
  }

  async checkStatus(): Promise<void> {
    let value: unknown;
    try {
      const result = await this.services.db.client.execute("SELECT 1 AS ok");
      value = result.rows[0]?.[0];
    } catch (e) {
      this.addError(new ServiceUnavailable(`SELECT 1 failed: ${messageOf(e)}`), e);
      return;
    }
    if (Number(value) !== 1) this.addError(new ServiceReturnedUnexpectedResult(`SELECT 1 returned ${String(value)}`));
  }
}
