ALTER TABLE `devices` ADD `_name` text;--> statement-breakpoint
CREATE INDEX `devices_natural_name_idx` ON `devices` (`_name`,`id`);--> statement-breakpoint
ALTER TABLE `sites` ADD `_name` text;--> statement-breakpoint
CREATE INDEX `sites_natural_name_idx` ON `sites` (`_name`,`id`);