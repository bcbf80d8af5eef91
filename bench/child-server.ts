/**
 * What the HTTP benches share: a bounded integer option, a server run as a child process of the
 * bench that prints `READY <port>` once it listens, the custom object type remote reads read.
 */
import { basename, relative } from "node:path";
import { bundle, ROOT } from "../tools/bundle";

/** An integer option from the command line or the environment, in 1…max (else it throws). */
export const num = (raw: string | undefined, name: string, fallback: number, max: number) => {
  const n = raw === undefined || raw === "" ? fallback : Number(raw);
  if (!Number.isInteger(n) || n <= 0 || n > max) throw new Error(`bad value for ${name}: ${raw}`);
  return n;
};

/**
 * The fields of the custom object type the remote-read benches read (`edge.ts`, `get-cpu.ts`): a
 * text primary, a long text, an integer and an object field pointing at a site.
 */
export const EDGE_TYPE_FIELDS = [
  { name: "title", type: "text", primary: true, required: true, unique: true },
  { name: "notes", type: "longtext" },
  { name: "count", type: "integer" },
  {
    name: "site",
    type: "object",
    related_object_type: "dcim.site",
    on_delete_behavior: "set_null",
  },
] as const;

/**
 * The JavaScript engine's settings `npm start` gives the Host server (package.json): the JS heap
 * may grow to at most twice what was live after a full collection (the engine's default lets it
 * grow to about three times, which is most of the server's resident memory under load; decision
 * 0060). The benches start the Host server with them, and the floor without.
 */
export const HOST_ENGINE_ENV = { BUN_JSC_heapGrowthMaxIncrease: "1" } as const;

/**
 * The bench script at `path` as one bundled file (`tools/bundle.ts`, decision 0062), for its
 * servers to run from, as `npm start` runs the Host server; `BENCH_FROM_SOURCES=1` runs them from
 * the sources instead. Built once per bench run.
 */
export async function serverScript(path: string): Promise<string> {
  if (process.env.BENCH_FROM_SOURCES) return path;
  built ??= bundle(relative(ROOT, path), `bench-${basename(path).replace(/\.ts$/, "")}`);
  return built;
}
let built: Promise<string> | null = null;

/** Starts `args` (a bench script in `--serve` mode) and waits, at most 60 s, for its port. */
export async function spawnServer(
  args: string[],
  children: Array<ReturnType<typeof Bun.spawn>>,
  what = "server",
  env?: Record<string, string>,
) {
  const child = Bun.spawn([process.execPath, ...args], {
    stdout: "pipe",
    stderr: "inherit",
    env: env ? { ...process.env, ...env } : undefined,
  });
  children.push(child);
  const reader = child.stdout.getReader();
  let buf = "";
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const r = await Promise.race([
      reader.read(),
      Bun.sleep(deadline - Date.now()).then(() => null),
    ]);
    if (!r || r.done) break;
    buf += new TextDecoder().decode(r.value);
    const m = /READY (\d+)/.exec(buf);
    if (m) {
      reader.releaseLock();
      return { child, pid: child.pid, origin: `http://127.0.0.1:${m[1]}` };
    }
  }
  throw new Error(`${what} did not start`);
}
