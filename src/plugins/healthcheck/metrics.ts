/**
 * The health report as OpenMetrics text (`?format=openmetrics`, `Accept:
 * application/openmetrics-text`), for a Prometheus scrape: the overall status, per check `up`
 * and duration, and every figure the checks observed. Gauges only, so Prometheus' classic text
 * parser reads it too; the document ends with `# EOF`.
 */
import type { Observation } from "./backends";
import { overallStatus } from "./render";
import type { HealthReport } from "./runner";

export const OPENMETRICS_CONTENT_TYPE =
  "application/openmetrics-text; version=1.0.0; charset=utf-8";

const escapeLabel = (value: string) =>
  value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
const labels = (pairs: Record<string, string>) =>
  `{${Object.entries(pairs)
    .map(([k, v]) => `${k}="${escapeLabel(v)}"`)
    .join(",")}}`;
const number = (n: number) =>
  Number.isFinite(n) ? String(n) : Number.isNaN(n) ? "NaN" : n > 0 ? "+Inf" : "-Inf";

class Family {
  readonly lines: string[] = [];
  constructor(
    readonly name: string,
    help: string,
    unit?: "seconds",
  ) {
    this.lines.push(`# TYPE ${name} gauge`);
    if (unit) this.lines.push(`# UNIT ${name} ${unit}`);
    this.lines.push(`# HELP ${name} ${help}`);
  }
  sample(pairs: Record<string, string>, value: number) {
    this.lines.push(
      `${this.name}${Object.keys(pairs).length ? labels(pairs) : ""} ${number(value)}`,
    );
  }
}

/** Metric family of a numeric observation: `ms` and `s` become `_seconds`, other units stay in the help text. */
function familyOf(o: Observation): { name: string; help: string; unit?: "seconds"; scale: number } {
  const base = `host_health_observed_${o.name}`;
  if (o.unit === "ms")
    return {
      name: `${base}_seconds`,
      help: `Observed ${o.name} (seconds).`,
      unit: "seconds",
      scale: 1 / 1000,
    };
  if (o.unit === "s")
    return {
      name: `${base}_seconds`,
      help: `Observed ${o.name} (seconds).`,
      unit: "seconds",
      scale: 1,
    };
  return { name: base, help: `Observed ${o.name}${o.unit ? ` (${o.unit})` : ""}.`, scale: 1 };
}

/**
 * The OpenMetrics document. Without details: the overall figures only.
 * @example toOpenMetrics(report, { showDetails: true, cached: false })
 */
export function toOpenMetrics(
  report: HealthReport,
  options: { showDetails: boolean; cached: boolean },
): string {
  const families: Family[] = [];
  const up = new Family(
    "host_health_up",
    "1 unless a critical check failed (the health page answers 200).",
  );
  up.sample({}, report.criticalFailure ? 0 : 1);
  const status = new Family(
    "host_health_status",
    "1 for the overall status word of the health page (working, degraded, failing).",
  );
  const word = overallStatus(report);
  for (const s of ["working", "degraded", "failing"])
    status.sample({ status: s }, s === word ? 1 : 0);
  families.push(up, status);
  if (options.cached) {
    const age = new Family(
      "host_health_result_age_seconds",
      "Age of the oldest check result in this answer (cache_seconds).",
      "seconds",
    );
    age.sample({}, report.ageMs / 1000);
    families.push(age);
  }
  if (options.showDetails) {
    const checkUp = new Family(
      "host_health_check_up",
      "1 when the check passed (warnings that do not fail included), 0 when it failed.",
    );
    const warning = new Family(
      "host_health_check_warning",
      "1 when the check reported a warning, else 0.",
    );
    const duration = new Family(
      "host_health_check_duration_seconds",
      "Time the check took.",
      "seconds",
    );
    const info = new Family(
      "host_health_observed_info",
      "Text figures a check observed, as labels (value always 1).",
    );
    const observed = new Map<string, Family>();
    for (const r of report.results) {
      checkUp.sample({ check: r.identifier, critical: String(r.critical) }, r.passed ? 1 : 0);
      warning.sample({ check: r.identifier }, r.warningOnly ? 1 : 0);
      duration.sample({ check: r.identifier }, r.durationMs / 1000);
      const texts: Record<string, string> = {};
      for (const o of r.observations) {
        if (typeof o.value === "string") {
          if (o.name !== "check") texts[o.name] = o.value;
          continue;
        }
        const f = familyOf(o);
        let family = observed.get(f.name);
        if (!family) observed.set(f.name, (family = new Family(f.name, f.help, f.unit)));
        // Not known (e.g. no heartbeat ever): no sample, so `absent()` says so.
        if (o.value !== null) family.sample({ check: r.identifier }, o.value * f.scale);
      }
      if (Object.keys(texts).length) info.sample({ check: r.identifier, ...texts }, 1);
    }
    families.push(checkUp, warning, duration, ...observed.values());
    if (info.lines.length > 2) families.push(info);
  }
  return `${families.flatMap((f) => f.lines).join("\n")}\n# EOF\n`;
}
