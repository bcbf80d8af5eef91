/**
 * `host_healthcheck_plugin.backends.redis.*`: the host's `REDIS['caching']` and `REDIS['tasks']`
 * answer PING; the tasks check also reads the job queue's figures (depth, oldest pending job,
 * last worker heartbeat) and flags them against the `queue` thresholds.
 */
import { DatabaseLinkError } from "../../../db/remote-link";
import { isResilient } from "../../../services/cache/resilient";
import { lastHeartbeat } from "../../../services/tasks/heartbeat";
import {
  BaseHealthCheckBackend,
  messageOf,
  ServiceReturnedUnexpectedResult,
  ServiceUnavailable,
  ThresholdWarning,
} from "../backends";
import { queueThresholdsOf } from "../settings";

abstract class HostRedisHealthCheck extends BaseHealthCheckBackend {
  protected abstract readonly role: "caching" | "tasks";

  async checkStatus(): Promise<void> {
    if (await this.ping()) await this.afterPing();
  }

  /** Configured, or meant to be: a Redis that failed to start still counts (it names why). */
  override configured(): boolean {
    return !!this.services.redis[this.role] || !!this.services.redisDown?.[this.role];
  }

  /** More to check once Redis answered. */
  protected async afterPing(): Promise<void> {}

  /** PINGs the role's Redis; false (with the error added) when it did not answer PONG. */
  protected async ping(): Promise<boolean> {
    const redis = this.services.redis[this.role];
    if (!redis) {
      const down = this.services.redisDown?.[this.role];
      this.addError(
        new ServiceUnavailable(
          down
            ? `REDIS['${this.role}'] is not running: ${down}`
            : `REDIS['${this.role}'] is not configured`,
        ),
      );
      return false;
    }
    let reply: unknown;
    try {
      reply = await redis.ping();
    } catch (e) {
      this.addError(
        new ServiceUnavailable(`REDIS['${this.role}'] did not answer PING (${messageOf(e)})`),
        e,
      );
      return false;
    }
    if (String(reply).toUpperCase() !== "PONG") {
      this.addError(
        new ServiceReturnedUnexpectedResult(
          `REDIS['${this.role}'] answered PING with ${JSON.stringify(reply)}`,
        ),
      );
      return false;
    }
    return true;
  }
}

export class HostRedisCacheHealthCheck extends HostRedisHealthCheck {
  protected readonly role = "caching";
  /** Only the cache uses this Redis; behind the resilient wrapper it is optional (see CacheBackend). */
  override criticalService = !isResilient(this.services.cache);
  override identifier(): string {
    return "HostRedisCacheHealthCheck";
  }
}

export class HostRedisTasksHealthCheck extends HostRedisHealthCheck {
  protected readonly role = "tasks";
  override identifier(): string {
    return "HostRedisTasksHealthCheck";
  }

  /**
   * The queue's figures as observed values, and a problem (warning, or failure with
   * `on_problem: fail`) when the backlog or its oldest job is past its threshold, or no worker
   * beat for `worker_stale_seconds` (never having seen one counts only while jobs wait).
   */
  protected override async afterPing(): Promise<void> {
    const queue = this.services.tasks;
    if (!queue) return;
    const limits = queueThresholdsOf(this.services);
    let stats, heartbeat;
    try {
      [stats, heartbeat] = await Promise.all([queue.stats(), lastHeartbeat(queue)]);
    } catch (e) {
      // Redis answered; the database did not (the Database check says so): a warning here, so
      // the failing component is the one named failing (decision 0202).
      const failure =
        e instanceof DatabaseLinkError
          ? new ThresholdWarning(`the job queue's pending jobs could not be read (${e.message})`)
          : new ServiceUnavailable(`the job queue's figures could not be read (${messageOf(e)})`);
      this.addError(failure, e);
      return;
    }
    const now = Date.now();
    const seconds = (ms: number) => Math.max(0, Math.round(ms) / 1000);
    const oldestAge =
      stats.oldestPendingCreated === null
        ? null
        : seconds(now - Date.parse(stats.oldestPendingCreated));
    const heartbeatAge = heartbeat ? seconds(now - heartbeat.at) : null;
    this.observe("queue_depth", stats.ready, "jobs");
    this.observe("running_jobs", stats.processing, "jobs");
    this.observe("pending_jobs", stats.pending, "jobs");
    this.observe("oldest_pending_age", oldestAge, "s");
    this.observe("worker_heartbeat_age", heartbeatAge, "s");
    if (heartbeat) this.observe("worker_runtime", heartbeat.runtime);

    const fail = limits.onProblem === "fail";
    const backlog = (message: string) =>
      this.addError(
        fail ? new ServiceReturnedUnexpectedResult(message) : new ThresholdWarning(message),
      );
    const noWorker = (message: string) =>
      this.addError(fail ? new ServiceUnavailable(message) : new ThresholdWarning(message));
    if (stats.ready > limits.maxDepth)
      backlog(`${stats.ready} jobs waiting (max_depth ${limits.maxDepth})`);
    if (oldestAge !== null && oldestAge > limits.maxPendingAgeSeconds) {
      backlog(
        `the oldest pending job has waited ${Math.round(oldestAge)} s (max_pending_age_seconds ${limits.maxPendingAgeSeconds})`,
      );
    }
    if (heartbeatAge === null) {
      if (stats.pending > 0 || stats.ready > 0)
        noWorker(
          `no task worker has been seen and ${Math.max(stats.pending, stats.ready)} jobs wait`,
        );
    } else if (heartbeatAge > limits.workerStaleSeconds) {
      noWorker(
        `no task worker seen for ${Math.round(heartbeatAge)} s (worker_stale_seconds ${limits.workerStaleSeconds})`,
      );
    }
  }
}
