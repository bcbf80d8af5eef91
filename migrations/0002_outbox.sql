CREATE TABLE `outbox` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`created` text NOT NULL,
	`job_id` integer NOT NULL,
	`name` text NOT NULL,
	`payload` text,
	`max_attempts` integer NOT NULL,
	`user_id` integer,
	`key` text NOT NULL,
	`relayed` text,
	`tries` integer DEFAULT 0 NOT NULL,
	`error` text DEFAULT '' NOT NULL
);
--> statement-breakpoint
CREATE INDEX `outbox_relayed_idx` ON `outbox` (`relayed`);--> statement-breakpoint
CREATE INDEX `outbox_job_idx` ON `outbox` (`job_id`);--> statement-breakpoint
CREATE INDEX `jobs_completed_idx` ON `jobs` (`completed`);--> statement-breakpoint
CREATE INDEX `object_changes_time_idx` ON `object_changes` (`time`);