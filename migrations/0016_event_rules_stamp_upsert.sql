-- The event rules' stamp kept even when its row is gone (decision 0197, amended): each trigger
-- writes row 1 whether or not it is there, so a row lost to a hand clean-up or a partial restore
-- comes back with the next rule write instead of leaving the stamp '' (every copy "current").
DROP TRIGGER IF EXISTS `event_rules_stamp_insert`;
--> statement-breakpoint
CREATE TRIGGER `event_rules_stamp_insert` AFTER INSERT ON `event_rules`
BEGIN
	INSERT INTO `event_rules_stamp` (`id`, `stamp`) VALUES (1, lower(hex(randomblob(8))))
	ON CONFLICT (`id`) DO UPDATE SET `stamp` = excluded.`stamp`;
END;
--> statement-breakpoint
DROP TRIGGER IF EXISTS `event_rules_stamp_update`;
--> statement-breakpoint
CREATE TRIGGER `event_rules_stamp_update` AFTER UPDATE ON `event_rules`
BEGIN
	INSERT INTO `event_rules_stamp` (`id`, `stamp`) VALUES (1, lower(hex(randomblob(8))))
	ON CONFLICT (`id`) DO UPDATE SET `stamp` = excluded.`stamp`;
END;
--> statement-breakpoint
DROP TRIGGER IF EXISTS `event_rules_stamp_delete`;
--> statement-breakpoint
CREATE TRIGGER `event_rules_stamp_delete` AFTER DELETE ON `event_rules`
BEGIN
	INSERT INTO `event_rules_stamp` (`id`, `stamp`) VALUES (1, lower(hex(randomblob(8))))
	ON CONFLICT (`id`) DO UPDATE SET `stamp` = excluded.`stamp`;
END;
--> statement-breakpoint
DROP TRIGGER IF EXISTS `event_rule_object_types_stamp_insert`;
--> statement-breakpoint
CREATE TRIGGER `event_rule_object_types_stamp_insert` AFTER INSERT ON `event_rule_object_types`
BEGIN
	INSERT INTO `event_rules_stamp` (`id`, `stamp`) VALUES (1, lower(hex(randomblob(8))))
	ON CONFLICT (`id`) DO UPDATE SET `stamp` = excluded.`stamp`;
END;
--> statement-breakpoint
DROP TRIGGER IF EXISTS `event_rule_object_types_stamp_update`;
--> statement-breakpoint
CREATE TRIGGER `event_rule_object_types_stamp_update` AFTER UPDATE ON `event_rule_object_types`
BEGIN
	INSERT INTO `event_rules_stamp` (`id`, `stamp`) VALUES (1, lower(hex(randomblob(8))))
	ON CONFLICT (`id`) DO UPDATE SET `stamp` = excluded.`stamp`;
END;
--> statement-breakpoint
DROP TRIGGER IF EXISTS `event_rule_object_types_stamp_delete`;
--> statement-breakpoint
CREATE TRIGGER `event_rule_object_types_stamp_delete` AFTER DELETE ON `event_rule_object_types`
BEGIN
	INSERT INTO `event_rules_stamp` (`id`, `stamp`) VALUES (1, lower(hex(randomblob(8))))
	ON CONFLICT (`id`) DO UPDATE SET `stamp` = excluded.`stamp`;
END;
