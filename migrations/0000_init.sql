CREATE TABLE `cache_entries` (
	`key` text PRIMARY KEY NOT NULL,
	`value` text NOT NULL,
	`expires_at` integer
);
--> statement-breakpoint
CREATE INDEX `cache_entries_expires_idx` ON `cache_entries` (`expires_at`);--> statement-breakpoint
CREATE TABLE `custom_field_choice_sets` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`name` text NOT NULL,
	`description` text DEFAULT '' NOT NULL,
	`extra_choices` text NOT NULL,
	`order_alphabetically` integer DEFAULT false NOT NULL,
	`created` text NOT NULL,
	`last_updated` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `choice_sets_name_uq` ON `custom_field_choice_sets` (`name`);--> statement-breakpoint
CREATE INDEX `custom_field_choice_sets_id_idx` ON `custom_field_choice_sets` (`id`);--> statement-breakpoint
CREATE TABLE `object_types` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`app_label` text NOT NULL,
	`model` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `object_types_label_model_uq` ON `object_types` (`app_label`,`model`);--> statement-breakpoint
CREATE TABLE `tag_object_types` (
	`tag_id` integer NOT NULL,
	`object_type_id` integer NOT NULL,
	PRIMARY KEY(`tag_id`, `object_type_id`),
	FOREIGN KEY (`tag_id`) REFERENCES `tags`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`object_type_id`) REFERENCES `object_types`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `tagged_items` (
	`tag_id` integer NOT NULL,
	`object_type_id` integer NOT NULL,
	`object_id` integer NOT NULL,
	PRIMARY KEY(`object_type_id`, `object_id`, `tag_id`),
	FOREIGN KEY (`tag_id`) REFERENCES `tags`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`object_type_id`) REFERENCES `object_types`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `tagged_items_tag_idx` ON `tagged_items` (`tag_id`);--> statement-breakpoint
CREATE TABLE `tags` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`name` text NOT NULL,
	`slug` text NOT NULL,
	`color` text DEFAULT '9e9e9e' NOT NULL,
	`description` text DEFAULT '' NOT NULL,
	`created` text NOT NULL,
	`last_updated` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `tags_name_uq` ON `tags` (`name`);--> statement-breakpoint
CREATE UNIQUE INDEX `tags_slug_uq` ON `tags` (`slug`);--> statement-breakpoint
CREATE INDEX `tags_id_idx` ON `tags` (`id`);--> statement-breakpoint
CREATE TABLE `groups` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`name` text NOT NULL,
	`description` text DEFAULT '' NOT NULL,
	`created` text NOT NULL,
	`last_updated` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `groups_name_uq` ON `groups` (`name`);--> statement-breakpoint
CREATE INDEX `groups_id_idx` ON `groups` (`id`);--> statement-breakpoint
CREATE TABLE `object_permissions` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`name` text NOT NULL,
	`description` text DEFAULT '' NOT NULL,
	`enabled` integer DEFAULT true NOT NULL,
	`actions` text NOT NULL,
	`constraints` text,
	`created` text NOT NULL,
	`last_updated` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `object_permissions_id_idx` ON `object_permissions` (`id`);--> statement-breakpoint
CREATE TABLE `object_permission_groups` (
	`permission_id` integer NOT NULL,
	`group_id` integer NOT NULL,
	PRIMARY KEY(`permission_id`, `group_id`),
	FOREIGN KEY (`permission_id`) REFERENCES `object_permissions`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`group_id`) REFERENCES `groups`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `opg_group_idx` ON `object_permission_groups` (`group_id`);--> statement-breakpoint
CREATE TABLE `object_permission_object_types` (
	`permission_id` integer NOT NULL,
	`object_type_id` integer NOT NULL,
	PRIMARY KEY(`permission_id`, `object_type_id`),
	FOREIGN KEY (`permission_id`) REFERENCES `object_permissions`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`object_type_id`) REFERENCES `object_types`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `opot_ot_idx` ON `object_permission_object_types` (`object_type_id`);--> statement-breakpoint
CREATE TABLE `object_permission_users` (
	`permission_id` integer NOT NULL,
	`user_id` integer NOT NULL,
	PRIMARY KEY(`permission_id`, `user_id`),
	FOREIGN KEY (`permission_id`) REFERENCES `object_permissions`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `opu_user_idx` ON `object_permission_users` (`user_id`);--> statement-breakpoint
CREATE TABLE `tokens` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`user_id` integer NOT NULL,
	`key_hash` text NOT NULL,
	`key_hint` text NOT NULL,
	`description` text DEFAULT '' NOT NULL,
	`write_enabled` integer DEFAULT true NOT NULL,
	`expires` text,
	`last_used` text,
	`created` text NOT NULL,
	`last_updated` text NOT NULL,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `tokens_key_hash_uq` ON `tokens` (`key_hash`);--> statement-breakpoint
CREATE INDEX `tokens_user_idx` ON `tokens` (`user_id`);--> statement-breakpoint
CREATE INDEX `tokens_id_idx` ON `tokens` (`id`);--> statement-breakpoint
CREATE TABLE `user_groups` (
	`user_id` integer NOT NULL,
	`group_id` integer NOT NULL,
	PRIMARY KEY(`user_id`, `group_id`),
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`group_id`) REFERENCES `groups`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `user_groups_group_idx` ON `user_groups` (`group_id`);--> statement-breakpoint
CREATE TABLE `users` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`username` text NOT NULL,
	`password_hash` text,
	`first_name` text DEFAULT '' NOT NULL,
	`last_name` text DEFAULT '' NOT NULL,
	`email` text DEFAULT '' NOT NULL,
	`is_superuser` integer DEFAULT false NOT NULL,
	`is_active` integer DEFAULT true NOT NULL,
	`created` text NOT NULL,
	`last_updated` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `users_username_uq` ON `users` (`username`);--> statement-breakpoint
CREATE INDEX `users_id_idx` ON `users` (`id`);--> statement-breakpoint
CREATE TABLE `devices` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`name` text,
	`site_id` integer NOT NULL,
	`tenant_id` integer,
	`status` text DEFAULT 'active' NOT NULL,
	`serial` text DEFAULT '' NOT NULL,
	`asset_tag` text,
	`description` text DEFAULT '' NOT NULL,
	`comments` text DEFAULT '' NOT NULL,
	`created` text NOT NULL,
	`last_updated` text NOT NULL,
	FOREIGN KEY (`site_id`) REFERENCES `sites`(`id`) ON UPDATE no action ON DELETE restrict,
	FOREIGN KEY (`tenant_id`) REFERENCES `tenants`(`id`) ON UPDATE no action ON DELETE set null
);
--> statement-breakpoint
CREATE UNIQUE INDEX `devices_site_name_uq` ON `devices` (`site_id`,`name`);--> statement-breakpoint
CREATE UNIQUE INDEX `devices_asset_tag_uq` ON `devices` (`asset_tag`);--> statement-breakpoint
CREATE INDEX `devices_site_idx` ON `devices` (`site_id`);--> statement-breakpoint
CREATE INDEX `devices_tenant_idx` ON `devices` (`tenant_id`);--> statement-breakpoint
CREATE INDEX `devices_id_idx` ON `devices` (`id`);--> statement-breakpoint
CREATE TABLE `ip_addresses` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`address` text NOT NULL,
	`tenant_id` integer,
	`status` text DEFAULT 'active' NOT NULL,
	`dns_name` text DEFAULT '' NOT NULL,
	`description` text DEFAULT '' NOT NULL,
	`comments` text DEFAULT '' NOT NULL,
	`created` text NOT NULL,
	`last_updated` text NOT NULL,
	FOREIGN KEY (`tenant_id`) REFERENCES `tenants`(`id`) ON UPDATE no action ON DELETE set null
);
--> statement-breakpoint
CREATE INDEX `ip_addresses_address_idx` ON `ip_addresses` (`address`);--> statement-breakpoint
CREATE INDEX `ip_addresses_tenant_idx` ON `ip_addresses` (`tenant_id`);--> statement-breakpoint
CREATE INDEX `ip_addresses_id_idx` ON `ip_addresses` (`id`);--> statement-breakpoint
CREATE TABLE `prefixes` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`prefix` text NOT NULL,
	`site_id` integer,
	`tenant_id` integer,
	`status` text DEFAULT 'active' NOT NULL,
	`is_pool` integer DEFAULT false NOT NULL,
	`description` text DEFAULT '' NOT NULL,
	`comments` text DEFAULT '' NOT NULL,
	`created` text NOT NULL,
	`last_updated` text NOT NULL,
	FOREIGN KEY (`site_id`) REFERENCES `sites`(`id`) ON UPDATE no action ON DELETE set null,
	FOREIGN KEY (`tenant_id`) REFERENCES `tenants`(`id`) ON UPDATE no action ON DELETE set null
);
--> statement-breakpoint
CREATE INDEX `prefixes_prefix_idx` ON `prefixes` (`prefix`);--> statement-breakpoint
CREATE INDEX `prefixes_site_idx` ON `prefixes` (`site_id`);--> statement-breakpoint
CREATE INDEX `prefixes_tenant_idx` ON `prefixes` (`tenant_id`);--> statement-breakpoint
CREATE INDEX `prefixes_id_idx` ON `prefixes` (`id`);--> statement-breakpoint
CREATE TABLE `sites` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`name` text NOT NULL,
	`slug` text NOT NULL,
	`status` text DEFAULT 'active' NOT NULL,
	`tenant_id` integer,
	`facility` text DEFAULT '' NOT NULL,
	`time_zone` text,
	`latitude` text,
	`longitude` text,
	`description` text DEFAULT '' NOT NULL,
	`comments` text DEFAULT '' NOT NULL,
	`created` text NOT NULL,
	`last_updated` text NOT NULL,
	FOREIGN KEY (`tenant_id`) REFERENCES `tenants`(`id`) ON UPDATE no action ON DELETE set null
);
--> statement-breakpoint
CREATE UNIQUE INDEX `sites_name_uq` ON `sites` (`name`);--> statement-breakpoint
CREATE UNIQUE INDEX `sites_slug_uq` ON `sites` (`slug`);--> statement-breakpoint
CREATE INDEX `sites_tenant_idx` ON `sites` (`tenant_id`);--> statement-breakpoint
CREATE INDEX `sites_status_idx` ON `sites` (`status`);--> statement-breakpoint
CREATE INDEX `sites_id_idx` ON `sites` (`id`);--> statement-breakpoint
CREATE TABLE `tenants` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`name` text NOT NULL,
	`slug` text NOT NULL,
	`description` text DEFAULT '' NOT NULL,
	`comments` text DEFAULT '' NOT NULL,
	`created` text NOT NULL,
	`last_updated` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `tenants_name_uq` ON `tenants` (`name`);--> statement-breakpoint
CREATE UNIQUE INDEX `tenants_slug_uq` ON `tenants` (`slug`);--> statement-breakpoint
CREATE INDEX `tenants_id_idx` ON `tenants` (`id`);--> statement-breakpoint
CREATE TABLE `custom_object_type_fields` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`custom_object_type_id` integer NOT NULL,
	`name` text NOT NULL,
	`label` text DEFAULT '' NOT NULL,
	`description` text DEFAULT '' NOT NULL,
	`type` text NOT NULL,
	`primary` integer DEFAULT false NOT NULL,
	`required` integer DEFAULT false NOT NULL,
	`unique` integer DEFAULT false NOT NULL,
	`default` text,
	`choice_set_id` integer,
	`validation_regex` text DEFAULT '' NOT NULL,
	`validation_minimum` real,
	`validation_maximum` real,
	`is_polymorphic` integer DEFAULT false NOT NULL,
	`related_object_type_id` integer,
	`related_object_type_ids` text NOT NULL,
	`related_object_filter` text,
	`on_delete_behavior` text DEFAULT 'set_null' NOT NULL,
	`group_name` text DEFAULT '' NOT NULL,
	`search_weight` integer DEFAULT 1000 NOT NULL,
	`filter_logic` text DEFAULT 'loose' NOT NULL,
	`ui_visible` text DEFAULT 'always' NOT NULL,
	`ui_editable` text DEFAULT 'yes' NOT NULL,
	`weight` integer DEFAULT 100 NOT NULL,
	`is_cloneable` integer DEFAULT false NOT NULL,
	`schema_id` integer NOT NULL,
	`deprecated` integer DEFAULT false NOT NULL,
	`deprecated_since` text DEFAULT '' NOT NULL,
	`scheduled_removal` text DEFAULT '' NOT NULL,
	`created` text NOT NULL,
	`last_updated` text NOT NULL,
	FOREIGN KEY (`custom_object_type_id`) REFERENCES `custom_object_types`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`choice_set_id`) REFERENCES `custom_field_choice_sets`(`id`) ON UPDATE no action ON DELETE restrict,
	FOREIGN KEY (`related_object_type_id`) REFERENCES `object_types`(`id`) ON UPDATE no action ON DELETE restrict
);
--> statement-breakpoint
CREATE UNIQUE INDEX `cotf_cot_name_uq` ON `custom_object_type_fields` (`custom_object_type_id`,`name`);--> statement-breakpoint
CREATE UNIQUE INDEX `cotf_cot_schema_id_uq` ON `custom_object_type_fields` (`custom_object_type_id`,`schema_id`);--> statement-breakpoint
CREATE INDEX `cotf_related_ot_idx` ON `custom_object_type_fields` (`related_object_type_id`);--> statement-breakpoint
CREATE INDEX `custom_object_type_fields_id_idx` ON `custom_object_type_fields` (`id`);--> statement-breakpoint
CREATE TABLE `custom_object_types` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`name` text NOT NULL,
	`slug` text NOT NULL,
	`verbose_name` text DEFAULT '' NOT NULL,
	`verbose_name_plural` text DEFAULT '' NOT NULL,
	`version` text DEFAULT '' NOT NULL,
	`group_name` text DEFAULT '' NOT NULL,
	`description` text DEFAULT '' NOT NULL,
	`schema_document` text,
	`object_type_id` integer,
	`next_schema_id` integer DEFAULT 1 NOT NULL,
	`shape_version` integer DEFAULT 1 NOT NULL,
	`created` text NOT NULL,
	`last_updated` text NOT NULL,
	FOREIGN KEY (`object_type_id`) REFERENCES `object_types`(`id`) ON UPDATE no action ON DELETE set null
);
--> statement-breakpoint
CREATE UNIQUE INDEX `cot_slug_uq` ON `custom_object_types` (`slug`);--> statement-breakpoint
CREATE UNIQUE INDEX `cot_name_uq` ON `custom_object_types` (`name`);--> statement-breakpoint
CREATE INDEX `custom_object_types_id_idx` ON `custom_object_types` (`id`);--> statement-breakpoint
CREATE TABLE `jobs` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`name` text NOT NULL,
	`object_type_id` integer,
	`object_id` integer,
	`status` text DEFAULT 'pending' NOT NULL,
	`created` text NOT NULL,
	`started` text,
	`completed` text,
	`user_id` integer,
	`data` text,
	`error` text DEFAULT '' NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE INDEX `jobs_status_idx` ON `jobs` (`status`);--> statement-breakpoint
CREATE INDEX `jobs_id_idx` ON `jobs` (`id`);--> statement-breakpoint
CREATE TABLE `object_changes` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`time` text NOT NULL,
	`user_id` integer,
	`user_name` text DEFAULT '' NOT NULL,
	`request_id` text DEFAULT '' NOT NULL,
	`action` text NOT NULL,
	`changed_object_type_id` integer NOT NULL,
	`changed_object_id` integer NOT NULL,
	`object_repr` text DEFAULT '' NOT NULL,
	`prechange_data` text,
	`postchange_data` text
);
--> statement-breakpoint
CREATE INDEX `object_changes_object_idx` ON `object_changes` (`changed_object_type_id`,`changed_object_id`);--> statement-breakpoint
CREATE INDEX `object_changes_request_idx` ON `object_changes` (`request_id`);--> statement-breakpoint
CREATE INDEX `object_changes_id_idx` ON `object_changes` (`id`);