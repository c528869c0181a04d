--
-- The janitor pass from SQL: retention, policies, stuck-claim alerts.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idem_gate;
RESET client_min_messages;
TRUNCATE idem_gate.claims;

-- jan_age(key, wf, by): move a claim's clock back
CREATE FUNCTION jan_age(k text, w text, by interval) RETURNS void
LANGUAGE sql AS $$
	UPDATE idem_gate.claims
	   SET created_at = created_at - by, claimed_at = claimed_at - by,
	       updated_at = updated_at - by, completed_at = completed_at - by
	 WHERE workflow = w AND key = k $$;

-- jan_make(key, wf, final state, age)
CREATE FUNCTION jan_make(k text, w text, st text, by interval) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM idem_claim(k, w);
	IF st = 'completed' THEN PERFORM idem_complete(k, w, NULL, '{"ok": true}');
	ELSIF st = 'failed_retryable' THEN PERFORM idem_fail(k, w, NULL, 'x', true);
	ELSIF st = 'needs_review' THEN PERFORM idem_fail(k, w, NULL, 'x', false);
	END IF;
	PERFORM jan_age(k, w, by);
END $$;

-- defaults: completed kept 30 days, failed_retryable 7 days, needs_review forever
SHOW idem_gate.retention;
SHOW idem_gate.failed_retention;
SHOW idem_gate.stuck_after;
SHOW idem_gate.stuck_action;

SELECT jan_make('old_done', 'wf', 'completed', '31 days');
SELECT jan_make('young_done', 'wf', 'completed', '29 days');
SELECT jan_make('old_failed', 'wf', 'failed_retryable', '8 days');
SELECT jan_make('young_failed', 'wf', 'failed_retryable', '6 days');
SELECT jan_make('old_review', 'wf', 'needs_review', '400 days');
SELECT jan_make('fresh', 'wf', 'processing', '1 minute');

SELECT * FROM idem_gate.janitor_run();
SELECT key, state FROM idem_gate.claims ORDER BY key;
-- nothing left to do
SELECT * FROM idem_gate.janitor_run();
-- a deleted completed key is a new event again
SELECT idem_claim('old_done', 'wf');

-- per-workflow policies win over the settings
INSERT INTO idem_gate.policies (workflow, retention, failed_retention, stuck_after)
VALUES ('short', '1 hour', '10 minutes', NULL),
	   ('long', '400 days', NULL, NULL);
SELECT jan_make('s_done', 'short', 'completed', '2 hours');
SELECT jan_make('s_failed', 'short', 'failed_retryable', '20 minutes');
SELECT jan_make('s_young', 'short', 'completed', '30 minutes');
SELECT jan_make('l_done', 'long', 'completed', '100 days');
SELECT jan_make('l_failed', 'long', 'failed_retryable', '8 days');
SELECT jan_make('d_done', 'default_wf', 'completed', '2 hours');
SELECT * FROM idem_gate.janitor_run();
SELECT workflow, key, state FROM idem_gate.claims WHERE workflow IN ('short', 'long', 'default_wf') ORDER BY 1, 2;

-- the settings apply to a pass run from SQL
SET idem_gate.retention = '1h';
SELECT deleted_completed FROM idem_gate.janitor_run();
SELECT count(*) FROM idem_gate.claims WHERE key = 'd_done';
RESET idem_gate.retention;

-- invalid settings and policies are refused (for the settings in seconds
-- only the SQLSTATE: PostgreSQL 16 added the unit to the bounds in its
-- message, which is PostgreSQL's, not idem_gate's)
\set VERBOSITY sqlstate
SET idem_gate.retention = -1;
SET idem_gate.stuck_after = 0;
\set VERBOSITY default
SET idem_gate.stuck_action = 'delete';
SET idem_gate.batch_size = 0;
-- (the managed edition takes any value at SET and refuses a bad one at its
-- first use: both editions go on from the defaults)
RESET idem_gate.retention;
RESET idem_gate.stuck_after;
RESET idem_gate.stuck_action;
RESET idem_gate.batch_size;
INSERT INTO idem_gate.policies (workflow, retention) VALUES ('bad', '-1 day');
INSERT INTO idem_gate.policies (workflow, retention) VALUES ('bad', '1 day -25 hours');
INSERT INTO idem_gate.policies (workflow, stuck_after) VALUES ('bad', '0');
INSERT INTO idem_gate.policies (workflow) VALUES ('bad');
INSERT INTO idem_gate.policies (workflow, retention) VALUES ('', '1 day');
INSERT INTO idem_gate.policies (workflow, retention) VALUES ('short', '1 day');

------------------------------------------------------------------------
-- stuck claims: one alert per claim, again only after a new grant
------------------------------------------------------------------------
TRUNCATE idem_gate.claims;
DELETE FROM idem_gate.policies;
SET client_min_messages = error;	-- the WARNING names ages that vary
SELECT jan_make('stuck_1', 'wf', 'processing', '20 minutes');
SELECT jan_make('stuck_2', 'wf', 'processing', '1 day');
SELECT jan_make('busy', 'wf', 'processing', '5 minutes');
SELECT alerts, escalated FROM idem_gate.janitor_run();
SELECT key, state, alerted_token = token AS alerted FROM idem_gate.claims ORDER BY key;
-- still stuck, but already alerted
SELECT alerts FROM idem_gate.janitor_run();
-- taken over, then stuck again: alerted again
SELECT outcome FROM idem_claim_ex('stuck_2', 'wf', '1 hour');
SELECT alerts FROM idem_gate.janitor_run();
SELECT jan_age('stuck_2', 'wf', '1 hour');
SELECT alerts FROM idem_gate.janitor_run();
-- a heartbeat keeps a long side effect from being called stuck
SELECT jan_make('beating', 'wf', 'processing', '1 hour');
SELECT idem_heartbeat('beating', 'wf', (SELECT token FROM idem_status('beating', 'wf')));
SELECT alerts FROM idem_gate.janitor_run();
-- a per-workflow stuck_after
INSERT INTO idem_gate.policies (workflow, stuck_after) VALUES ('slow', '2 hours'), ('fast', '1 minute');
SELECT jan_make('slow_1', 'slow', 'processing', '1 hour');
SELECT jan_make('fast_1', 'fast', 'processing', '2 minutes');
SELECT alerts FROM idem_gate.janitor_run();
SELECT workflow, key FROM idem_gate.claims WHERE alerted_token = token AND workflow <> 'wf';

-- stuck_action = review: alerted and moved to needs_review
SET idem_gate.stuck_action = 'review';
SELECT jan_make('stuck_3', 'wf', 'processing', '1 hour');
SELECT alerts, escalated FROM idem_gate.janitor_run();
SELECT state, last_error LIKE 'stuck in processing for %' AS why FROM idem_status('stuck_3', 'wf');
-- the owner can no longer complete it; an operator decides
SELECT idem_complete('stuck_3', 'wf') IS NULL;
RESET client_min_messages;
SELECT idem_resolve('stuck_3', 'wf', 'completed', '{"checked": true}');
RESET idem_gate.stuck_action;

-- janitor_run is refused in a read-only transaction
BEGIN TRANSACTION READ ONLY;
SELECT * FROM idem_gate.janitor_run();
ROLLBACK;
