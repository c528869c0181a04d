-- The stress invariants: each a query that returns the violations, so an
-- empty result is a pass.
\pset format unaligned
\pset tuples_only on
\set ON_ERROR_STOP 1

SELECT 'grants: ' || count(*) || ' (new ' || count(*) FILTER (WHERE outcome = 'new')
	|| ', stale_taken ' || count(*) FILTER (WHERE outcome = 'stale_taken') || ')' FROM stress.grants;
SELECT 'calls: ' || string_agg(what || '=' || n, ', ' ORDER BY what)
  FROM (SELECT what, sum(n) AS n FROM stress.calls GROUP BY what) c;
SELECT 'final rows: ' || string_agg(state || '=' || n, ', ' ORDER BY state)
  FROM (SELECT state, count(*) AS n FROM idem_gate.claims GROUP BY state) s;

CREATE TEMP TABLE checks (name text, violations bigint);

-- 1. no token was ever granted to two runs
INSERT INTO checks SELECT 'no token granted to two runs', count(*)
  FROM (SELECT token FROM stress.grants GROUP BY token HAVING count(DISTINCT run) > 1) d;
-- 2. per key, tokens only grow in grant order
INSERT INTO checks SELECT 'tokens only grow per key', count(*)
  FROM (SELECT token <= lag(token) OVER (PARTITION BY key ORDER BY id) AS bad FROM stress.grants) g
 WHERE bad;
-- 3. every row's token is the last one granted for its key, its attempt
--    counts the grants, and no row exists without a grant
INSERT INTO checks SELECT 'row token is the last grant', count(*)
  FROM idem_gate.claims c
  LEFT JOIN (SELECT key, max(token) AS token, count(*) AS grants FROM stress.grants GROUP BY key) g
	ON g.key = c.key
 WHERE g.token IS DISTINCT FROM c.token OR g.grants IS DISTINCT FROM c.attempt;
-- 4. a completed row was completed by the run that owned it
INSERT INTO checks SELECT 'completion came from the owner', count(*)
  FROM idem_gate.claims WHERE state = 'completed' AND (result->>'token')::bigint IS DISTINCT FROM token;
-- 5. every row is consistent with its state (each of the CHECK constraints
--    holds, although the gate writes its rows without evaluating them,
--    and each state has what it needs)
INSERT INTO checks SELECT 'rows consistent with their state', count(*)
  FROM idem_gate.claims
 WHERE (state = 'completed') <> (completed_at IS NOT NULL)
	OR (result IS NOT NULL AND state <> 'completed')
	OR (completed_at IS NOT NULL AND completed_at <> updated_at)
	OR key = '' OR workflow = ''
	OR attempt < 1 OR token < 1
	OR NOT (created_at <= claimed_at AND claimed_at <= updated_at);
-- 6. fencing was exercised: some owners were refused
INSERT INTO checks SELECT 'stale owners were refused at least once',
	CASE WHEN EXISTS (SELECT 1 FROM stress.calls WHERE what LIKE 'refused_%') THEN 0 ELSE 1 END;
-- 7. takeovers happened
INSERT INTO checks SELECT 'stale takeovers happened',
	CASE WHEN EXISTS (SELECT 1 FROM stress.grants WHERE outcome = 'stale_taken') THEN 0 ELSE 1 END;

SELECT CASE WHEN violations = 0 THEN 'ok' ELSE 'not ok' END || ' - ' || name
	|| CASE WHEN violations = 0 THEN '' ELSE ' (' || violations || ' violations)' END
  FROM checks;
SELECT count(*) FILTER (WHERE violations = 0) || ' passed, '
	|| count(*) FILTER (WHERE violations <> 0) || ' failed' FROM checks;
