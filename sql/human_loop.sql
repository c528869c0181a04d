--
-- The human loop (1.2): the evidence a reviewer needs (the payload), the
-- inbox, actions that name the person, the history.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idem_gate;
RESET client_min_messages;

CREATE FUNCTION hl_try(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	st text; msg text;
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
	RETURN st || ': ' || msg;
END $$;

-- age a claim by an interval, as if it had been written that long ago
CREATE FUNCTION hl_age(k text, w text, by interval) RETURNS void LANGUAGE sql AS $$
	UPDATE idem_gate.claims SET created_at = created_at - by, claimed_at = claimed_at - by,
		updated_at = updated_at - by, completed_at = completed_at - by
	 WHERE workflow = w AND key = k $$;

-- this file's claims only
DELETE FROM idem_gate.claims;
DELETE FROM idem_gate.policies;

------------------------------------------------------------------------
-- the payload: kept while open, cleared at completion
------------------------------------------------------------------------
SELECT outcome FROM idem_claim_ex('p1', 'hl', NULL, NULL, 'run-1', '{"order": 7, "email": "a@example.com"}');
SELECT payload, payload_dropped_bytes FROM idem_gate.claims WHERE key = 'p1';
-- a duplicate writes nothing, its payload included
SELECT outcome FROM idem_claim_ex('p1', 'hl', NULL, NULL, 'run-2', '{"order": 8}');
SELECT payload FROM idem_gate.claims WHERE key = 'p1';
SELECT idem_complete('p1', 'hl', (SELECT token FROM idem_gate.claims WHERE key = 'p1'), '{"charge": "ch_1"}');
SELECT state, payload, result FROM idem_gate.claims WHERE key = 'p1';
-- kept through a failure, for the reviewer, and through retry and takeover
SELECT outcome FROM idem_claim_ex('p2', 'hl', NULL, NULL, 'run-1', '[1, 2, 3]');
SELECT idem_fail('p2', 'hl', (SELECT token FROM idem_gate.claims WHERE key = 'p2'), 'timeout', false);
SELECT state, payload FROM idem_gate.claims WHERE key = 'p2';
SELECT outcome FROM idem_claim_ex('p3', 'hl', NULL, NULL, 'run-1', '{"v": 1}');
SELECT idem_fail('p3', 'hl', (SELECT token FROM idem_gate.claims WHERE key = 'p3'), 'refused', true);
SELECT outcome, attempt FROM idem_claim_ex('p3', 'hl', NULL, NULL, 'run-2');
SELECT payload FROM idem_gate.claims WHERE key = 'p3';
SELECT idem_fail('p3', 'hl', (SELECT token FROM idem_gate.claims WHERE key = 'p3'), 'refused', true);
SELECT outcome, attempt FROM idem_claim_ex('p3', 'hl', NULL, NULL, 'run-3', '{"v": 2}');
SELECT payload FROM idem_gate.claims WHERE key = 'p3';
SELECT hl_age('p3', 'hl', '1 hour');
SELECT outcome FROM idem_claim_ex('p3', 'hl', '10 minutes', NULL, 'run-4', '{"v": 3}');
SELECT payload FROM idem_gate.claims WHERE key = 'p3';
-- an operator's completion clears it, a retry keeps it
SELECT outcome FROM idem_claim_ex('p4', 'hl', NULL, NULL, 'run-1', '{"v": 4}');
SELECT idem_resolve('p4', 'hl', 'retry', NULL, 'the charge did not happen', 'alice');
SELECT state, payload FROM idem_gate.claims WHERE key = 'p4';
SELECT outcome FROM idem_claim_ex('p4', 'hl', NULL, NULL, 'run-2');
SELECT idem_resolve('p4', 'hl', 'completed', '{"charge": "ch_4"}', 'found it', 'bob');
SELECT state, payload FROM idem_gate.claims WHERE key = 'p4';
-- too large to keep: the claim proceeds, and the row says so
SET idem_gate.max_payload_bytes = 64;
SELECT outcome FROM idem_claim_ex('p5', 'hl', NULL, NULL, 'run-1', jsonb_build_object('blob', repeat('x', 100)));
SELECT payload IS NULL AS not_kept, payload_dropped_bytes > 64 AS size_said FROM idem_gate.claims WHERE key = 'p5';
SELECT outcome FROM idem_claim_ex('p6', 'hl', NULL, NULL, 'run-1', '{"small": 1}');
SELECT payload, payload_dropped_bytes FROM idem_gate.claims WHERE key = 'p6';
SET idem_gate.max_payload_bytes = 0;
SELECT outcome FROM idem_claim_ex('p7', 'hl', NULL, NULL, 'run-1', '{}');
SELECT payload IS NULL AS none_kept, payload_dropped_bytes FROM idem_gate.claims WHERE key = 'p7';
RESET idem_gate.max_payload_bytes;
-- the batch: one payload per key, NULL where there is none
SELECT ord, key, outcome FROM idem_claim_many(ARRAY['b1', 'b2', 'b1'], 'hl', NULL, NULL, 'run-b',
	ARRAY['{"n": 1}', NULL, '{"n": 3}']::jsonb[]);
SELECT key, payload FROM idem_gate.claims WHERE key IN ('b1', 'b2') ORDER BY key;
-- a 1.1 call keeps working and keeps no payload
SELECT outcome FROM idem_claim_ex('p8', 'hl', NULL, NULL, 'run-1');
SELECT payload, payload_dropped_bytes FROM idem_gate.claims WHERE key = 'p8';
-- the receipt retention clears payloads of open claims too
INSERT INTO idem_gate.policies (workflow, retention, receipt_retention) VALUES ('hl_rr', '1 day', '1 hour');
SELECT outcome FROM idem_claim_ex('r1', 'hl_rr', NULL, NULL, 'run-1', '{"pii": "x"}');
SELECT outcome FROM idem_claim_ex('r2', 'hl_rr', NULL, NULL, 'run-1', '{"pii": "y"}');
SELECT idem_fail('r2', 'hl_rr', (SELECT token FROM idem_gate.claims WHERE key = 'r2'), 'e', false);
SELECT outcome FROM idem_claim_ex('r3', 'hl_rr', NULL, NULL, 'run-1', '{"pii": "z"}');
SELECT idem_fail('r3', 'hl_rr', (SELECT token FROM idem_gate.claims WHERE key = 'r3'), 'e', true);
SELECT outcome FROM idem_claim_ex('r4', 'hl_rr', NULL, NULL, 'run-1', '{"pii": "fresh"}');
SELECT hl_age(k, 'hl_rr', '2 hours') FROM unnest(ARRAY['r1', 'r2', 'r3']) k;
SET client_min_messages = error;	-- r1 is also stuck: the alert's WARNING names its age
SELECT deleted FROM idem_gate.janitor_run();
RESET client_min_messages;
SELECT key, state, payload FROM idem_gate.claims WHERE workflow = 'hl_rr' ORDER BY key;

------------------------------------------------------------------------
-- bad input: a clear error that names the argument, nothing changed
------------------------------------------------------------------------
SELECT hl_try($$SELECT * FROM idem_claim_ex('bad1', 'hl', NULL, NULL, NULL, '"a string"')$$);
SELECT hl_try($$SELECT * FROM idem_claim_ex('bad1', 'hl', NULL, NULL, NULL, '42')$$);
SELECT hl_try($$SELECT * FROM idem_claim_ex('bad1', 'hl', NULL, NULL, NULL, 'null')$$);
SELECT hl_try($$SELECT * FROM idem_claim_many(ARRAY['bad2', 'bad3'], 'hl', NULL, NULL, NULL, ARRAY['{}']::jsonb[])$$);
SELECT hl_try($$SELECT * FROM idem_claim_many(ARRAY['bad2'], 'hl', NULL, NULL, NULL, ARRAY['true']::jsonb[])$$);
SELECT hl_try($$SELECT * FROM idem_claim_many(ARRAY['bad2'], 'hl', NULL, NULL, NULL, ARRAY[['{}']]::jsonb[])$$);
SELECT count(*) AS nothing_written FROM idem_gate.claims WHERE key LIKE 'bad%';
-- (the range as PostgreSQL words it: with units from 17 on)
SELECT regexp_replace(hl_try($$SET idem_gate.max_payload_bytes = -1$$), ' \(0 .*\)$', '') AS refused;
SELECT hl_try($$SET idem_gate.max_payload_bytes = '2GB'$$);
SELECT hl_try($$SET idem_gate.max_attempts = 0$$);
SELECT hl_try($$SET idem_gate.max_attempts = 'many'$$);
-- (the managed edition takes any value at SET and refuses a bad one at its
-- first use: both editions go on from the defaults)
RESET idem_gate.max_payload_bytes;
RESET idem_gate.max_attempts;
SELECT hl_try($$SELECT * FROM idem_gate.history(NULL, 'hl')$$);
SELECT hl_try($$SELECT * FROM idem_gate.history('', 'hl')$$);
SELECT hl_try($$SELECT * FROM idem_gate.history('k', NULL)$$);
SELECT count(*) AS unknown_key_no_rows FROM idem_gate.history('never-claimed', 'hl');

------------------------------------------------------------------------
-- the inbox: every reason, its boundary, its columns, oldest first
------------------------------------------------------------------------
DELETE FROM idem_gate.claims;
DELETE FROM idem_gate.policies;
-- needs_review, by a failure and by the janitor's escalation
SELECT outcome FROM idem_claim_ex('i_review', 'shop', NULL, 'fp-r', 'run-r', '{"order": 1}');
SELECT idem_fail('i_review', 'shop', (SELECT token FROM idem_gate.claims WHERE key = 'i_review'), 'gateway timed out', false);
SELECT hl_age('i_review', 'shop', '10 hours');
-- stuck: processing longer than stuck_after (the setting, 2 hours in this
-- section: its margins of hours hold however slowly the file runs; under
-- debug_discard_caches it takes a quarter of an hour)
SET idem_gate.stuck_after = '2h';
SELECT outcome FROM idem_claim_ex('i_stuck', 'shop', NULL, NULL, 'run-s', '{"order": 2}');
SELECT hl_age('i_stuck', 'shop', '4 hours');
SELECT outcome FROM idem_claim_ex('i_fresh', 'shop', NULL, NULL, 'run-f', '{"order": 3}');
SELECT hl_age('i_fresh', 'shop', '1 minute');
-- a policy's stuck_after applies to its workflow
INSERT INTO idem_gate.policies (workflow, stuck_after) VALUES ('fast', '1 minute');
SELECT outcome FROM idem_claim_ex('i_fast', 'fast', NULL, NULL, 'run-x', '{"order": 4}');
SELECT hl_age('i_fast', 'fast', '2 minutes');
-- failing: failed_retryable at max_attempts (5) or more, not before
CREATE FUNCTION hl_fail_times(k text, w text, n int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1..n LOOP
		PERFORM idem_claim_ex(k, w, NULL, NULL, 'run-' || i, '{"order": 5}');
		PERFORM idem_fail(k, w, (SELECT token FROM idem_gate.claims WHERE key = k AND workflow = w),
			'connection refused', true);
	END LOOP;
END $$;
SELECT hl_fail_times('i_failing', 'shop', 5);
SELECT hl_fail_times('i_four', 'shop', 4);
SELECT hl_age('i_failing', 'shop', '6 hours');
-- not in the inbox: completed, fresh processing, failed fewer times
SELECT idem_claim('i_done', 'shop');
SELECT idem_complete('i_done', 'shop');
SELECT workflow, key, reason, state, attempt, execution_id, last_error, payload,
	payload_dropped_bytes, fingerprint, since = updated_at AS since_is_last_change,
	claimed_at <= updated_at AS times_ordered
  FROM idem_gate.inbox;
SELECT count(*) FILTER (WHERE since < lag) AS out_of_order
  FROM (SELECT since, lag(since) OVER () FROM idem_gate.inbox) s;
SET idem_gate.max_attempts = 4;
SELECT key, reason FROM idem_gate.inbox WHERE reason = 'failing' ORDER BY key;
RESET idem_gate.max_attempts;
SET idem_gate.stuck_after = '6h';
SELECT key FROM idem_gate.inbox WHERE reason = 'stuck' ORDER BY key;
SET idem_gate.stuck_after = '2h';
-- stuck_after is a duration of fixed length, as the janitor counts it: a
-- year is 365.25 days, so a claim 365 days and 2 hours old is not stuck yet
INSERT INTO idem_gate.policies (workflow, stuck_after) VALUES ('yearly', '1 year');
SELECT outcome FROM idem_claim_ex('i_year', 'yearly', NULL, NULL, 'run-y');
SELECT hl_age('i_year', 'yearly', '365 days 2 hours');
SELECT count(*) AS year_not_stuck FROM idem_gate.inbox WHERE workflow = 'yearly';
SELECT hl_age('i_year', 'yearly', '7 hours');
SELECT key, reason FROM idem_gate.inbox WHERE workflow = 'yearly';
SELECT idem_release('i_year', 'yearly', 'test');
DELETE FROM idem_gate.policies WHERE workflow = 'yearly';
-- resolved, released: out of the inbox
SELECT idem_resolve('i_review', 'shop', 'completed', '{"charge": "ch_r"}', 'paid, seen at the gateway', 'carol');
SELECT idem_release('i_stuck', 'shop', 'sender gave up', 'dave');
SELECT key, reason FROM idem_gate.inbox ORDER BY key;

------------------------------------------------------------------------
-- actions name the person; the history shows them, released claims too
------------------------------------------------------------------------
SELECT action, actor, state_before, state_after, reason, session_role = current_user AS session_role,
	acting_role = current_user AS acting_role
  FROM idem_gate.history('i_review', 'shop');
SELECT action, actor, state_before, state_after, reason FROM idem_gate.history('i_stuck', 'shop');
SELECT count(*) AS no_claim_left FROM idem_gate.claims WHERE key = 'i_stuck';
-- the 1.1 calls record no actor
SELECT idem_claim('i_old', 'shop');
SELECT idem_resolve('i_old', 'shop', 'retry', NULL, 'old call');
SELECT idem_release('i_old', 'shop', 'old call');
SELECT action, actor, reason FROM idem_gate.history('i_old', 'shop');
-- an action on a claim another operator resolved already changes nothing
SELECT hl_try($$SELECT idem_resolve('i_review', 'shop', 'retry', NULL, 'late', 'erin')$$);
SELECT count(*) AS one_resolve FROM idem_gate.history('i_review', 'shop');
-- the escalation by the janitor is in the history and the inbox
SELECT outcome FROM idem_claim_ex('i_esc', 'shop', NULL, NULL, 'run-e', '{"order": 6}');
SELECT hl_age('i_esc', 'shop', '3 hours');
SET idem_gate.stuck_action = 'review';
SET client_min_messages = error;	-- the WARNING names the claims' ages
SELECT escalated FROM idem_gate.janitor_run();
RESET client_min_messages;
RESET idem_gate.stuck_action;
RESET idem_gate.stuck_after;
SELECT action, actor, state_before, state_after FROM idem_gate.history('i_esc', 'shop');
SELECT key, reason, last_error LIKE 'stuck in processing for %' AS why FROM idem_gate.inbox WHERE key = 'i_esc';

------------------------------------------------------------------------
-- per-workflow access: the inbox and the history of granted workflows only
------------------------------------------------------------------------
CREATE ROLE regress_hl_ops;
GRANT USAGE ON SCHEMA idem_gate TO regress_hl_ops;
GRANT SELECT ON idem_gate.inbox TO regress_hl_ops;
GRANT EXECUTE ON FUNCTION idem_gate.history(text, text),
	idem_resolve(text, text, text, jsonb, text, text), idem_release(text, text, text, text)
	TO regress_hl_ops;
SELECT idem_gate.grant_workflow('regress_hl_ops', 'fast');
SET idem_gate.workflow_acl = on;
SET ROLE regress_hl_ops;
SELECT workflow, key, reason FROM idem_gate.inbox ORDER BY key;
SELECT hl_try($$SELECT * FROM idem_gate.history('i_esc', 'shop')$$);
SELECT hl_try($$SELECT idem_release('i_esc', 'shop', 'not mine', 'mallory')$$);
SELECT idem_release('i_fast', 'fast', 'mine', 'frank');
SELECT action, actor FROM idem_gate.history('i_fast', 'fast');
SELECT hl_try($$SELECT count(*) FROM idem_gate.claims$$);
RESET ROLE;
RESET idem_gate.workflow_acl;
DROP OWNED BY regress_hl_ops;
DELETE FROM idem_gate.workflow_acl;
DROP ROLE regress_hl_ops;

DROP FUNCTION hl_try(text), hl_age(text, text, interval), hl_fail_times(text, text, int);
DELETE FROM idem_gate.claims;
DELETE FROM idem_gate.policies;
