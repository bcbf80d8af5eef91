-- A site's latitude and longitude are numbers (decision 0212), as NetBox's DecimalFields: REAL
-- columns the numeric filters compare in SQL. Each text column is renamed aside and a REAL one of
-- the same name added; text that is a number within range (surrounding blanks, a sign, at most one
-- point; more than 6 places are rounded to 6) moves into it, and blank text becomes null. Text
-- that is no coordinate stays in `_latitude_text` / `_longitude_text`, kept, never answered: the
-- site reads null there. In SQL alone, so a database migrated by wrangler (D1) has it too.
ALTER TABLE `sites` RENAME COLUMN `latitude` TO `_latitude_text`;--> statement-breakpoint
ALTER TABLE `sites` ADD `latitude` real;--> statement-breakpoint
UPDATE `sites` SET `latitude` = CASE WHEN v.t = '' THEN NULL ELSE round(CAST(v.t AS REAL), 6) END,
  `_latitude_text` = NULL
FROM (
  SELECT `id`, t, CASE WHEN substr(t, 1, 1) IN ('+', '-') THEN substr(t, 2) ELSE t END AS u
  FROM (SELECT `id`, trim(`_latitude_text`) AS t FROM `sites` WHERE `_latitude_text` IS NOT NULL)
) AS v
WHERE `sites`.`id` = v.`id` AND (v.t = '' OR (v.u GLOB '*[0-9]*' AND v.u NOT GLOB '*[^0-9.]*'
  AND v.u NOT GLOB '*.*.*' AND CAST(v.u AS REAL) <= 90));
--> statement-breakpoint
ALTER TABLE `sites` RENAME COLUMN `longitude` TO `_longitude_text`;--> statement-breakpoint
ALTER TABLE `sites` ADD `longitude` real;--> statement-breakpoint
UPDATE `sites` SET `longitude` = CASE WHEN v.t = '' THEN NULL ELSE round(CAST(v.t AS REAL), 6) END,
  `_longitude_text` = NULL
FROM (
  SELECT `id`, t, CASE WHEN substr(t, 1, 1) IN ('+', '-') THEN substr(t, 2) ELSE t END AS u
  FROM (SELECT `id`, trim(`_longitude_text`) AS t FROM `sites` WHERE `_longitude_text` IS NOT NULL)
) AS v
WHERE `sites`.`id` = v.`id` AND (v.t = '' OR (v.u GLOB '*[0-9]*' AND v.u NOT GLOB '*[^0-9.]*'
  AND v.u NOT GLOB '*.*.*' AND CAST(v.u AS REAL) <= 180));
