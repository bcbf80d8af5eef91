-- One field per reverse relation name on a related object type (decision 0156): the database
-- refuses a second one, so two writers racing for a name cannot both take it. Fields that share
-- one already (written before the check covered documents and lists, 0142, or by such a race):
-- the first made (lowest id) keeps it, the others' reverse names are cleared (the attribute adds
-- no accessor here, 0052; the field, its values and its links are untouched). Empty names
-- (none given) and polymorphic fields (no single related type) are outside the index.
UPDATE `custom_object_type_fields` SET `related_name` = ''
WHERE `related_name` <> '' AND `related_object_type_id` IS NOT NULL AND EXISTS (
  SELECT 1 FROM `custom_object_type_fields` AS `first`
  WHERE `first`.`related_object_type_id` = `custom_object_type_fields`.`related_object_type_id`
    AND `first`.`related_name` = `custom_object_type_fields`.`related_name`
    AND `first`.`id` < `custom_object_type_fields`.`id`
);--> statement-breakpoint
CREATE UNIQUE INDEX IF NOT EXISTS `cotf_related_name_uq` ON `custom_object_type_fields` (`related_object_type_id`,`related_name`) WHERE related_name <> '';
