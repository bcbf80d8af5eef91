CREATE TABLE `custom_object_trash` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`kind` text NOT NULL,
	`custom_object_type_id` integer NOT NULL,
	`slug` text NOT NULL,
	`name` text NOT NULL,
	`record` text NOT NULL,
	`storage` text NOT NULL,
	`rows` integer DEFAULT 0 NOT NULL,
	`removed` text NOT NULL,
	`expires` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `cot_trash_expires_idx` ON `custom_object_trash` (`expires`);--> statement-breakpoint
CREATE INDEX `custom_object_trash_id_idx` ON `custom_object_trash` (`id`);--> statement-breakpoint
ALTER TABLE `custom_object_types` ADD `unique_together` text DEFAULT '[]' NOT NULL;