/**
 * The three representations of a health report: the plain JSON of §6, the IETF health format
 * (`application/health+json`) and an HTML table for people. JSX escapes every value.
 */
import type { HealthReport, CheckResult } from "./runner";

/** The overall word: `working`, `degraded` (only non-critical checks failed) or `failing`. */
export function overallStatus(report: HealthReport): "working" | "degraded" | "failing" {
  if (report.criticalFailure) return "failing";
  return report.allPassed ? "working" : "degraded";
}

/** `{"status", "checks": {identifier: status}}`. */
export function toJson(report: HealthReport): { status: string; checks: Record<string, string> } {
  return {
    status: overallStatus(report),
    checks: Object.fromEntries(report.results.map((r) => [r.identifier, r.status])),
  };
}

type HealthStatus = "pass" | "warn" | "fail";

function checkHealthStatus(r: CheckResult): HealthStatus {
  if (r.status === "working") return "pass";
  return r.passed || !r.critical ? "warn" : "fail";
}

const roundMs = (ms: number) => Math.round(ms * 100) / 100;

/**
 * The health check response format for HTTP APIs (draft-inadarei-api-health-check): one entry
 * per check, keyed by its identifier, with the check's time taken as `observedValue` in ms.
 * Without details: the overall status only.
 */
export function toHealthJson(
  report: HealthReport,
  version: string,
  showDetails = true,
  cached = false,
) {
  const status: HealthStatus = report.criticalFailure ? "fail" : report.allPassed ? "pass" : "warn";
  // With a result cache, how old the oldest result is (seconds).
  const age = cached ? { ageSeconds: Math.round(report.ageMs) / 1000 } : {};
  if (!showDetails) return { status, description: "host health checks", ...age };
  return {
    status,
    version,
    description: "host health checks",
    ...age,
    checks: Object.fromEntries(
      report.results.map((r) => [
        r.identifier,
        [
          {
            componentId: r.path,
            componentType: "component",
            status: checkHealthStatus(r),
            observedValue: roundMs(r.durationMs),
            observedUnit: "ms",
            time: r.time,
            ...(r.status === "working" ? {} : { output: r.status }),
          },
          // What the check measured, one entry each after the timing (named by measurementName).
          ...r.observations.map((o) => ({
            componentId: r.path,
            componentType: "component",
            measurementName: o.name,
            status: checkHealthStatus(r),
            observedValue: o.value,
            ...(o.unit ? { observedUnit: o.unit } : {}),
            time: r.time,
          })),
        ],
      ]),
    ),
  };
}

const STYLE = `
body{font-family:system-ui,sans-serif;margin:2rem;color:#222}
h1{font-size:1.4rem}
table{border-collapse:collapse;min-width:40rem}
th,td{border:1px solid #ccc;padding:.4rem .7rem;text-align:left;vertical-align:top}
th{background:#f4f4f4}
.ok{color:#176c2e}.bad{color:#a4161a}.warn{color:#8a5a00}
td.num{text-align:right;font-variant-numeric:tabular-nums}
`;

function statusClass(r: CheckResult): string {
  if (r.status === "working") return "ok";
  return r.passed || !r.critical ? "warn" : "bad";
}

/** The HTML page: one row per check with its status, whether it is critical and its time taken. */
export function HealthPage(props: { report: HealthReport; showDetails: boolean }) {
  const { report, showDetails } = props;
  const overall = overallStatus(report);
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="robots" content="noindex" />
        <title>Health check: {overall}</title>
        <style>{STYLE}</style>
      </head>
      <body>
        <h1>
          System status:{" "}
          <span class={overall === "working" ? "ok" : overall === "degraded" ? "warn" : "bad"}>
            {overall}
          </span>
        </h1>
        {showDetails ? null : <p>Check details are not shown to this caller.</p>}
        {showDetails ? (
          <table>
            <thead>
              <tr>
                <th>Service</th>
                <th>Status</th>
                <th>Critical</th>
                <th>Time taken</th>
                <th>Observed</th>
              </tr>
            </thead>
            <tbody>
              {report.results.map((r) => (
                <tr>
                  <td>{r.identifier}</td>
                  <td class={statusClass(r)}>{r.status}</td>
                  <td>{r.critical ? "yes" : "no"}</td>
                  <td class="num">{roundMs(r.durationMs).toFixed(2)} ms</td>
                  <td>
                    {r.observations
                      .map((o) => `${o.name}: ${o.value ?? "none"}${o.unit ? ` ${o.unit}` : ""}`)
                      .join(", ")}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        ) : null}
      </body>
    </html>
  );
}

/** The whole HTML document as a string. */
export async function renderHealthPage(report: HealthReport, showDetails = true): Promise<string> {
  return `<!doctype html>${String(await (<HealthPage report={report} showDetails={showDetails} />))}`;
}
