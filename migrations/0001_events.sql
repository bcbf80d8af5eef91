CREATE TABLE `event_rule_object_types` (
	`event_rule_id` integer NOT NULL,
	`object_type_id` integer NOT NULL,
	PRIMARY KEY(`event_rule_id`, `object_type_id`),
	FOREIGN KEY (`event_rule_id`) REFERENCES `event_rules`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`object_type_id`) REFERENCES `object_types`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `event_rule_object_types_ot_idx` ON `event_rule_object_types` (`object_type_id`);--> statement-breakpoint
CREATE TABLE `event_rules` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`name` text NOT NULL,
	`description` text DEFAULT '' NOT NULL,
	`enabled` integer DEFAULT true NOT NULL,
	`event_types` text NOT NULL,
	`conditions` text,
	`action_type` text DEFAULT 'webhook' NOT NULL,
	`action_object_type_id` integer NOT NULL,
	`action_object_id` integer NOT NULL,
	`created` text NOT NULL,
	`last_updated` text NOT NULL,
	FOREIGN KEY (`action_object_type_id`) REFERENCES `object_types`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `event_rules_name_uq` ON `event_rules` (`name`);--> statement-breakpoint
CREATE INDEX `event_rules_action_idx` ON `event_rules` (`action_object_type_id`,`action_object_id`);--> statement-breakpoint
CREATE INDEX `event_rules_id_idx` ON `event_rules` (`id`);--> statement-breakpoint
CREATE TABLE `webhooks` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`name` text NOT NULL,
	`description` text DEFAULT '' NOT NULL,
	`payload_url` text NOT NULL,
	`http_method` text DEFAULT 'POST' NOT NULL,
	`http_content_type` text DEFAULT 'application/json' NOT NULL,
	`additional_headers` text DEFAULT '' NOT NULL,
	`body_template` text DEFAULT '' NOT NULL,
	`secret` text DEFAULT '' NOT NULL,
	`ssl_verification` integer DEFAULT true NOT NULL,
	`created` text NOT NULL,
	`last_updated` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `webhooks_name_uq` ON `webhooks` (`name`);--> statement-breakpoint
CREATE INDEX `webhooks_id_idx` ON `webhooks` (`id`);