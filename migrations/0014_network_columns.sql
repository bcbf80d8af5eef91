-- Prefixes and IP addresses store their text as numbers too (decision 0203): family, mask length
-- and first/last (or host) address as fixed-width hex, which the network filters (`within`,
-- `contains`, `parent`, …) compare in SQL. Rows written before get theirs below, in SQL; what that
-- leaves (text that is no network) the start-up step (src/db/migrate.ts) marks family 0.
ALTER TABLE `ip_addresses` ADD `_family` integer;--> statement-breakpoint
ALTER TABLE `ip_addresses` ADD `_mask` integer;--> statement-breakpoint
ALTER TABLE `ip_addresses` ADD `_host` text;--> statement-breakpoint
CREATE INDEX `ip_addresses_net_idx` ON `ip_addresses` (`_family`,`_host`);--> statement-breakpoint
ALTER TABLE `prefixes` ADD `_family` integer;--> statement-breakpoint
ALTER TABLE `prefixes` ADD `_mask` integer;--> statement-breakpoint
ALTER TABLE `prefixes` ADD `_first` text;--> statement-breakpoint
ALTER TABLE `prefixes` ADD `_last` text;--> statement-breakpoint
CREATE INDEX `prefixes_net_idx` ON `prefixes` (`_family`,`_first`);--> statement-breakpoint
-- Rows stored before get their numbers here, in SQL, so a database migrated by SQL alone (D1, by
-- wrangler) has them too; `src/networks.ts` is the reference (tests/db/network-backfill.test.ts
-- compares the two). `a0`: the text split at '/'; `t` to `a`: an IPv6 address's IPv4 tail
-- (`::ffff:192.0.2.1`) as the two groups it stands for, `a` materialized since D1 runs out of
-- memory inlining these expressions into the ones below; `x`, `y`: an IPv6 '::' and the zero
-- groups it stands for; `s`: the address written out in full; `g`: one group a step (an IPv4
-- octet as two hex digits, an IPv6 group as four) and whether each is one. Text that is no
-- network is left for the start-up step, which marks it family 0.
UPDATE `prefixes` SET `_family` = v.fam, `_mask` = v.m,
  `_first` = substr(v.h, 1, v.m / 4)
    || (CASE WHEN v.m % 4 > 0 THEN substr('0123456789abcdef', ((instr('0123456789abcdef', substr(v.h, v.m / 4 + 1, 1)) - 1) & (15 << (4 - v.m % 4)) & 15) + 1, 1) ELSE '' END)
    || substr('00000000000000000000000000000000', 1, length(v.h) - v.m / 4 - (v.m % 4 > 0)),
  `_last` = substr(v.h, 1, v.m / 4)
    || (CASE WHEN v.m % 4 > 0 THEN substr('0123456789abcdef', ((instr('0123456789abcdef', substr(v.h, v.m / 4 + 1, 1)) - 1) | (15 >> (v.m % 4))) + 1, 1) ELSE '' END)
    || substr('ffffffffffffffffffffffffffffffff', 1, length(v.h) - v.m / 4 - (v.m % 4 > 0))
FROM (
  WITH RECURSIVE
    a0 AS (
      SELECT `id`, lower(substr(`prefix`, 1, instr(`prefix`, '/') - 1)) AS ad0, substr(`prefix`, instr(`prefix`, '/') + 1) AS mt
      FROM `prefixes` WHERE `_family` IS NULL AND instr(`prefix`, '/') > 0),
    t AS (SELECT *, rtrim(ad0, '0123456789.') AS p, substr(ad0, length(rtrim(ad0, '0123456789.')) + 1) AS q FROM a0),
    t1 AS (SELECT *, substr(q, 1, instr(q, '.') - 1) AS o1, substr(q, instr(q, '.') + 1) AS q1 FROM t),
    t2 AS (SELECT *, substr(q1, 1, instr(q1, '.') - 1) AS o2, substr(q1, instr(q1, '.') + 1) AS q2 FROM t1),
    t3 AS (SELECT *, substr(q2, 1, instr(q2, '.') - 1) AS o3, substr(q2, instr(q2, '.') + 1) AS o4 FROM t2),
    a AS MATERIALIZED (
      SELECT `id`, mt, CASE WHEN instr(ad0, ':') > 0 AND substr(p, -1) = ':'
          AND o1 <> '' AND length(o1) <= 3 AND o1 NOT GLOB '*[^0-9]*' AND CAST(o1 AS INTEGER) <= 255 AND o2 <> '' AND length(o2) <= 3 AND o2 NOT GLOB '*[^0-9]*' AND CAST(o2 AS INTEGER) <= 255
          AND o3 <> '' AND length(o3) <= 3 AND o3 NOT GLOB '*[^0-9]*' AND CAST(o3 AS INTEGER) <= 255 AND o4 <> '' AND length(o4) <= 3 AND o4 NOT GLOB '*[^0-9]*' AND CAST(o4 AS INTEGER) <= 255
        THEN p || printf('%x:%x', CAST(o1 AS INTEGER) * 256 + CAST(o2 AS INTEGER), CAST(o3 AS INTEGER) * 256 + CAST(o4 AS INTEGER))
        ELSE ad0 END AS ad
      FROM t3),
    x AS (SELECT `id`, ad, mt, substr(ad, 1, instr(ad, '::') - 1) AS l, substr(ad, instr(ad, '::') + 2) AS rt FROM a),
    y AS (
      SELECT *, 8 - (CASE WHEN l = '' THEN 0 ELSE length(l) - length(replace(l, ':', '')) + 1 END)
        - (CASE WHEN rt = '' THEN 0 ELSE length(rt) - length(replace(rt, ':', '')) + 1 END) AS missing
      FROM x),
    s AS (
      SELECT `id`, CASE WHEN instr(ad, ':') > 0 THEN 6 ELSE 4 END AS fam, CAST(mt AS INTEGER) AS m,
        CASE WHEN instr(ad, ':') > 0 THEN ':' ELSE '.' END AS sep,
        CASE WHEN instr(ad, ':') = 0 OR instr(ad, '::') = 0 THEN ad
          ELSE l || (CASE WHEN l = '' THEN '' ELSE ':' END) || substr('0:0:0:0:0:0:0:0', 1, 2 * missing - 1)
            || (CASE WHEN rt = '' THEN '' ELSE ':' END) || rt END AS e
      FROM y
      WHERE mt <> '' AND mt NOT GLOB '*[^0-9]*' AND length(mt) <= 3
        AND (instr(ad, '::') = 0 OR (instr(rt, '::') = 0 AND missing >= 1))),
    g(`id`, fam, m, sep, h, r, n, ok) AS (
      SELECT `id`, fam, m, sep, '', e || sep, 0, 1 FROM s
      UNION ALL
      SELECT `id`, fam, m, sep,
        h || CASE fam WHEN 4 THEN printf('%02x', CAST(substr(r, 1, instr(r, sep) - 1) AS INTEGER))
          ELSE substr('0000' || substr(r, 1, instr(r, sep) - 1), -4, 4) END,
        substr(r, instr(r, sep) + 1), n + 1,
        ok AND instr(r, sep) > 1 AND CASE fam
          WHEN 4 THEN substr(r, 1, instr(r, sep) - 1) NOT GLOB '*[^0-9]*' AND instr(r, sep) <= 4
            AND CAST(substr(r, 1, instr(r, sep) - 1) AS INTEGER) <= 255
          ELSE substr(r, 1, instr(r, sep) - 1) NOT GLOB '*[^0-9a-f]*' AND instr(r, sep) <= 5 END
      FROM g WHERE r <> '' AND n < 8)
  SELECT `id`, fam, m, h FROM g
  WHERE r = '' AND ok AND n = CASE fam WHEN 4 THEN 4 ELSE 8 END AND m <= CASE fam WHEN 4 THEN 32 ELSE 128 END
) AS v WHERE `prefixes`.`id` = v.`id`;
--> statement-breakpoint
UPDATE `ip_addresses` SET `_family` = v.fam, `_mask` = v.m, `_host` = v.h
FROM (
  WITH RECURSIVE
    a0 AS (
      SELECT `id`, lower(substr(`address`, 1, instr(`address`, '/') - 1)) AS ad0, substr(`address`, instr(`address`, '/') + 1) AS mt
      FROM `ip_addresses` WHERE `_family` IS NULL AND instr(`address`, '/') > 0),
    t AS (SELECT *, rtrim(ad0, '0123456789.') AS p, substr(ad0, length(rtrim(ad0, '0123456789.')) + 1) AS q FROM a0),
    t1 AS (SELECT *, substr(q, 1, instr(q, '.') - 1) AS o1, substr(q, instr(q, '.') + 1) AS q1 FROM t),
    t2 AS (SELECT *, substr(q1, 1, instr(q1, '.') - 1) AS o2, substr(q1, instr(q1, '.') + 1) AS q2 FROM t1),
    t3 AS (SELECT *, substr(q2, 1, instr(q2, '.') - 1) AS o3, substr(q2, instr(q2, '.') + 1) AS o4 FROM t2),
    a AS MATERIALIZED (
      SELECT `id`, mt, CASE WHEN instr(ad0, ':') > 0 AND substr(p, -1) = ':'
          AND o1 <> '' AND length(o1) <= 3 AND o1 NOT GLOB '*[^0-9]*' AND CAST(o1 AS INTEGER) <= 255 AND o2 <> '' AND length(o2) <= 3 AND o2 NOT GLOB '*[^0-9]*' AND CAST(o2 AS INTEGER) <= 255
          AND o3 <> '' AND length(o3) <= 3 AND o3 NOT GLOB '*[^0-9]*' AND CAST(o3 AS INTEGER) <= 255 AND o4 <> '' AND length(o4) <= 3 AND o4 NOT GLOB '*[^0-9]*' AND CAST(o4 AS INTEGER) <= 255
        THEN p || printf('%x:%x', CAST(o1 AS INTEGER) * 256 + CAST(o2 AS INTEGER), CAST(o3 AS INTEGER) * 256 + CAST(o4 AS INTEGER))
        ELSE ad0 END AS ad
      FROM t3),
    x AS (SELECT `id`, ad, mt, substr(ad, 1, instr(ad, '::') - 1) AS l, substr(ad, instr(ad, '::') + 2) AS rt FROM a),
    y AS (
      SELECT *, 8 - (CASE WHEN l = '' THEN 0 ELSE length(l) - length(replace(l, ':', '')) + 1 END)
        - (CASE WHEN rt = '' THEN 0 ELSE length(rt) - length(replace(rt, ':', '')) + 1 END) AS missing
      FROM x),
    s AS (
      SELECT `id`, CASE WHEN instr(ad, ':') > 0 THEN 6 ELSE 4 END AS fam, CAST(mt AS INTEGER) AS m,
        CASE WHEN instr(ad, ':') > 0 THEN ':' ELSE '.' END AS sep,
        CASE WHEN instr(ad, ':') = 0 OR instr(ad, '::') = 0 THEN ad
          ELSE l || (CASE WHEN l = '' THEN '' ELSE ':' END) || substr('0:0:0:0:0:0:0:0', 1, 2 * missing - 1)
            || (CASE WHEN rt = '' THEN '' ELSE ':' END) || rt END AS e
      FROM y
      WHERE mt <> '' AND mt NOT GLOB '*[^0-9]*' AND length(mt) <= 3
        AND (instr(ad, '::') = 0 OR (instr(rt, '::') = 0 AND missing >= 1))),
    g(`id`, fam, m, sep, h, r, n, ok) AS (
      SELECT `id`, fam, m, sep, '', e || sep, 0, 1 FROM s
      UNION ALL
      SELECT `id`, fam, m, sep,
        h || CASE fam WHEN 4 THEN printf('%02x', CAST(substr(r, 1, instr(r, sep) - 1) AS INTEGER))
          ELSE substr('0000' || substr(r, 1, instr(r, sep) - 1), -4, 4) END,
        substr(r, instr(r, sep) + 1), n + 1,
        ok AND instr(r, sep) > 1 AND CASE fam
          WHEN 4 THEN substr(r, 1, instr(r, sep) - 1) NOT GLOB '*[^0-9]*' AND instr(r, sep) <= 4
            AND CAST(substr(r, 1, instr(r, sep) - 1) AS INTEGER) <= 255
          ELSE substr(r, 1, instr(r, sep) - 1) NOT GLOB '*[^0-9a-f]*' AND instr(r, sep) <= 5 END
      FROM g WHERE r <> '' AND n < 8)
  SELECT `id`, fam, m, h FROM g
  WHERE r = '' AND ok AND n = CASE fam WHEN 4 THEN 4 ELSE 8 END AND m <= CASE fam WHEN 4 THEN 32 ELSE 128 END
) AS v WHERE `ip_addresses`.`id` = v.`id`;
