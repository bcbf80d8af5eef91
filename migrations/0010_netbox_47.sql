ALTER TABLE `tokens` ADD `version` integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE `tokens` ADD `key` text;--> statement-breakpoint
ALTER TABLE `tokens` ADD `enabled` integer DEFAULT true NOT NULL;--> statement-breakpoint
ALTER TABLE `tokens` ADD `allowed_ips` text;--> statement-breakpoint
CREATE UNIQUE INDEX `tokens_key_uq` ON `tokens` (`key`);--> statement-breakpoint
ALTER TABLE `webhooks` ADD `timeout` integer;