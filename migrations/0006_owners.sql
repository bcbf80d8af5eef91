CREATE TABLE `owner_groups` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`name` text NOT NULL,
	`description` text DEFAULT '' NOT NULL,
	`created` text NOT NULL,
	`last_updated` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `owner_groups_name_uq` ON `owner_groups` (`name`);--> statement-breakpoint
CREATE INDEX `owner_groups_id_idx` ON `owner_groups` (`id`);--> statement-breakpoint
CREATE TABLE `owner_user_groups` (
	`owner_id` integer NOT NULL,
	`group_id` integer NOT NULL,
	PRIMARY KEY(`owner_id`, `group_id`),
	FOREIGN KEY (`owner_id`) REFERENCES `owners`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`group_id`) REFERENCES `groups`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `owner_user_groups_group_idx` ON `owner_user_groups` (`group_id`);--> statement-breakpoint
CREATE TABLE `owner_users` (
	`owner_id` integer NOT NULL,
	`user_id` integer NOT NULL,
	PRIMARY KEY(`owner_id`, `user_id`),
	FOREIGN KEY (`owner_id`) REFERENCES `owners`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `owner_users_user_idx` ON `owner_users` (`user_id`);--> statement-breakpoint
CREATE TABLE `owners` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`name` text NOT NULL,
	`group_id` integer,
	`description` text DEFAULT '' NOT NULL,
	`created` text NOT NULL,
	`last_updated` text NOT NULL,
	FOREIGN KEY (`group_id`) REFERENCES `owner_groups`(`id`) ON UPDATE no action ON DELETE restrict
);
--> statement-breakpoint
CREATE UNIQUE INDEX `owners_name_uq` ON `owners` (`name`);--> statement-breakpoint
CREATE INDEX `owners_group_idx` ON `owners` (`group_id`);--> statement-breakpoint
CREATE INDEX `owners_id_idx` ON `owners` (`id`);--> statement-breakpoint
ALTER TABLE `devices` ADD `owner_id` integer REFERENCES owners(id);--> statement-breakpoint
CREATE INDEX `devices_owner_idx` ON `devices` (`owner_id`);--> statement-breakpoint
ALTER TABLE `ip_addresses` ADD `owner_id` integer REFERENCES owners(id);--> statement-breakpoint
CREATE INDEX `ip_addresses_owner_idx` ON `ip_addresses` (`owner_id`);--> statement-breakpoint
ALTER TABLE `prefixes` ADD `owner_id` integer REFERENCES owners(id);--> statement-breakpoint
CREATE INDEX `prefixes_owner_idx` ON `prefixes` (`owner_id`);--> statement-breakpoint
ALTER TABLE `sites` ADD `owner_id` integer REFERENCES owners(id);--> statement-breakpoint
CREATE INDEX `sites_owner_idx` ON `sites` (`owner_id`);--> statement-breakpoint
ALTER TABLE `tenants` ADD `owner_id` integer REFERENCES owners(id);--> statement-breakpoint
CREATE INDEX `tenants_owner_idx` ON `tenants` (`owner_id`);