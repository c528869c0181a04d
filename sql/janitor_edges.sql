--
-- Edges of the janitor pass: retention measured from the last change, a
-- pass that needs several batches, the escalation counter.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idem_gate;
RESET client_min_messages;
TRUNCATE idem_gate.claims;
DELETE FROM idem_gate.policies;

-- je_row(key, wf, state, created, changed): a row in state st, created
-- `created` ago and last changed (completed, failed, heartbeaten) `changed`
-- ago; the claim itself is as old as the row
CREATE FUNCTION je_row(k text, w text, st text, created interval, changed interval)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM idem_claim(k, w);
	IF st = 'completed' THEN PERFORM idem_complete(k, w, NULL, '{"ok": true}');
	ELSIF st = 'failed_retryable' THEN PERFORM idem_fail(k, w, NULL, 'x', true);
	END IF;
	UPDATE idem_gate.claims
	   SET created_at = now() - created, claimed_at = now() - created,
	       updated_at = now() - changed,
	       completed_at = CASE WHEN st = 'completed' THEN now() - changed END
	 WHERE workflow = w AND key = k;
END $$;

------------------------------------------------------------------------
-- retention and staleness count from the row's last change, not from its
-- creation; a short policy on another workflow widens the pass's index
-- range so that the per-row bound is what decides
------------------------------------------------------------------------
INSERT INTO idem_gate.policies (workflow, retention, failed_retention, stuck_after)
VALUES ('je_short', '1 hour', '1 hour', '1 minute');
SELECT je_row('late_done', 'je_wf', 'completed', '31 days', '2 days');
SELECT je_row('late_failed', 'je_wf', 'failed_retryable', '8 days', '2 days');
SELECT je_row('beating', 'je_wf', 'processing', '1 day', '1 minute');
SELECT je_row('old_done', 'je_wf', 'completed', '31 days', '31 days');
SELECT je_row('old_failed', 'je_wf', 'failed_retryable', '8 days', '8 days');
SELECT je_row('s_done', 'je_short', 'completed', '3 hours', '2 hours');
SELECT je_row('s_young', 'je_short', 'completed', '3 hours', '30 minutes');
SET client_min_messages = error;	-- the WARNING names tokens and ages
SELECT * FROM idem_gate.janitor_run();
RESET client_min_messages;
SELECT workflow, key, state, alerted_token IS NOT NULL AS alerted
  FROM idem_gate.claims ORDER BY 1, 2;

------------------------------------------------------------------------
-- a pass runs batches until one comes back short: with batch_size = 2,
-- five expired rows of each kind, some with equal timestamps, and five
-- stuck claims are all handled by one pass
------------------------------------------------------------------------
TRUNCATE idem_gate.claims;
DELETE FROM idem_gate.policies;
SET idem_gate.batch_size = 2;
SHOW idem_gate.batch_size;
BEGIN;
SELECT je_row('done_' || i, 'je_batch', 'completed', '40 days', '31 days')
  FROM generate_series(1, 5) i;
SELECT je_row('failed_' || i, 'je_batch', 'failed_retryable', '9 days', '8 days')
  FROM generate_series(1, 5) i;
SELECT je_row('stuck_' || i, 'je_batch', 'processing', '1 hour', '1 hour')
  FROM generate_series(1, 5) i;
-- the same in a second workflow, at different ages
SELECT je_row('done_' || i, 'je_other', 'completed', '40 days', ((31 + i) || ' days')::interval)
  FROM generate_series(1, 3) i;
SELECT je_row('failed_' || i, 'je_other', 'failed_retryable', '20 days', ((8 + i) || ' days')::interval)
  FROM generate_series(1, 3) i;
COMMIT;
-- survivors: young enough
SELECT je_row('young_done', 'je_batch', 'completed', '40 days', '29 days');
SELECT je_row('young_failed', 'je_batch', 'failed_retryable', '9 days', '6 days');
SELECT je_row('busy', 'je_batch', 'processing', '1 hour', '5 minutes');
SELECT idem_gate.stats_reset();
SET client_min_messages = error;
SELECT * FROM idem_gate.janitor_run();
RESET client_min_messages;
SELECT workflow, key, state, alerted_token IS NOT DISTINCT FROM token AS alerted
  FROM idem_gate.claims ORDER BY 1, 2;
SELECT deleted_completed, deleted_failed, alerts, escalations, janitor_passes
  FROM idem_gate.stats;
-- a second pass finds nothing
SELECT * FROM idem_gate.janitor_run();
-- with batch_size = 1 each batch resumes after its one claim, wherever
-- the claims' times lie (before 2000-01-01, PostgreSQL's zero, too): one
-- pass alerts all three
TRUNCATE idem_gate.claims;
SET idem_gate.batch_size = 1;
SELECT je_row('old_' || i, 'je_one', 'processing', '30 years', now() - make_timestamptz(1997 + i, 6, 1, 0, 0, 0, 'UTC'))
  FROM generate_series(1, 3) i;
SET client_min_messages = error;
SELECT alerts FROM idem_gate.janitor_run();
RESET client_min_messages;
SELECT count(*) FILTER (WHERE alerted_token = token) AS alerted FROM idem_gate.claims WHERE workflow = 'je_one';
RESET idem_gate.batch_size;

------------------------------------------------------------------------
-- stuck_action = review: the escalation is counted, in the pass's result
-- and in the stats view
------------------------------------------------------------------------
TRUNCATE idem_gate.claims;
SELECT je_row('stuck', 'je_review', 'processing', '1 hour', '1 hour');
SELECT je_row('busy', 'je_review', 'processing', '1 hour', '1 minute');
SELECT idem_gate.stats_reset();
SET idem_gate.stuck_action = 'review';
SET client_min_messages = error;
SELECT * FROM idem_gate.janitor_run();
RESET client_min_messages;
RESET idem_gate.stuck_action;
SELECT alerts, escalations, janitor_passes FROM idem_gate.stats;
SELECT key, state FROM idem_gate.claims ORDER BY key;
-- with the default action, an alert is not an escalation
SELECT je_row('stuck_2', 'je_review', 'processing', '1 hour', '1 hour');
SET client_min_messages = error;
SELECT * FROM idem_gate.janitor_run();
RESET client_min_messages;
SELECT alerts, escalations, janitor_passes FROM idem_gate.stats;

------------------------------------------------------------------------
-- the pass's WARNING names the first three stuck claims, oldest first, and
-- counts the rest.  The ages in it are measured by the clock, so the
-- WARNING is read back from the server log (pg_regress's instance keeps
-- it in ../log/postmaster.log) with the ages blanked out; only what reads
-- as an interval (pg_regress's IntervalStyle is postgres_verbose) is
-- blanked, so a timestamp in their place shows.
------------------------------------------------------------------------
-- je_warning(key): the WARNING and DETAIL lines of the pass that named
-- key, from the log of pg_regress's temporary instance (data/ sits next to
-- log/, or one level below the output directory that holds log/)
CREATE FUNCTION je_warning(k text) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
	f text;
BEGIN
	FOREACH f IN ARRAY ARRAY['../log/postmaster.log', '../../log/postmaster.log'] LOOP
		IF (pg_stat_file(f, true)).size IS NOT NULL THEN
			RETURN QUERY
			SELECT regexp_replace(m[1] || ' / ' || m[2], 'stuck for @(?: [0-9.]+ (?:days?|hours?|mins?|secs?))+(;|\.$)', 'stuck for AGE\1', 'g')
			  FROM regexp_matches(pg_read_file(f),
					'WARNING:  (idem_gate: [^\n]*)\n[^\n]*DETAIL:  (workflow "je_warn" key "' || k || '"[^\n]*)', 'g') m;
			RETURN;
		END IF;
	END LOOP;
	RAISE EXCEPTION 'no server log found next to the data directory';
END $$;
TRUNCATE idem_gate.claims;
BEGIN;
SELECT je_row('w' || i, 'je_warn', 'processing', '1 day', ((60 + i) || ' minutes')::interval)
  FROM generate_series(1, 5) i;
UPDATE idem_gate.claims SET token = 900 + length(key) * 10 + substr(key, 2)::int
 WHERE workflow = 'je_warn';
SET client_min_messages = error;
SELECT alerts FROM idem_gate.janitor_run();
RESET client_min_messages;
COMMIT;
SELECT je_warning('w5');
-- one stuck claim: no "more"
BEGIN;
SELECT je_row('alone', 'je_warn', 'processing', '1 day', '2 hours');
UPDATE idem_gate.claims SET token = 7 WHERE workflow = 'je_warn' AND key = 'alone';
SET client_min_messages = error;
SELECT alerts FROM idem_gate.janitor_run();
RESET client_min_messages;
COMMIT;
SELECT je_warning('alone');
DROP FUNCTION je_warning(text);

------------------------------------------------------------------------
-- the audit trail is pruned in batches too: with batch_size = 2, five rows
-- older than idem_gate.audit_retention all go in one pass
------------------------------------------------------------------------
INSERT INTO idem_gate.audit (at, session_role, acting_role, action, workflow, key)
SELECT now() - ((400 + i) || ' days')::interval, 'je', 'je', 'resolve', 'je_audit', 'old_' || i
  FROM generate_series(1, 5) i;
INSERT INTO idem_gate.audit (at, session_role, acting_role, action, workflow, key)
VALUES (now() - interval '399 days', 'je', 'je', 'resolve', 'je_audit', 'young');
SET idem_gate.batch_size = 2;
SET client_min_messages = error;
SELECT deleted_completed, deleted_failed FROM idem_gate.janitor_run();
RESET client_min_messages;
RESET idem_gate.batch_size;
SELECT key FROM idem_gate.audit WHERE workflow = 'je_audit' ORDER BY key;

------------------------------------------------------------------------
-- receipts are cleared from the workflow's watermark on, in batches: a
-- receipt changed exactly at the watermark, with the smallest token (1),
-- is cleared; one below it is not scanned again, even when the pass needs
-- several batches (batch_size = 2)
------------------------------------------------------------------------
BEGIN;		-- one transaction: the background janitor sees none of it
TRUNCATE idem_gate.claims;
DELETE FROM idem_gate.janitor_watermarks;
INSERT INTO idem_gate.janitor_watermarks VALUES ('je_wm', now() - interval '10 days');
INSERT INTO idem_gate.claims (workflow, key, state, attempt, token, result,
	created_at, claimed_at, updated_at, completed_at)
SELECT 'je_wm', k, 'completed', 1, t, '{"r": 1}', now() - ago, now() - ago,
	now() - ago, now() - ago
  FROM (VALUES ('at_mark', 1, interval '10 days'), ('below', 2, interval '11 days'),
	('r1', 3, interval '5 days'), ('r2', 4, interval '5 days'),
	('r3', 5, interval '4 days')) v(k, t, ago);
SET LOCAL idem_gate.receipt_retention = '1d';
SET LOCAL idem_gate.batch_size = 2;
SELECT deleted FROM idem_gate.janitor_run();
SELECT key, result IS NULL AS cleared FROM idem_gate.claims ORDER BY key;
SELECT receipts_cleared_until BETWEEN now() - interval '1 day'
	AND clock_timestamp() - interval '1 day' AS watermark_moved
  FROM idem_gate.janitor_watermarks WHERE workflow = 'je_wm';
ROLLBACK;

DROP FUNCTION je_row(text, text, text, interval, interval);
TRUNCATE idem_gate.claims;

------------------------------------------------------------------------
-- janitor_run() in the caller's transaction: each step's subtransaction
-- ends as a function call's would.  The pass's own lock_timeout (at most
-- 100 ms while it waits for a row lock) is gone afterwards; a session
-- setting that a DBA's trigger made during the pass stays, as it would
-- after any statement that ran the trigger
------------------------------------------------------------------------
BEGIN;
SET LOCAL lock_timeout = 0;
SET LOCAL idem_gate.retention = '1d';
CREATE FUNCTION je_note() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM set_config('je.trigger_saw', current_setting('lock_timeout'), false);
	RETURN OLD;
END $$;
CREATE TRIGGER je_note AFTER DELETE ON idem_gate.claims
	FOR EACH ROW EXECUTE FUNCTION je_note();
INSERT INTO idem_gate.claims (workflow, key, state, attempt, token, result,
	created_at, claimed_at, updated_at, completed_at)
VALUES ('je_guc', 'old', 'completed', 1, 1, '{"r": 1}', now() - interval '10 days',
	now() - interval '10 days', now() - interval '10 days', now() - interval '10 days');
SELECT deleted_completed FROM idem_gate.janitor_run();
SELECT current_setting('je.trigger_saw', true) AS lock_timeout_during_the_pass,
	   current_setting('lock_timeout') AS lock_timeout_after_it;
ROLLBACK;
