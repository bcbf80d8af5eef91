/**
 * The Worker bundle wrangler deploys: nothing Node- or Bun-only is reachable from it (so no
 * nodejs_compat is needed), it fits the Workers size limit, and wrangler.toml is what we document.
 */
import { beforeAll, describe, expect, test, setDefaultTimeout } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { buildWorkerBundle, ROOT } from "../helpers/worker";

// Real workerd, wrangler and redis-server processes: more room than bun's 5 s default
// (this bun does not apply bunfig's [test] timeout).
setDefaultTimeout(30_000);

let code: string;
beforeAll(async () => {
  code = readFileSync((await buildWorkerBundle()).scriptPath, "utf8");
});

const toml = () =>
  Bun.TOML.parse(readFileSync(join(ROOT, "wrangler.toml"), "utf8")) as Record<string, any>;

describe("worker bundle", () => {
  test("imports no node:* or Bun module, statically or dynamically", () => {
    // Import specifiers only: hono/jsx probes `process?.getBuiltinModule?.("node:async_hooks")` at
    // run time, which is guarded and simply finds nothing in workerd without nodejs_compat.
    expect(code.match(/(?:\bfrom|\bimport\(?|\brequire\()\s*["'`]node:[\w/]+["'`]/g) ?? []).toEqual(
      [],
    );
    expect(code.match(/(?:from|import\(|require\()\s*["'`]bun(?::[\w]+)?["'`]/g) ?? []).toEqual([]);
    // Bare Node builtins that esbuild would leave external.
    expect(
      code.match(
        /(?:from|import\(|require\()\s*["'`](?:fs|path|os|crypto|net|tls|http|https|url|util|stream|child_process|worker_threads)["'`]/g,
      ) ?? [],
    ).toEqual([]);
  });

  test("touches the Bun global only behind a typeof guard, and never process.*", () => {
    const unguarded = [...code.matchAll(/\bBun\.\w+/g)].filter(
      (m) => !code.slice(Math.max(0, m.index! - 40), m.index!).includes("typeof Bun"),
    );
    expect(unguarded.map((m) => code.slice(Math.max(0, m.index! - 40), m.index! + 20))).toEqual([]);
    expect(code.match(/\bprocess\.(?:env|exit|on|argv|cwd)\b/g) ?? []).toEqual([]);
  });

  test("fits the Workers size limit (3 MiB gzipped on the free plan) with room to spare", () => {
    const gzipped = gzipSync(code).byteLength;
    expect(gzipped).toBeLessThan(1024 * 1024);
  });
});

describe("wrangler.toml", () => {
  test("entry, KV binding, loopback dev server, cache backend", () => {
    const t = toml();
    expect(t.main).toBe("src/worker.ts");
    expect(t.kv_namespaces).toEqual([expect.objectContaining({ binding: "CACHE" })]);
    expect(t.dev.ip).toBe("127.0.0.1");
    expect(t.vars.CACHE_BACKEND).toBe("kv");
    expect(t.vars).not.toHaveProperty("DATABASE_AUTH_TOKEN");
    expect(t.vars).not.toHaveProperty("REDIS_CACHING_TOKEN");
    expect(t.vars).not.toHaveProperty("REDIS_TASKS_TOKEN");
  });

  test("no nodejs_compat, and a compatibility date the pinned workerd supports", () => {
    const t = toml();
    expect(t.compatibility_flags ?? []).not.toContain("nodejs_compat");
    const workerd = JSON.parse(
      readFileSync(join(ROOT, "node_modules", "workerd", "package.json"), "utf8"),
    ).version as string;
    const supported = workerd.split(".")[1]!.replace(/^(\d{4})(\d{2})(\d{2})$/, "$1-$2-$3");
    expect(t.compatibility_date <= supported).toBe(true);
    expect(t.compatibility_date >= "2025-01-01").toBe(true);
  });
});
