/**
 * The workerd process a Miniflare starts, watched: when it ends before the test stops it, every
 * later request through its bindings fails (ECONNREFUSED, a 500 from the app), so the test says
 * how it ended (exit code or signal) instead of leaving a run of bare 500s to guess at.
 */
import childProcess, { type ChildProcess } from "node:child_process";

export interface WorkerdWatch {
  /** workerd's pid (undefined when no workerd was seen starting). */
  readonly pid: number | undefined;
  /** How workerd ended, when it ended before `stopping()`; null while it runs. */
  ended(): string | null;
  /** Marks the end that follows as expected (the test's own dispose). */
  stopping(): void;
}

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
export async function watchWorkerd<T>(
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
  const onEnd = (code: number | null, signal: NodeJS.Signals | null) => {
    if (expected || end) return;
    end = `miniflare's workerd (pid ${runtime?.pid}, ${name}) ${howEnded(code, signal)} while the test ran`;
    // in the log where it happened, before the failures it causes
    console.error(end);
  };
  if (runtime && (runtime.exitCode !== null || runtime.signalCode !== null))
    onEnd(runtime.exitCode, runtime.signalCode);
  else runtime?.once("exit", onEnd);
  return {
    pid: runtime?.pid,
    ended: () => end,
    stopping: () => {
      expected = true;
    },
  };
}
