ALTER TABLE `event_rules` ADD `user_id` integer REFERENCES users(id) ON DELETE set null;--> statement-breakpoint
ALTER TABLE `webhooks` ADD `user_id` integer REFERENCES users(id) ON DELETE set null;--> statement-breakpoint
-- Rules and webhooks made before owners act for the user who last changed them, as the change
-- log records it (decision 0066); rows the log cannot name stay without owner and deliver nothing.
UPDATE `event_rules` SET `user_id` = (
	SELECT c.`user_id` FROM `object_changes` c
	JOIN `object_types` t ON t.`id` = c.`changed_object_type_id`
	WHERE t.`app_label` = 'extras' AND t.`model` = 'eventrule'
		AND c.`changed_object_id` = `event_rules`.`id` AND c.`action` IN ('create', 'update')
		AND c.`user_id` IN (SELECT `id` FROM `users`)
	ORDER BY c.`id` DESC LIMIT 1
);--> statement-breakpoint
UPDATE `webhooks` SET `user_id` = (
	SELECT c.`user_id` FROM `object_changes` c
	JOIN `object_types` t ON t.`id` = c.`changed_object_type_id`
	WHERE t.`app_label` = 'extras' AND t.`model` = 'webhook'
		AND c.`changed_object_id` = `webhooks`.`id` AND c.`action` IN ('create', 'update')
		AND c.`user_id` IN (SELECT `id` FROM `users`)
	ORDER BY c.`id` DESC LIMIT 1
);
