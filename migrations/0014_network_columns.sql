-- Prefixes and IP addresses store their text as numbers too (decision 0203): family, mask length
-- and first/last (or host) address as fixed-width hex, which the network filters (`within`,
-- `contains`, `parent`, …) compare in SQL. Rows written before get theirs from the start-up data
-- step (src/db/migrate.ts) on local and remote databases.
ALTER TABLE `ip_addresses` ADD `_family` integer;--> statement-breakpoint
ALTER TABLE `ip_addresses` ADD `_mask` integer;--> statement-breakpoint
ALTER TABLE `ip_addresses` ADD `_host` text;--> statement-breakpoint
CREATE INDEX `ip_addresses_net_idx` ON `ip_addresses` (`_family`,`_host`);--> statement-breakpoint
ALTER TABLE `prefixes` ADD `_family` integer;--> statement-breakpoint
ALTER TABLE `prefixes` ADD `_mask` integer;--> statement-breakpoint
ALTER TABLE `prefixes` ADD `_first` text;--> statement-breakpoint
ALTER TABLE `prefixes` ADD `_last` text;--> statement-breakpoint
CREATE INDEX `prefixes_net_idx` ON `prefixes` (`_family`,`_first`);