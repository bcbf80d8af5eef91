-- The event rules' stamp (decision 0197): a random value moved, in the same statement, by every
-- write to the event rules or their object types (a cascade from a deleted object type too), so a
-- write's guard compares 16 characters instead of every rule's text.
CREATE TABLE `event_rules_stamp` (
	`id` integer PRIMARY KEY NOT NULL,
	`stamp` text NOT NULL
);
--> statement-breakpoint
INSERT INTO `event_rules_stamp` (`id`, `stamp`) VALUES (1, lower(hex(randomblob(8))));
--> statement-breakpoint
CREATE TRIGGER `event_rules_stamp_insert` AFTER INSERT ON `event_rules`
BEGIN
	UPDATE `event_rules_stamp` SET `stamp` = lower(hex(randomblob(8))) WHERE `id` = 1;
END;
--> statement-breakpoint
CREATE TRIGGER `event_rules_stamp_update` AFTER UPDATE ON `event_rules`
BEGIN
	UPDATE `event_rules_stamp` SET `stamp` = lower(hex(randomblob(8))) WHERE `id` = 1;
END;
--> statement-breakpoint
CREATE TRIGGER `event_rules_stamp_delete` AFTER DELETE ON `event_rules`
BEGIN
	UPDATE `event_rules_stamp` SET `stamp` = lower(hex(randomblob(8))) WHERE `id` = 1;
END;
--> statement-breakpoint
CREATE TRIGGER `event_rule_object_types_stamp_insert` AFTER INSERT ON `event_rule_object_types`
BEGIN
	UPDATE `event_rules_stamp` SET `stamp` = lower(hex(randomblob(8))) WHERE `id` = 1;
END;
--> statement-breakpoint
CREATE TRIGGER `event_rule_object_types_stamp_update` AFTER UPDATE ON `event_rule_object_types`
BEGIN
	UPDATE `event_rules_stamp` SET `stamp` = lower(hex(randomblob(8))) WHERE `id` = 1;
END;
--> statement-breakpoint
CREATE TRIGGER `event_rule_object_types_stamp_delete` AFTER DELETE ON `event_rule_object_types`
BEGIN
	UPDATE `event_rules_stamp` SET `stamp` = lower(hex(randomblob(8))) WHERE `id` = 1;
END;
