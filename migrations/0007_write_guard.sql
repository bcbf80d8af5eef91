-- A guard for atomic write batches (decision 0071): `INSERT INTO write_guard (ok) VALUES (<condition>)`
-- writes nothing, and fails the statement (so the whole batch rolls back) when the condition is
-- false, e.g. `changes() > 0` after an UPDATE conditioned on the row's last_updated. SQLite allows
-- RAISE only in triggers; the view and its INSTEAD OF trigger make it a plain statement of a batch.
CREATE VIEW `write_guard` AS SELECT 1 AS `ok`;
--> statement-breakpoint
CREATE TRIGGER `write_guard_check` INSTEAD OF INSERT ON `write_guard` WHEN NOT NEW.`ok`
BEGIN
	SELECT RAISE(ABORT, 'host_write_conflict');
END;
