-- The coordinate text migration 0017 kept aside (text a site's latitude or longitude held that is
-- no coordinate) moves from the columns `_latitude_text` / `_longitude_text` of `sites`, which the
-- Drizzle schema did not declare (so a rebuild of `sites` generated from it would have dropped
-- them), into `site_coordinate_text`, which it declares (decision 0216): a row a site and field,
-- gone with its site. Never answered, as before; the columns are dropped. In SQL alone (D1 too).
CREATE TABLE `site_coordinate_text` (
	`site_id` integer NOT NULL,
	`field` text NOT NULL,
	`text` text NOT NULL,
	PRIMARY KEY(`site_id`, `field`),
	FOREIGN KEY (`site_id`) REFERENCES `sites`(`id`) ON UPDATE no action ON DELETE cascade,
	CONSTRAINT "site_coordinate_text_field" CHECK("site_coordinate_text"."field" IN ('latitude', 'longitude'))
);
--> statement-breakpoint
INSERT INTO `site_coordinate_text` (`site_id`, `field`, `text`)
SELECT `id`, 'latitude', `_latitude_text` FROM `sites` WHERE `_latitude_text` IS NOT NULL
UNION ALL
SELECT `id`, 'longitude', `_longitude_text` FROM `sites` WHERE `_longitude_text` IS NOT NULL;
--> statement-breakpoint
ALTER TABLE `sites` DROP COLUMN `_latitude_text`;--> statement-breakpoint
ALTER TABLE `sites` DROP COLUMN `_longitude_text`;
