-- One full-text index for every custom object type (decision 0130), in place of a FTS5 table and
-- a pending table per type: the rowid packs the type and the object (type_id * 2^40 + id), the
-- one column holds the object's indexed fields' lowered text. Types' triggers (made at run time)
-- add (type_id, id) to the pending table; the flusher indexes them. Not in the Drizzle schema.
CREATE VIRTUAL TABLE IF NOT EXISTS `co_search` USING fts5(body, content='', contentless_delete=1, tokenize='trigram case_sensitive 1');--> statement-breakpoint
CREATE TABLE IF NOT EXISTS `co_search_pending` (`type_id` integer NOT NULL, `id` integer NOT NULL, PRIMARY KEY (`type_id`, `id`)) WITHOUT ROWID;
