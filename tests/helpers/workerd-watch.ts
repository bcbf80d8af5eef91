/**
 * The workerd process a Miniflare starts, watched: when it ends before the test stops it, every
 * later request through its bindings fails (ECONNREFUSED, a 500 from the app), so the test says
 * how it ended (exit code or signal) instead of leaving a run of bare 500s to guess at.
 * `startMiniflare` starts one watched; `watched` makes a binding's failures name the end.
 */
import { Miniflare, type MiniflareOptions } from "miniflare";
import childProcess, { type ChildProcess } from "node:child_process";

export interface WorkerdWatch {
  /** workerd's pid (undefined when no workerd was seen starting). */
  readonly pid: number | undefined;
  /** How workerd ended, when it ended before `stopping()`; null while it runs. */
  ended(): string | null;
  /**
   * `error`, from a call through this workerd, as an error naming how workerd ended when it has;
   * else `error` itself. A refused connection is often seen before the exit is: for one, the
   * exit is waited for (at most `EXIT_NOTICE_MS`).
   */
  explain(error: unknown): Promise<unknown>;
  /** `explain` without the wait, for an error thrown at once (a call workerd answers in line). */
  explainNow(error: unknown): unknown;
  /** Marks the end that follows as expected (the test's own dispose). */
  stopping(): void;
}

/**
 * How long a lost connection waits for workerd's exit to be noticed: it comes a few ms after
 * the refusal when workerd is gone; while workerd runs, the wait ends at this bound.
 */
const EXIT_NOTICE_MS = 5_000;
/** What a call through a workerd that is gone fails with (`ECONNREFUSED`, a reset). */
const LOST_CONNECTION = /ECONNREFUSED|ECONNRESET|EPIPE|Unable to connect|socket|connection/i;

/** How workerd ended, in words: it catches SIGTERM and exits 0, silently (measured). */
const howEnded = (code: number | null, signal: NodeJS.Signals | null) =>
  signal
    ? `killed by ${signal}`
    : `exited with code ${code}${code === 0 ? " (as it does on a SIGTERM)" : ""}`;

/** The watches waiting for their workerd, in the order they began; each takes one. */
const waiting: Array<(child: ChildProcess) => void> = [];
const originalSpawn = childProcess.spawn;

/** `child_process.spawn` as it is, handing each workerd it starts to the oldest waiting watch. */
const spawnNotingWorkerd = ((...args: Parameters<typeof originalSpawn>) => {
  const child = originalSpawn(...args);
  if (/workerd/.test(String(args[0]))) waiting.shift()?.(child);
  return child;
}) as typeof originalSpawn;

/**
 * Runs `start` (which creates a Miniflare and awaits it ready) while noting the workerd process
 * it spawns. Miniflare keeps that process private: `child_process.spawn` is wrapped while any
 * start runs, every call still made by the original.
 */
async function watchWorkerd<T>(
  name: string,
  start: () => Promise<T>,
): Promise<{ value: T; watch: WorkerdWatch }> {
  let runtime: ChildProcess | undefined;
  const take = (child: ChildProcess) => {
    runtime = child;
  };
  waiting.push(take);
  childProcess.spawn = spawnNotingWorkerd;
  let value: T;
  try {
    value = await start();
  } finally {
    const at = waiting.indexOf(take);
    if (at >= 0) waiting.splice(at, 1);
    if (waiting.length === 0) childProcess.spawn = originalSpawn;
  }
  return { value, watch: watching(name, runtime) };
}

/** Watches `runtime` (when one was seen) for an end before the test's own stop. */
function watching(name: string, runtime: ChildProcess | undefined): WorkerdWatch {
  let end: string | null = null;
  let expected = false;
  let noticed!: () => void;
  const exited = new Promise<void>((resolve) => {
    noticed = resolve;
  });
  const onEnd = (code: number | null, signal: NodeJS.Signals | null) => {
    noticed();
    if (expected || end) return;
    end = `miniflare's workerd (pid ${runtime?.pid}, ${name}) ${howEnded(code, signal)} while the test ran`;
    // in the log where it happened, before the failures it causes
    console.error(end);
  };
  if (runtime && (runtime.exitCode !== null || runtime.signalCode !== null))
    onEnd(runtime.exitCode, runtime.signalCode);
  else runtime?.once("exit", onEnd);
  const explainNow = (error: unknown) =>
    end ? new Error(`${end}: ${messageOf(error)}`, { cause: error }) : error;
  const explain = async (error: unknown) => {
    if (!end && runtime && LOST_CONNECTION.test(messageOf(error))) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const bound = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, EXIT_NOTICE_MS);
      });
      await Promise.race([exited, bound]);
      clearTimeout(timer);
    }
    return explainNow(error);
  };
  return {
    pid: runtime?.pid,
    ended: () => end,
    explain,
    explainNow,
    stopping: () => {
      expected = true;
    },
  };
}

const messageOf = (error: unknown) =>
  error instanceof Error ? `${error.message} ${String(error.cause ?? "")}` : String(error);

/** A Miniflare started (ready) with its workerd watched. */
export interface WatchedMiniflare {
  mf: Miniflare;
  /** Its entry, `http://127.0.0.1:PORT/`. */
  url: URL;
  workerd: WorkerdWatch;
  /** `binding` (D1, KV, a fetcher: anything of `mf`) with its failed calls explained. */
  watched<T extends object>(binding: T): T;
  /** Disposes it, its workerd's end expected; once. */
  stop(): Promise<void>;
}

/** `new Miniflare(options)`, ready, its workerd watched (`name` says which test started it). */
export async function startMiniflare(
  name: string,
  options: MiniflareOptions,
): Promise<WatchedMiniflare> {
  const { value, watch } = await watchWorkerd(name, async () => {
    const mf = new Miniflare(options);
    try {
      return { mf, url: await mf.ready };
    } catch (e) {
      await mf.dispose().catch(() => undefined);
      throw e;
    }
  });
  let stopped: Promise<void> | null = null;
  return {
    ...value,
    workerd: watch,
    watched: (binding) => explaining(binding, watch, new WeakMap()),
    stop() {
      watch.stopping();
      stopped ??= value.mf.dispose();
      return stopped;
    },
  };
}

/**
 * `value` with every promise its methods return (and those of the objects they return, such as
 * a D1 statement) rejecting through `watch.explain`, and what they throw at once through
 * `explainNow`. Arguments are passed unwrapped: a batch gets the statements it made, not their
 * stand-ins.
 */
function explaining<T>(value: T, watch: WorkerdWatch, targets: WeakMap<object, object>): T {
  if (value instanceof Promise)
    return value.catch(async (e) => {
      throw await watch.explain(e);
    }) as T;
  // miniflare's bindings are proxies over functions: those are objects to wrap too
  if ((typeof value !== "object" && typeof value !== "function") || value === null) return value;
  const unwrap = (arg: unknown): unknown =>
    Array.isArray(arg)
      ? arg.map(unwrap)
      : (typeof arg === "object" || typeof arg === "function") && arg !== null
        ? (targets.get(arg) ?? arg)
        : arg;
  // over a stand-in target: a Proxy checks its answers against its target's own properties, and
  // miniflare's bindings read theirs from workerd (a refusal thrown before any promise)
  const stand = new Proxy(Object.create(null) as object, {
    get(_, key) {
      let member: unknown;
      try {
        member = Reflect.get(value, key, value);
      } catch (e) {
        throw watch.explainNow(e);
      }
      if (typeof member !== "function") return member;
      return (...args: unknown[]) => {
        let result: unknown;
        try {
          result = Reflect.apply(member, value, args.map(unwrap));
        } catch (e) {
          // some calls reach workerd in line (a D1 `prepare`): explained when its end is known
          throw watch.explainNow(e);
        }
        return explaining(result, watch, targets);
      };
    },
  }) as T & object;
  targets.set(stand, value);
  return stand;
}
