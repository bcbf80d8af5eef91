ALTER TABLE `custom_object_types` ADD `conditional_constraints` text DEFAULT '{"unique":[],"checks":[]}' NOT NULL;
