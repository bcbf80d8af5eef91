/**
 * OpenMetrics (`?format=openmetrics`, `Accept: application/openmetrics-text`): overall status, per
 * check up and duration, observed figures; parsed with a real Prometheus text-format parser.
 */
import { describe, expect, test, afterEach } from "bun:test";
import parsePrometheusTextFormat, { type ParsedFamily } from "parse-prometheus-text-format";
import type { TestApp } from "../helpers/app";
import { HEALTH } from "./helpers";
import { fixtureApp, resetFixtures } from "./fixtures";

afterEach(resetFixtures);

const CHECKS = [
  "health_check.Database",
  "fixtures.Healthy",
  "fixtures.Soft",
  "fixtures.Broken",
  "fixtures.Observing",
];

async function scrape(
  t: TestApp,
  opts: { path?: string; accept?: string; token?: string | null } = {},
) {
  const res = await t.req("GET", opts.path ?? `${HEALTH}?format=openmetrics`, {
    token: opts.token ?? null,
    headers: opts.accept ? { accept: opts.accept } : {},
  });
  const text = await res.text();
  const families = parsePrometheusTextFormat(text);
  const family = (name: string) => families.find((f) => f.name === name);
  const value = (name: string, labels: Record<string, string> = {}) =>
    family(name)?.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v))
      ?.value;
  return { res, text, families, family, value };
}

/** OpenMetrics rules the classic parser does not enforce. */
function expectWellFormed(text: string, families: ParsedFamily[]) {
  expect(text.endsWith("# EOF\n")).toBe(true);
  expect(text.split("\n").filter((l) => l === "# EOF").length).toBe(1);
  const names = families.map((f) => f.name);
  expect(new Set(names).size).toBe(names.length); // each family once, its samples together
  for (const f of families) {
    expect(f.type).toBe("GAUGE");
    expect(f.name).toMatch(/^[a-zA-Z_:][a-zA-Z0-9_:]*$/);
    for (const m of f.metrics)
      expect(Number.isNaN(Number(m.value)) && m.value !== "NaN").toBe(false);
  }
  for (const line of text.split("\n").filter((l) => l.startsWith("# UNIT "))) {
    const [, , name, unit] = line.split(" ");
    expect(name!.endsWith(`_${unit}`)).toBe(true);
  }
}

describe("OpenMetrics", () => {
  test("?format=openmetrics: status, per check up/warning/duration, observed figures, # EOF", async () => {
    const t = await fixtureApp({ checks: CHECKS });
    const s = await scrape(t);
    expect(s.res.status).toBe(200); // a scrape must not fail because a check did; host_health_up says so
    expect(s.res.headers.get("content-type")).toBe(
      "application/openmetrics-text; version=1.0.0; charset=utf-8",
    );
    expect(s.res.headers.get("cache-control")).toBe("no-store");
    expectWellFormed(s.text, s.families);

    expect(s.value("host_health_up")).toBe("0");
    expect(s.value("host_health_status", { status: "failing" })).toBe("1");
    expect(s.value("host_health_status", { status: "working" })).toBe("0");
    expect(s.value("host_health_check_up", { check: "Database", critical: "true" })).toBe("1");
    expect(s.value("host_health_check_up", { check: "Soft", critical: "false" })).toBe("0");
    expect(s.value("host_health_check_up", { check: "Broken" })).toBe("0");
    expect(s.family("host_health_check_up")!.metrics.length).toBe(CHECKS.length);
    for (const m of s.family("host_health_check_duration_seconds")!.metrics) {
      expect(Number(m.value)).toBeGreaterThanOrEqual(0);
      expect(Number(m.value)).toBeLessThan(3);
    }
    const observing = { check: 'Observing "quoted"' };
    expect(s.value("host_health_observed_items", observing)).toBe("5");
    expect(s.value("host_health_observed_lag_seconds", observing)).toBe("1.5");
    expect(s.value("host_health_observed_age_seconds", observing)).toBe("2.5");
    expect(s.family("host_health_observed_never_seconds")!.metrics).toEqual([]);
    const infos = s.family("host_health_observed_info")!.metrics.map((m) => m.labels);
    expect(infos).toEqual([
      { check: "Database", driver: "file" },
      { check: 'Observing "quoted"', mode: 'a "b" \\ c' },
    ]);
    expect(s.text).toContain("# UNIT host_health_observed_lag_seconds seconds");
  });

  test("Accept: application/openmetrics-text (as Prometheus sends it) selects it; groups and exclude apply", async () => {
    const t = await fixtureApp({ checks: CHECKS, groups: { core: ["Database", "Healthy"] } });
    const prometheus =
      "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
    const s = await scrape(t, { path: `${HEALTH}core/`, accept: prometheus });
    expect(s.res.headers.get("content-type")).toStartWith("application/openmetrics-text");
    expectWellFormed(s.text, s.families);
    expect(s.value("host_health_up")).toBe("1");
    expect(s.family("host_health_check_up")!.metrics.map((m) => m.labels!.check)).toEqual([
      "Database",
      "Healthy",
    ]);
    const ex = await scrape(t, { path: `${HEALTH}?format=openmetrics&exclude=Broken` });
    expect(ex.value("host_health_up")).toBe("1");
    expect(ex.value("host_health_status", { status: "degraded" })).toBe("1");
    expect(ex.value("host_health_check_warning", { check: "Soft" })).toBe("0");
  });

  test("details hidden: only the overall figures; with cache_seconds the result age", async () => {
    const t = await fixtureApp({ checks: CHECKS, details: "authenticated", cache_seconds: 30 });
    const anon = await scrape(t);
    expectWellFormed(anon.text, anon.families);
    expect(anon.families.map((f) => f.name)).toEqual([
      "host_health_up",
      "host_health_status",
      "host_health_result_age_seconds",
    ]);
    expect(anon.text).not.toContain("Broken");
    const authed = await scrape(t, { token: t.admin });
    expect(authed.value("host_health_check_up", { check: "Broken" })).toBe("0");
    expect(Number(authed.value("host_health_result_age_seconds"))).toBeGreaterThanOrEqual(0);
  });
});
