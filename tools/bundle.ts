/**
 * Builds a Bun entry point into `.build/<name>/` (decision 0062): one JavaScript file, plus chunks
 * for what the code imports on first use (the GraphQL engine, decision 0117). `npm start` runs
 * `src/server.ts` that way, and the HTTP benches their servers. Loaded from ~800 modules, the
 * server kept each one's module record and environment in its JS heap (about 4 MB live, twice
 * that at the heap's size under load); the bundle holds the same code without them. Measured on
 * the bench's list cell: 65 MB idle and 129 MB peak bundled, 76 MB and 139–146 MB from the
 * sources. Chunk names are content hashes: a rebuild adds its own and leaves the old ones, which a
 * server still running may load later.
 *
 * The output is always two folders below the repository (`.build/<name>/<entry>.js`): paths the
 * code resolves against its own file keep working there (`src/db/migrate.ts` finds
 * `../../migrations`, the docs page finds `node_modules`).
 *
 *   bun tools/bundle.ts [entry] [name]     (default: src/server.ts into .build/server/server.js)
 */
import { mkdirSync, renameSync, rmSync } from "node:fs";
import { basename, join, resolve } from "node:path";

export const ROOT = resolve(import.meta.dir, "..");

/**
 * Bundles `entry` (a path from the repository root) into `.build/<name>/`; answers the output
 * file. Built in a folder of its own and renamed into place file by file, so a server starting at
 * the same moment (a second `npm start` from the same checkout) never loads a half-written file.
 */
export async function bundle(entry: string, name: string): Promise<string> {
  if (!/^[a-z0-9-]+$/.test(name))
    throw new Error(`bundle name must be a plain folder name: ${name}`);
  const outdir = join(ROOT, ".build", name);
  const staging = join(ROOT, ".build", `.${name}-${process.pid}-${Date.now()}`);
  try {
    const result = await Bun.build({
      entrypoints: [join(ROOT, entry)],
      target: "bun",
      outdir: staging,
      sourcemap: "linked",
      splitting: true,
    });
    if (!result.success)
      throw new AggregateError(
        result.logs,
        `bundling ${entry} failed:\n${result.logs.map(String).join("\n")}`,
      );
    const out = result.outputs.find((o) => o.kind === "entry-point");
    if (!out) throw new Error(`bundling ${entry} wrote no entry point`);
    mkdirSync(outdir, { recursive: true });
    // the source map first: the entry point names it
    const files = result.outputs
      .map((o) => o.path)
      .sort((a, b) => Number(a === out.path) - Number(b === out.path));
    for (const file of files) renameSync(file, join(outdir, basename(file)));
    return join(outdir, basename(out.path));
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  const entry = process.argv[2] ?? "src/server.ts";
  const name = process.argv[3] ?? basename(entry).replace(/\.[jt]s$/, "");
  await bundle(entry, name);
}
