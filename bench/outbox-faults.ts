/**
 * Tasks-Redis faults under a bounded write load (issue 13): for each fault — frozen (SIGSTOP),
 * stopped and started again, restarted empty — site creates that each match one event rule,
 * then sent / delivered / duplicated / lost as counted by a webhook receiver on 127.0.0.1 (by
 * `Idempotency-Key`). Then create latency p50/p99 with the tasks Redis frozen vs normal, in the
 * same run (one writer, so the figures are request latency, not queueing).
 *
 * Usage: npx bun bench/outbox-faults.ts [--writes 300] [--fault-ms 3000]
 */
import { parseArgs } from "node:util";
import { percentile, runFault, type Fault } from "../tests/tasks/fault-run";

const { values } = parseArgs({
  options: {
    writes: { type: "string", default: "300" },
    "fault-ms": { type: "string", default: "3000" },
  },
});
const writes = Number(values.writes);
const faultMs = Number(values["fault-ms"]);

console.log(
  `tasks Redis faults: ${writes} creates (2 writers, 20 ms apart), fault after ${Math.floor(writes / 4)} for ${faultMs} ms, receiver answers after 20 ms`,
);
console.log(
  "fault          sent  delivered  duplicated  lost  key mismatches  queued at fault  recovery",
);
for (const fault of ["freeze", "stop", "restart-empty"] as Fault[]) {
  const r = await runFault(fault, {
    writes,
    lanes: 2,
    paceMs: 20,
    faultAfter: Math.floor(writes / 4),
    faultMs,
    settleMs: 60_000,
    receiverDelayMs: 20,
  });
  console.log(
    `${fault.padEnd(13)} ${String(r.sent).padStart(5)} ${String(r.delivered).padStart(10)} ${String(r.duplicated).padStart(11)} ${String(r.lost).padStart(5)} ${String(r.keyMismatches + r.unkeyed).padStart(15)} ${String(r.queuedAtFault).padStart(16)} ${(r.recoveryMs / 1000).toFixed(1).padStart(8)} s`,
  );
}

const latency = await runFault("freeze", {
  writes: 600,
  lanes: 1,
  paceMs: 2,
  faultAfter: 200,
  faultMs: 2_000,
  settleMs: 60_000,
});
const fmt = (xs: number[]) =>
  `p50 ${percentile(xs, 50).toFixed(2)} ms  p99 ${percentile(xs, 99).toFixed(2)} ms  max ${Math.max(...xs).toFixed(2)} ms  (n=${xs.length})`;
console.log("\ncreate latency, one writer:");
console.log(`  tasks Redis normal:  ${fmt(latency.normalLatencies)}`);
console.log(`  tasks Redis frozen:  ${fmt(latency.faultLatencies)}`);
console.log(
  `  frozen / normal p50: ${(percentile(latency.faultLatencies, 50) / percentile(latency.normalLatencies, 50)).toFixed(2)}×   (deliveries: ${latency.delivered}/${latency.sent}, lost ${latency.lost})`,
);
process.exit(0);
