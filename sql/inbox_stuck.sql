--
-- The inbox's stuck claims are exactly the rule's: a processing claim
-- whose last change is at least its workflow's stuck_after old (its
-- policy's, or the setting's where it has none or its policy leaves it
-- NULL).  The view finds them through a bound (the shortest stuck_after in
-- force) before it applies the rule: a generated grid of policies shorter
-- and longer than the setting, ages on both sides of each threshold, and
-- three settings checks that the bound never hides a stuck claim and the
-- rule still decides.
--
DELETE FROM idem_gate.claims;
DELETE FROM idem_gate.policies;
INSERT INTO idem_gate.policies (workflow, stuck_after, retention) VALUES
	('st_null', NULL, '30 days'),
	('st_short', '30 seconds', NULL),
	('st_mid', '10 minutes', NULL),
	('st_long', '2 hours', NULL),
	('st_month', '1 mon', NULL);
-- 6 workflows (one without a policy) x 14 ages, all processing
SELECT count(idem_claim(w || ':' || a, w)) AS claimed
  FROM unnest(ARRAY['st_none', 'st_null', 'st_short', 'st_mid', 'st_long', 'st_month']) w,
	   unnest(ARRAY['10s', '29s', '31s', '5min', '9min', '11min', '14min', '16min', '1h',
					'119min', '121min', '29 days', '31 days', '400 days']) a;
CREATE FUNCTION st_compare(s text) RETURNS TABLE (setting text, stuck bigint, extra bigint, missing bigint)
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM set_config('idem_gate.stuck_after', s, true);
	RETURN QUERY
	WITH rule AS (
		SELECT c.workflow, c.key FROM idem_gate.claims c
		  LEFT JOIN idem_gate.policies p ON p.workflow = c.workflow
		 WHERE c.state = 'processing'
		   AND c.updated_at <= now() - make_interval(secs => extract(epoch FROM
				COALESCE(p.stuck_after, s::interval)))),
	view AS (SELECT i.workflow, i.key FROM idem_gate.inbox i WHERE i.reason = 'stuck')
	SELECT s,
		   (SELECT count(*) FROM rule),
		   (SELECT count(*) FROM (SELECT * FROM view EXCEPT ALL SELECT * FROM rule) x),
		   (SELECT count(*) FROM (SELECT * FROM rule EXCEPT ALL SELECT * FROM view) x);
END $$;
-- the ages are set and read in one transaction, so that now() is the same
-- instant for both: a claim 29 seconds old stays 29 seconds old however
-- slowly the server runs (under Valgrind, a second passed between them)
BEGIN;
UPDATE idem_gate.claims
   SET updated_at = now() - split_part(key, ':', 2)::interval,
	   claimed_at = now() - split_part(key, ':', 2)::interval,
	   created_at = now() - split_part(key, ':', 2)::interval;
SAVEPOINT grid;
SELECT * FROM st_compare('15min');
SELECT * FROM st_compare('1min');
SELECT * FROM st_compare('3h');
-- every claim older than a second is stuck when the setting and every
-- policy say so
UPDATE idem_gate.policies SET stuck_after = '1 second' WHERE stuck_after IS NOT NULL;
SELECT * FROM st_compare('1s');
ROLLBACK TO grid;
-- a policy shorter than every other one decides the bound alone: with it
-- gone, the claims it made stuck are no longer in the inbox
SAVEPOINT short;
SELECT count(*) AS short_stuck FROM idem_gate.inbox WHERE workflow = 'st_short';
DELETE FROM idem_gate.policies WHERE workflow = 'st_short';
SELECT count(*) AS short_stuck_by_setting FROM idem_gate.inbox WHERE workflow = 'st_short';
SELECT * FROM st_compare('15min');
ROLLBACK TO short;
-- the per-workflow view of the same claims, one reader's filter
SELECT workflow, count(*) AS stuck, min(key) FILTER (WHERE key LIKE '%:1h') AS an_hour_old
  FROM idem_gate.inbox WHERE workflow IN ('st_mid', 'st_long') GROUP BY workflow ORDER BY workflow;
COMMIT;

DROP FUNCTION st_compare(text);
DELETE FROM idem_gate.claims;
DELETE FROM idem_gate.policies;
