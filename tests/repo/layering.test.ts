/**
 * The layering rule of docs/architecture.md, checked on the imports of `src/`: a module imports
 * only from its own layer or the ones below it. From the bottom: the leaf modules (`config.ts`,
 * `networks.ts`, `api-error.ts`, `turns.ts`), `db/`, `services/`, `core/`, `openapi/` and
 * `graphql/`, `plugins/`, the app (`app.ts`, `migrations.ts`), then the entries (everything else).
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const SRC = join(import.meta.dir, "..", "..", "src");
const LAYERS = ["leaf", "db", "services", "core", "openapi/graphql", "plugins", "app", "entry"];

/** The layer of a module, by its path under `src/`. */
function layerOf(path: string): number {
  const top = path.split("/")[0]!;
  if (["config.ts", "networks.ts", "api-error.ts", "turns.ts"].includes(path)) return 0;
  const folders: Record<string, number> = {
    db: 1,
    services: 2,
    core: 3,
    openapi: 4,
    graphql: 4,
    plugins: 5,
  };
  if (top in folders && path !== top) return folders[top]!;
  if (path === "app.ts" || path === "migrations.ts") return 6;
  return 7;
}

/** Relative module paths a source text imports or re-exports (static and dynamic). */
function importsOf(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(
    /(?:^|\n)\s*(?:import|export)\b[^;]*?\bfrom\s+["'](\.[^"']+)["']|\bimport\(\s*["'](\.[^"']+)["']\s*\)/g,
  ))
    out.push((m[1] ?? m[2])!);
  return out;
}

/** Every import of `file` (a path under `src/`) that points up the layers. */
function violations(file: string, text: string): string[] {
  const from = layerOf(file);
  return importsOf(text).flatMap((spec) => {
    const target = relative(SRC, resolve(SRC, dirname(file), spec));
    const path = target.endsWith(".ts") ? target : `${target}.ts`;
    const to = layerOf(path);
    return to > from ? [`${file} (${LAYERS[from]}) imports ${path} (${LAYERS[to]})`] : [];
  });
}

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sources(path);
    return /\.tsx?$/.test(name) ? [relative(SRC, path)] : [];
  });
}

describe("layering", () => {
  test("no module of src/ imports from a layer above its own", () => {
    const found = sources(SRC).flatMap((f) => violations(f, readFileSync(join(SRC, f), "utf8")));
    expect(found).toEqual([]);
  });

  test("the check catches what the rule forbids: db → core, core → plugins, core → openapi", () => {
    expect(violations("db/client.ts", 'import { ApiError } from "../core/errors";')).toHaveLength(
      1,
    );
    expect(
      violations("core/rest/x.ts", 'import { thing } from "../../plugins/custom-objects/ddl";'),
    ).toHaveLength(1);
    expect(
      violations("core/changes/model.ts", 'import type { X } from "../../openapi/builder";'),
    ).toHaveLength(1);
    expect(violations("config.ts", 'export { x } from "./core/events/targets";')).toHaveLength(1);
    // Down the layers is fine.
    expect(violations("core/errors.ts", 'import { ApiError } from "../api-error";')).toEqual([]);
    expect(violations("app.ts", 'const m = await import("./plugins/registry");')).toEqual([]);
  });
});
