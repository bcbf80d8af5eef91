-- The auth stamps (decision 0209): per user, a random value moved, in the same statement, by every
-- write that can change what a look-up of one of the user's tokens reads beyond the token's own
-- row — the user, the user's groups, the object permissions reaching the user and their links,
-- the object types they name — from any process, a cascade included (a deleted parent's
-- links move the stamps through their own triggers; where foreign keys are off, the parent's
-- trigger finds the links still there). A remote read proves its cached token and grants current
-- by this one value. A user with no row reads as '' until a change writes one.
CREATE TABLE `auth_stamp` (
	`user_id` integer PRIMARY KEY NOT NULL,
	`stamp` text NOT NULL
);
--> statement-breakpoint
CREATE TRIGGER `auth_stamp_users_update` AFTER UPDATE OF `username`, `is_superuser`, `is_active` ON `users`
BEGIN
	INSERT INTO `auth_stamp` (`user_id`, `stamp`)
	SELECT `u`, lower(hex(randomblob(8))) FROM (SELECT OLD.`id` AS `u`) WHERE `u` IS NOT NULL
	ON CONFLICT (`user_id`) DO UPDATE SET `stamp` = excluded.`stamp`;
END;
--> statement-breakpoint
CREATE TRIGGER `auth_stamp_users_delete` AFTER DELETE ON `users`
BEGIN
	INSERT INTO `auth_stamp` (`user_id`, `stamp`)
	SELECT `u`, lower(hex(randomblob(8))) FROM (SELECT OLD.`id` AS `u`) WHERE `u` IS NOT NULL
	ON CONFLICT (`user_id`) DO UPDATE SET `stamp` = excluded.`stamp`;
END;
--> statement-breakpoint
CREATE TRIGGER `auth_stamp_groups_delete` AFTER DELETE ON `groups`
BEGIN
	INSERT INTO `auth_stamp` (`user_id`, `stamp`)
	SELECT `u`, lower(hex(randomblob(8))) FROM (SELECT `user_id` AS `u` FROM `user_groups` WHERE `group_id` = OLD.`id`) WHERE `u` IS NOT NULL
	ON CONFLICT (`user_id`) DO UPDATE SET `stamp` = excluded.`stamp`;
END;
--> statement-breakpoint
CREATE TRIGGER `auth_stamp_user_groups_insert` AFTER INSERT ON `user_groups`
BEGIN
	INSERT INTO `auth_stamp` (`user_id`, `stamp`)
	SELECT `u`, lower(hex(randomblob(8))) FROM (SELECT NEW.`user_id` AS `u`) WHERE `u` IS NOT NULL
	ON CONFLICT (`user_id`) DO UPDATE SET `stamp` = excluded.`stamp`;
END;
--> statement-breakpoint
CREATE TRIGGER `auth_stamp_user_groups_update` AFTER UPDATE ON `user_groups`
BEGIN
	INSERT INTO `auth_stamp` (`user_id`, `stamp`)
	SELECT `u`, lower(hex(randomblob(8))) FROM (SELECT OLD.`user_id` AS `u` UNION SELECT NEW.`user_id` AS `u`) WHERE `u` IS NOT NULL
	ON CONFLICT (`user_id`) DO UPDATE SET `stamp` = excluded.`stamp`;
END;
--> statement-breakpoint
CREATE TRIGGER `auth_stamp_user_groups_delete` AFTER DELETE ON `user_groups`
BEGIN
	INSERT INTO `auth_stamp` (`user_id`, `stamp`)
	SELECT `u`, lower(hex(randomblob(8))) FROM (SELECT OLD.`user_id` AS `u`) WHERE `u` IS NOT NULL
	ON CONFLICT (`user_id`) DO UPDATE SET `stamp` = excluded.`stamp`;
END;
--> statement-breakpoint
CREATE TRIGGER `auth_stamp_object_permissions_update` AFTER UPDATE OF `enabled`, `actions`, `constraints` ON `object_permissions`
BEGIN
	INSERT INTO `auth_stamp` (`user_id`, `stamp`)
	SELECT `u`, lower(hex(randomblob(8))) FROM (SELECT `user_id` AS `u` FROM `object_permission_users` WHERE `permission_id` = OLD.`id` UNION SELECT ug.`user_id` FROM `object_permission_groups` pg JOIN `user_groups` ug ON ug.`group_id` = pg.`group_id` WHERE pg.`permission_id` = OLD.`id`) WHERE `u` IS NOT NULL
	ON CONFLICT (`user_id`) DO UPDATE SET `stamp` = excluded.`stamp`;
END;
--> statement-breakpoint
CREATE TRIGGER `auth_stamp_object_permissions_delete` AFTER DELETE ON `object_permissions`
BEGIN
	INSERT INTO `auth_stamp` (`user_id`, `stamp`)
	SELECT `u`, lower(hex(randomblob(8))) FROM (SELECT `user_id` AS `u` FROM `object_permission_users` WHERE `permission_id` = OLD.`id` UNION SELECT ug.`user_id` FROM `object_permission_groups` pg JOIN `user_groups` ug ON ug.`group_id` = pg.`group_id` WHERE pg.`permission_id` = OLD.`id`) WHERE `u` IS NOT NULL
	ON CONFLICT (`user_id`) DO UPDATE SET `stamp` = excluded.`stamp`;
END;
--> statement-breakpoint
CREATE TRIGGER `auth_stamp_object_permission_users_insert` AFTER INSERT ON `object_permission_users`
BEGIN
	INSERT INTO `auth_stamp` (`user_id`, `stamp`)
	SELECT `u`, lower(hex(randomblob(8))) FROM (SELECT NEW.`user_id` AS `u`) WHERE `u` IS NOT NULL
	ON CONFLICT (`user_id`) DO UPDATE SET `stamp` = excluded.`stamp`;
END;
--> statement-breakpoint
CREATE TRIGGER `auth_stamp_object_permission_users_update` AFTER UPDATE ON `object_permission_users`
BEGIN
	INSERT INTO `auth_stamp` (`user_id`, `stamp`)
	SELECT `u`, lower(hex(randomblob(8))) FROM (SELECT OLD.`user_id` AS `u` UNION SELECT NEW.`user_id` AS `u`) WHERE `u` IS NOT NULL
	ON CONFLICT (`user_id`) DO UPDATE SET `stamp` = excluded.`stamp`;
END;
--> statement-breakpoint
CREATE TRIGGER `auth_stamp_object_permission_users_delete` AFTER DELETE ON `object_permission_users`
BEGIN
	INSERT INTO `auth_stamp` (`user_id`, `stamp`)
	SELECT `u`, lower(hex(randomblob(8))) FROM (SELECT OLD.`user_id` AS `u`) WHERE `u` IS NOT NULL
	ON CONFLICT (`user_id`) DO UPDATE SET `stamp` = excluded.`stamp`;
END;
--> statement-breakpoint
CREATE TRIGGER `auth_stamp_object_permission_groups_insert` AFTER INSERT ON `object_permission_groups`
BEGIN
	INSERT INTO `auth_stamp` (`user_id`, `stamp`)
	SELECT `u`, lower(hex(randomblob(8))) FROM (SELECT `user_id` AS `u` FROM `user_groups` WHERE `group_id` = NEW.`group_id`) WHERE `u` IS NOT NULL
	ON CONFLICT (`user_id`) DO UPDATE SET `stamp` = excluded.`stamp`;
END;
--> statement-breakpoint
CREATE TRIGGER `auth_stamp_object_permission_groups_update` AFTER UPDATE ON `object_permission_groups`
BEGIN
	INSERT INTO `auth_stamp` (`user_id`, `stamp`)
	SELECT `u`, lower(hex(randomblob(8))) FROM (SELECT `user_id` AS `u` FROM `user_groups` WHERE `group_id` = OLD.`group_id` UNION SELECT `user_id` AS `u` FROM `user_groups` WHERE `group_id` = NEW.`group_id`) WHERE `u` IS NOT NULL
	ON CONFLICT (`user_id`) DO UPDATE SET `stamp` = excluded.`stamp`;
END;
--> statement-breakpoint
CREATE TRIGGER `auth_stamp_object_permission_groups_delete` AFTER DELETE ON `object_permission_groups`
BEGIN
	INSERT INTO `auth_stamp` (`user_id`, `stamp`)
	SELECT `u`, lower(hex(randomblob(8))) FROM (SELECT `user_id` AS `u` FROM `user_groups` WHERE `group_id` = OLD.`group_id`) WHERE `u` IS NOT NULL
	ON CONFLICT (`user_id`) DO UPDATE SET `stamp` = excluded.`stamp`;
END;
--> statement-breakpoint
CREATE TRIGGER `auth_stamp_object_permission_object_types_insert` AFTER INSERT ON `object_permission_object_types`
BEGIN
	INSERT INTO `auth_stamp` (`user_id`, `stamp`)
	SELECT `u`, lower(hex(randomblob(8))) FROM (SELECT `user_id` AS `u` FROM `object_permission_users` WHERE `permission_id` = NEW.`permission_id` UNION SELECT ug.`user_id` FROM `object_permission_groups` pg JOIN `user_groups` ug ON ug.`group_id` = pg.`group_id` WHERE pg.`permission_id` = NEW.`permission_id`) WHERE `u` IS NOT NULL
	ON CONFLICT (`user_id`) DO UPDATE SET `stamp` = excluded.`stamp`;
END;
--> statement-breakpoint
CREATE TRIGGER `auth_stamp_object_permission_object_types_update` AFTER UPDATE ON `object_permission_object_types`
BEGIN
	INSERT INTO `auth_stamp` (`user_id`, `stamp`)
	SELECT `u`, lower(hex(randomblob(8))) FROM (SELECT `user_id` AS `u` FROM `object_permission_users` WHERE `permission_id` = OLD.`permission_id` UNION SELECT ug.`user_id` FROM `object_permission_groups` pg JOIN `user_groups` ug ON ug.`group_id` = pg.`group_id` WHERE pg.`permission_id` = OLD.`permission_id` UNION SELECT `user_id` AS `u` FROM `object_permission_users` WHERE `permission_id` = NEW.`permission_id` UNION SELECT ug.`user_id` FROM `object_permission_groups` pg JOIN `user_groups` ug ON ug.`group_id` = pg.`group_id` WHERE pg.`permission_id` = NEW.`permission_id`) WHERE `u` IS NOT NULL
	ON CONFLICT (`user_id`) DO UPDATE SET `stamp` = excluded.`stamp`;
END;
--> statement-breakpoint
CREATE TRIGGER `auth_stamp_object_permission_object_types_delete` AFTER DELETE ON `object_permission_object_types`
BEGIN
	INSERT INTO `auth_stamp` (`user_id`, `stamp`)
	SELECT `u`, lower(hex(randomblob(8))) FROM (SELECT `user_id` AS `u` FROM `object_permission_users` WHERE `permission_id` = OLD.`permission_id` UNION SELECT ug.`user_id` FROM `object_permission_groups` pg JOIN `user_groups` ug ON ug.`group_id` = pg.`group_id` WHERE pg.`permission_id` = OLD.`permission_id`) WHERE `u` IS NOT NULL
	ON CONFLICT (`user_id`) DO UPDATE SET `stamp` = excluded.`stamp`;
END;
--> statement-breakpoint
CREATE TRIGGER `auth_stamp_object_types_update` AFTER UPDATE OF `app_label`, `model` ON `object_types`
BEGIN
	INSERT INTO `auth_stamp` (`user_id`, `stamp`)
	SELECT `u`, lower(hex(randomblob(8))) FROM (SELECT `user_id` AS `u` FROM `object_permission_users` WHERE `permission_id` IN (SELECT `permission_id` FROM `object_permission_object_types` WHERE `object_type_id` = OLD.`id`) UNION SELECT ug.`user_id` FROM `object_permission_groups` pg JOIN `user_groups` ug ON ug.`group_id` = pg.`group_id` WHERE pg.`permission_id` IN (SELECT `permission_id` FROM `object_permission_object_types` WHERE `object_type_id` = OLD.`id`)) WHERE `u` IS NOT NULL
	ON CONFLICT (`user_id`) DO UPDATE SET `stamp` = excluded.`stamp`;
END;
--> statement-breakpoint
CREATE TRIGGER `auth_stamp_object_types_delete` AFTER DELETE ON `object_types`
BEGIN
	INSERT INTO `auth_stamp` (`user_id`, `stamp`)
	SELECT `u`, lower(hex(randomblob(8))) FROM (SELECT `user_id` AS `u` FROM `object_permission_users` WHERE `permission_id` IN (SELECT `permission_id` FROM `object_permission_object_types` WHERE `object_type_id` = OLD.`id`) UNION SELECT ug.`user_id` FROM `object_permission_groups` pg JOIN `user_groups` ug ON ug.`group_id` = pg.`group_id` WHERE pg.`permission_id` IN (SELECT `permission_id` FROM `object_permission_object_types` WHERE `object_type_id` = OLD.`id`)) WHERE `u` IS NOT NULL
	ON CONFLICT (`user_id`) DO UPDATE SET `stamp` = excluded.`stamp`;
END;
