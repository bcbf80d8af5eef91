ALTER TABLE `custom_object_type_fields` ADD `context` integer DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE `custom_object_type_fields` ADD `related_name` text DEFAULT '' NOT NULL;--> statement-breakpoint
ALTER TABLE `custom_object_types` ADD `display_expression` text DEFAULT '' NOT NULL;--> statement-breakpoint
ALTER TABLE `custom_object_types` ADD `config_context_enabled` integer DEFAULT false NOT NULL;