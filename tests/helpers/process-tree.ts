/**
 * The processes a test started, all of them: a child that makes its own process group (wrangler
 * does, so workerd goes down with it) is out of reach of a signal to the child's group, and once
 * its parent dies it is nobody's child. A tree is snapshotted while the test runs and stopped
 * whole in the test's cleanup. Linux `/proc`; elsewhere it knows only the root.
 */
import { readdirSync, readFileSync } from "node:fs";

/** A process as seen once: its start time tells it apart from a later process given its pid. */
interface Seen {
  pid: number;
  started: string;
}

/** `[ppid, starttime]` from `/proc/<pid>/stat`, or null when the process is gone. */
function statOf(pid: number): [number, string] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // the command name (field 2) may hold spaces and parentheses: fields restart after the last ")"
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return [Number(fields[1]), fields[19] ?? ""];
  } catch {
    return null;
  }
}

/** Every live descendant of `roots` (children, their children, ...). */
function descendantsOf(roots: number[]): Seen[] {
  let pids: number[];
  try {
    pids = readdirSync("/proc")
      .filter((d) => /^\d+$/.test(d))
      .map(Number);
  } catch {
    return [];
  }
  const children = new Map<number, Seen[]>();
  for (const pid of pids) {
    const stat = statOf(pid);
    if (!stat) continue;
    const list = children.get(stat[0]) ?? [];
    list.push({ pid, started: stat[1] });
    children.set(stat[0], list);
  }
  const out: Seen[] = [];
  const queue = [...roots];
  while (queue.length > 0) {
    for (const child of children.get(queue.shift()!) ?? []) {
      out.push(child);
      queue.push(child.pid);
    }
  }
  return out;
}

const alive = (p: Seen) => statOf(p.pid)?.[1] === p.started;

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

export interface ProcessTree {
  /**
   * Remembers the current descendants of the root and of every process seen so far (an orphan
   * has a new parent but its own children are still found). Call it while the tree runs.
   */
  snapshot(): void;
  /** How many of the processes seen are still running. */
  running(): number;
  /** SIGKILLs every process seen that still runs (the same process, not a reused pid). */
  killAll(): void;
}

/** Tracks the tree under `rootPid`; the root itself is included. */
export function processTree(rootPid: number): ProcessTree {
  const seen = new Map<number, Seen>();
  const root = statOf(rootPid);
  if (root) seen.set(rootPid, { pid: rootPid, started: root[1] });
  return {
    snapshot() {
      const from = [...seen.values()].filter(alive).map((p) => p.pid);
      for (const p of descendantsOf(from)) if (!seen.has(p.pid)) seen.set(p.pid, p);
    },
    running: () => [...seen.values()].filter(alive).length,
    killAll() {
      for (const p of seen.values()) if (alive(p)) signal(p.pid, "SIGKILL");
    },
  };
}
