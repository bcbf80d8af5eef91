/**
 * What the HTTP benches share: a bounded integer option, and a server run as a child process of
 * the bench that prints `READY <port>` once it listens.
 */

/** An integer option from the command line or the environment, in 1…max (else it throws). */
export const num = (raw: string | undefined, name: string, fallback: number, max: number) => {
  const n = raw === undefined || raw === "" ? fallback : Number(raw);
  if (!Number.isInteger(n) || n <= 0 || n > max) throw new Error(`bad value for ${name}: ${raw}`);
  return n;
};

/** Starts `args` (a bench script in `--serve` mode) and waits, at most 60 s, for its port. */
export async function spawnServer(args: string[], children: Array<ReturnType<typeof Bun.spawn>>, what = "server") {
  const child = Bun.spawn([process.execPath, ...args], { stdout: "pipe", stderr: "inherit" });
  children.push(child);
  const reader = child.stdout.getReader();
  let buf = "";
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const r = await Promise.race([reader.read(), Bun.sleep(deadline - Date.now()).then(() => null)]);
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
