-- The one row the health check's Database probe writes (decision 0123): made here once, so a
-- probe is one write and one read. IF NOT EXISTS: databases the probe itself used to make it in
-- already have it. Not in the Drizzle schema (only raw SQL touches it), like `write_guard`.
CREATE TABLE IF NOT EXISTS `host_health` (`id` integer PRIMARY KEY CHECK (`id` = 1), `checked` text NOT NULL);
