/**
 * `host_healthcheck_plugin.backends.redis.*`: the host's `REDIS['caching']` and `REDIS['tasks']`
 * answer PING.
 */
import { BaseHealthCheckBackend, messageOf, ServiceReturnedUnexpectedResult, ServiceUnavailable } from "../backends";

abstract class HostRedisHealthCheck extends BaseHealthCheckBackend {
  protected abstract readonly role: "caching" | "tasks";

  async checkStatus(): Promise<void> {
    const redis = this.services.redis[this.role];
    if (!redis) {
      this.addError(new ServiceUnavailable(`REDIS['${this.role}'] is not configured`));
      return;
    }
    let reply: unknown;
    try {
      reply = await redis.ping();
    } catch (e) {
      this.addError(new ServiceUnavailable(`REDIS['${this.role}'] did not answer PING (${messageOf(e)})`), e);
      return;
    }
    if (String(reply).toUpperCase() !== "PONG") {
      this.addError(new ServiceReturnedUnexpectedResult(`REDIS['${this.role}'] answered PING with ${JSON.stringify(reply)}`));
    }
  }
}

export class HostRedisCacheHealthCheck extends HostRedisHealthCheck {
  protected readonly role = "caching";
  override identifier(): string {
    return "HostRedisCacheHealthCheck";
  }
}

export class HostRedisTasksHealthCheck extends HostRedisHealthCheck {
  protected readonly role = "tasks";
  override identifier(): string {
    return "HostRedisTasksHealthCheck";
  }
}
