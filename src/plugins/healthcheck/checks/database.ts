/**
 * `health_check.Database`: the database commits a write (the one row of `host_health`) and reads
 * `SELECT 1`, in one round trip, so `/readyz` fails when writes cannot succeed. For a local file it also
 * says when the file was deleted or replaced under the server, when checkpoints fail and when
 * the integrity check (`PRAGMA quick_check`, at start and daily) found damage (decision 0079).
 * It observes the driver (`file`, `libsql` or `d1`) and the round trip as `latency`.
 */
import { isBusyError } from "../../../db/client";
import { probeWrite } from "../../../db/health";
import { storageFaultOf } from "../../../db/storage-faults";
import {
  BaseHealthCheckBackend,
  messageOf,
  ServiceReturnedUnexpectedResult,
  ServiceUnavailable,
} from "../backends";

/** What a failed write means, in the operator's words. */
const WRITE_FAULTS = {
  full: "the disk is full",
  io: "the disk failed to write (I/O error)",
  read_only: "the database file (or its folder, or its WAL) is read-only",
  damaged: "the database file is damaged",
} as const;

export class DatabaseHealthCheck extends BaseHealthCheckBackend {
  override identifier(): string {
    return "Database";
  }

  async checkStatus(): Promise<void> {
    const db = this.services.db;
    this.observe("driver", db.kind === "local" ? "file" : db.kind === "d1" ? "d1" : "libsql");
    this.checkFile();
    let value: unknown;
    const started = performance.now();
    try {
      // One round trip: a write that must commit, and SELECT 1 read back.
      value = await probeWrite(db);
    } catch (e) {
      // Another connection's long write (a schema apply) holds the lock: busy, not broken.
      if (isBusyError(e)) {
        this.observe("write", "busy");
        return;
      }
      const fault = storageFaultOf(e);
      if (fault === "damaged") db.fileHealth.noteDamaged(e);
      const why = fault
        ? `a write failed: ${WRITE_FAULTS[fault]}`
        : `SELECT 1 failed: ${messageOf(e)}`;
      this.addError(new ServiceUnavailable(why), e);
      return;
    }
    this.observe("latency", Math.round((performance.now() - started) * 1000) / 1000, "ms");
    if (Number(value) !== 1)
      this.addError(new ServiceReturnedUnexpectedResult(`SELECT 1 returned ${String(value)}`));
  }

  /** The local file's own faults, noticed off the request path. */
  private checkFile() {
    const file = this.services.db.fileHealth;
    const gone = file.fileProblem();
    if (gone) this.addError(new ServiceUnavailable(gone));
    if (file.checkpointError)
      this.addError(new ServiceUnavailable(`checkpoints fail: ${file.checkpointError}`));
    const integrity = file.integrity;
    if (integrity && !integrity.ok)
      this.addError(
        new ServiceUnavailable(`the integrity check found damage: ${integrity.detail}`),
      );
  }
}
