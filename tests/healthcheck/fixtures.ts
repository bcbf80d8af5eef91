/**
 * A third-party plugin with small custom checks for the health suites that need no Redis, and
 * an app factory over it (fresh libSQL file per app, closed after each test). The health plugin
 * of these apps times and caches checks on `clock`, which only the tests move.
 */
import { Hono } from "hono";
import type { HonoEnv } from "../../src/core/context";
import {
  BaseHealthCheckBackend,
  createHealthcheckPlugin,
  healthcheckPlugin,
  ServiceUnavailable,
} from "../../src/plugins/healthcheck";
import { BUILTIN_PLUGINS } from "../../src/plugins/registry";
import type { HostPlugin } from "../../src/plugins/types";
import { makeTestApp, type TestApp } from "../helpers/app";
import { manualClock } from "../helpers/wait";
import { healthConfig } from "./helpers";

/** Runs of each fixture check (constructor calls), by class name. */
export const runs = new Map<string, number>();
const counted = (name: string) => runs.set(name, (runs.get(name) ?? 0) + 1);

class Healthy extends BaseHealthCheckBackend {
  async checkStatus() {
    counted("Healthy");
  }
}

class Broken extends BaseHealthCheckBackend {
  async checkStatus() {
    counted("Broken");
    this.addError(
      new ServiceUnavailable(
        "upstream answered 503 for https://user:hunter2@api.example.test/v1?key=abc",
      ),
    );
  }
}

class Soft extends BaseHealthCheckBackend {
  override criticalService = false;
  async checkStatus() {
    counted("Soft");
    this.addError(new ServiceUnavailable("replica lagging"));
  }
}

/** The clock the health plugin of every fixture app runs on. */
export const clock = manualClock();

/**
 * How Sleepy behaves (tests set it; reset after each test): it waits for `until` when set, then
 * takes `ms` on {@link clock} (no real waiting); with `hang` it never finishes, so the runner's
 * real timeout fires.
 */
export const slow: { ms: number; until: Promise<unknown> | null; hang: boolean } = {
  ms: 150,
  until: null,
  hang: false,
};
class Sleepy extends BaseHealthCheckBackend {
  async checkStatus() {
    counted("Sleepy");
    if (slow.hang) await new Promise(() => {});
    if (slow.until) await slow.until;
    clock.advance(slow.ms);
  }
}

/** Observes a figure of each kind (count, ms, s, text with characters to escape, unknown). */
class Observing extends BaseHealthCheckBackend {
  override identifier() {
    return 'Observing "quoted"';
  }
  async checkStatus() {
    counted("Observing");
    this.observe("items", 5, "jobs");
    this.observe("lag", 1500, "ms");
    this.observe("age", 2.5, "s");
    this.observe("mode", 'a "b" \\ c');
    this.observe("never", null, "s");
  }
}

const fixturePlugin: HostPlugin = {
  name: "fixtures",
  version: "1.0.0",
  setup: () => ({
    routes: new Hono<HonoEnv>(),
    healthChecks: {
      "fixtures.Healthy": Healthy,
      "fixtures.Broken": Broken,
      "fixtures.Soft": Soft,
      "fixtures.Sleepy": Sleepy,
      "fixtures.Observing": Observing,
    },
  }),
};

const open: TestApp[] = [];
/**
 * Closes the apps a test made and resets {@link slow}. Each test file registers it with its own
 * `afterEach(resetFixtures)`: a hook registered here would bind to whichever file imported this
 * module first, and the others would inherit one test's `slow.hang`.
 */
export async function resetFixtures() {
  await Promise.all(open.splice(0).map((t) => t.close()));
  Object.assign(slow, { ms: 150, until: null, hang: false });
}

/** The app with the fixture plugin enabled and these health settings (null: none). */
export async function fixtureApp(
  settings: Record<string, unknown> | null,
  env: Record<string, string> = {},
): Promise<TestApp> {
  const all: Record<string, string> = {
    PLUGINS: "custom_objects,host_healthcheck_plugin,fixtures",
    ...env,
  };
  if (settings) all.PLUGINS_CONFIG = healthConfig(settings);
  const plugins = BUILTIN_PLUGINS.map((p) =>
    p === healthcheckPlugin ? createHealthcheckPlugin({ now: clock.now }) : p,
  );
  const t = await makeTestApp(all, { availablePlugins: [...plugins, fixturePlugin] });
  open.push(t);
  return t;
}

/** The ConfigError message an app with these settings fails to start with (null: it started). */
export async function startupError(settings: Record<string, unknown>): Promise<string | null> {
  return fixtureApp(settings).then(
    () => null,
    (e: Error) => e.message,
  );
}
