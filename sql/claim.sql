--
-- The claim state machine: every row of the contract's tables, every error
-- with its SQLSTATE.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idem_gate;
RESET client_min_messages;

-- try(sql): run a statement, show "ok" or its SQLSTATE, message, detail and hint
CREATE FUNCTION try(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	st text; msg text; det text; hnt text;
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
		det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
	RETURN st || ': ' || msg
		-- times (who decided a claim, and when) vary from run to run
		|| coalesce(E'\nDETAIL: ' || regexp_replace(nullif(det, ''),
			'\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?[+-]\d\d', 'TIME', 'g'), '')
		|| coalesce(E'\nHINT: ' || nullif(hnt, ''), '');
END $$;

-- age(key, wf, by): move a claim's clock back, as if time had passed
CREATE FUNCTION age_claim(k text, w text, by interval) RETURNS void
LANGUAGE sql AS $$
	UPDATE idem_gate.claims
	   SET created_at = created_at - by, claimed_at = claimed_at - by,
	       updated_at = updated_at - by,
	       completed_at = completed_at - by
	 WHERE workflow = w AND key = k $$;

-- claim ex without timestamps, for stable output
CREATE FUNCTION claim(k text, w text, stale interval DEFAULT NULL,
	fp text DEFAULT NULL, ex text DEFAULT NULL,
	OUT outcome idem_gate.outcome, OUT has_token boolean, OUT attempt int,
	OUT state idem_gate.state, OUT result jsonb)
LANGUAGE sql AS $$
	SELECT outcome, token IS NOT NULL, attempt, state, result
	  FROM idem_claim_ex(k, w, stale, fp, ex) $$;

------------------------------------------------------------------------
-- none -> processing, attempt 1, new token: new
------------------------------------------------------------------------
SELECT idem_claim('evt_1', 'stripe_charge', '10 minutes');
SELECT workflow, key, state, attempt, token > 0 AS has_token, result,
       completed_at IS NULL AS not_completed, created_at = claimed_at AS same_ts
  FROM idem_status('evt_1', 'stripe_charge');

-- processing, fresh: in_flight, unchanged, no token handed out
SELECT * FROM claim('evt_1', 'stripe_charge', '10 minutes');
-- processing, NULL stale_interval: in_flight (fail closed)
SELECT idem_claim('evt_1', 'stripe_charge');
SELECT attempt FROM idem_status('evt_1', 'stripe_charge');

-- complete with a receipt
SELECT token AS t1 FROM idem_status('evt_1', 'stripe_charge') \gset
SELECT idem_complete('evt_1', 'stripe_charge', :t1, '{"charge_id": "ch_123"}');
-- completed: completed, with the receipt; unchanged
SELECT * FROM claim('evt_1', 'stripe_charge', '10 minutes');
SELECT idem_claim('evt_1', 'stripe_charge');
-- completing again is harmless, with the token or without one
SELECT idem_complete('evt_1', 'stripe_charge', :t1, '{"charge_id": "other"}');
SELECT idem_complete('evt_1', 'stripe_charge');
SELECT state, result, token = :t1 AS same_token FROM idem_status('evt_1', 'stripe_charge');

-- the same key in another workflow is another gate
SELECT idem_claim('evt_1', 'crm_contact');
SELECT workflow, state FROM idem_gate.claims WHERE key = 'evt_1' ORDER BY workflow;

------------------------------------------------------------------------
-- re-entry: the owning run (same execution_id) gets new with its token
------------------------------------------------------------------------
SELECT token AS t2 FROM idem_claim_ex('evt_2', 'wf', '10 minutes', NULL, 'exec-41') \gset
SELECT outcome, token = :t2 AS same_token, attempt
  FROM idem_claim_ex('evt_2', 'wf', '10 minutes', NULL, 'exec-41');
-- another run, or a run without an id, is in flight
SELECT * FROM claim('evt_2', 'wf', '10 minutes', NULL, 'exec-42');
SELECT * FROM claim('evt_2', 'wf', '10 minutes');

------------------------------------------------------------------------
-- stale takeover, and the old owner fenced off
------------------------------------------------------------------------
SELECT age_claim('evt_2', 'wf', '1 hour');
-- a NULL stale_interval never takes over
SELECT * FROM claim('evt_2', 'wf', NULL, NULL, 'exec-42');
-- an interval shorter than the age does
SELECT token AS t3, outcome FROM idem_claim_ex('evt_2', 'wf', '10 minutes', NULL, 'exec-42') \gset
SELECT :'outcome' AS outcome, :t3 > :t2 AS token_grew;
SELECT state, attempt, execution_id FROM idem_status('evt_2', 'wf');
-- the old owner: its heartbeat says it lost, its outcome is refused
SELECT idem_heartbeat('evt_2', 'wf', :t2);
SELECT regexp_replace(try(format('SELECT idem_complete(%L, %L, %s)', 'evt_2', 'wf', :t2)), 'token \d+', 'token N', 'g');
SELECT regexp_replace(try(format('SELECT idem_fail(%L, %L, %s)', 'evt_2', 'wf', :t2)), 'token \d+', 'token N', 'g');
-- the new owner heartbeats and completes
SELECT idem_heartbeat('evt_2', 'wf', :t3);
SELECT idem_complete('evt_2', 'wf', :t3, '{"n": 2}');
-- once completed, a stale token is still refused, and a heartbeat is false
SELECT regexp_replace(try(format('SELECT idem_complete(%L, %L, %s)', 'evt_2', 'wf', :t2)), 'token \d+', 'token N', 'g');
SELECT idem_heartbeat('evt_2', 'wf', :t3);

-- a claim younger than the interval is not taken over; an older one is
SELECT idem_claim('evt_3', 'wf', '1 hour');
SELECT idem_claim('evt_3', 'wf', '1 hour');
SELECT idem_claim('evt_3', 'wf', '1 microsecond');

------------------------------------------------------------------------
-- failures
------------------------------------------------------------------------
-- retryable: failed_retryable, then the next claim is new with attempt 2
SELECT token AS t4 FROM idem_claim_ex('evt_4', 'wf') \gset
SELECT idem_fail('evt_4', 'wf', :t4, 'connection refused', true);
SELECT state, last_error FROM idem_status('evt_4', 'wf');
SELECT token AS t5, outcome, attempt FROM idem_claim_ex('evt_4', 'wf', NULL, NULL, 'exec-2') \gset
SELECT :'outcome' AS outcome, :attempt AS attempt, :t5 > :t4 AS token_grew;
SELECT state, execution_id FROM idem_status('evt_4', 'wf');
-- the first attempt's token no longer owns it
SELECT regexp_replace(try(format('SELECT idem_complete(%L, %L, %s)', 'evt_4', 'wf', :t4)), 'token \d+', 'token N', 'g');

-- not retryable (the default): needs_review, and claims say so
SELECT idem_fail('evt_5', 'wf') FROM (SELECT idem_claim('evt_5', 'wf')) c;
SELECT * FROM claim('evt_5', 'wf', '1 second');
SELECT age_claim('evt_5', 'wf', '1 day');
SELECT idem_claim('evt_5', 'wf', '1 second');
SELECT state, attempt, last_error FROM idem_status('evt_5', 'wf');

------------------------------------------------------------------------
-- resolve
------------------------------------------------------------------------
-- needs_review -> completed, with a receipt
SELECT idem_resolve('evt_5', 'wf', 'completed', '{"checked_by": "ops"}');
SELECT * FROM claim('evt_5', 'wf');
-- needs_review -> failed_retryable, then claimable again
SELECT idem_fail('evt_6', 'wf', NULL, 'timeout after charge') FROM (SELECT idem_claim('evt_6', 'wf')) c;
SELECT idem_resolve('evt_6', 'wf', 'retry');
SELECT * FROM claim('evt_6', 'wf');
-- processing -> completed and processing -> failed_retryable
SELECT idem_resolve('evt_6', 'wf', 'completed');
SELECT state, result, completed_at IS NOT NULL AS has_completed_at FROM idem_status('evt_6', 'wf');
SELECT idem_claim('evt_7', 'wf');
SELECT idem_resolve('evt_7', 'wf', 'retry');
SELECT state FROM idem_status('evt_7', 'wf');

------------------------------------------------------------------------
-- fingerprints
------------------------------------------------------------------------
SELECT * FROM claim('evt_8', 'wf', NULL, 'sha-aaa');
SELECT * FROM claim('evt_8', 'wf', NULL, 'sha-aaa');
SELECT * FROM claim('evt_8', 'wf', NULL, NULL);
SELECT try($$SELECT * FROM idem_claim_ex('evt_8', 'wf', NULL, 'sha-bbb')$$);
SELECT idem_complete('evt_8', 'wf', (SELECT token FROM idem_status('evt_8', 'wf')));
-- still an error once completed: never a silent "completed"
SELECT try($$SELECT * FROM idem_claim_ex('evt_8', 'wf', NULL, 'sha-bbb')$$);
-- a claim without a fingerprint records the first one given later
SELECT idem_claim('evt_9', 'wf');
SELECT idem_fail('evt_9', 'wf', NULL, NULL, true);
SELECT * FROM claim('evt_9', 'wf', NULL, 'sha-ccc');
SELECT fingerprint FROM idem_status('evt_9', 'wf');

------------------------------------------------------------------------
-- transitions from the wrong state, and unknown keys
------------------------------------------------------------------------
SELECT try($$SELECT idem_complete('never', 'wf')$$);
SELECT try($$SELECT idem_fail('never', 'wf')$$);
SELECT try($$SELECT idem_resolve('never', 'wf', 'retry')$$);
SELECT try($$SELECT idem_heartbeat('never', 'wf', 1)$$);
SELECT idem_fail('evt_10', 'wf') FROM (SELECT idem_claim('evt_10', 'wf')) c;
SELECT try($$SELECT idem_complete('evt_10', 'wf')$$);
SELECT try($$SELECT idem_fail('evt_10', 'wf', NULL, NULL, true)$$);
SELECT try($$SELECT idem_fail('evt_1', 'stripe_charge')$$);
SELECT try($$SELECT idem_resolve('evt_1', 'stripe_charge', 'retry')$$);
SELECT try($$SELECT idem_complete('evt_7', 'wf')$$);
SELECT try($$SELECT idem_resolve('evt_7', 'wf', 'completed')$$);
SELECT try($$SELECT idem_fail('evt_7', 'wf')$$);

------------------------------------------------------------------------
-- bad input: a clear error, and nothing changes
------------------------------------------------------------------------
SELECT count(*) AS rows_before, max(token) AS max_token_before FROM idem_gate.claims \gset
SELECT try($$SELECT idem_claim(NULL, 'wf')$$);
SELECT try($$SELECT idem_claim('k', NULL)$$);
SELECT try($$SELECT idem_claim('', 'wf')$$);
SELECT try($$SELECT idem_claim('k', '')$$);
SELECT try($$SELECT * FROM idem_claim_ex(NULL, 'wf')$$);
SELECT try($$SELECT * FROM idem_claim_ex('k', 'wf', '0 seconds')$$);
SELECT try($$SELECT idem_claim('k', 'wf', '-5 minutes')$$);
SELECT try($$SELECT idem_claim('k', 'wf', '1 day -25 hours')$$);
SELECT try($$SELECT idem_heartbeat('evt_3', 'wf', NULL)$$);
SELECT try($$SELECT idem_heartbeat(NULL, 'wf', 1)$$);
SELECT try($$SELECT idem_complete(NULL, 'wf')$$);
SELECT try($$SELECT idem_complete('evt_3', NULL)$$);
SELECT try($$SELECT idem_fail('', 'wf')$$);
SELECT try($$SELECT idem_resolve('evt_3', 'wf', NULL)$$);
SELECT try($$SELECT idem_resolve('evt_3', 'wf', 'done')$$);
SELECT try($$SELECT idem_resolve('evt_3', 'wf', 'retry', '{"x": 1}')$$);
SELECT try($$SELECT * FROM idem_status(NULL, 'wf')$$);
SELECT try($$SELECT * FROM idem_status('k', '')$$);
-- 255 characters are accepted, 256 refused, for keys and workflows alike
SELECT idem_claim(repeat('k', 255), 'wf');
SELECT idem_claim('k255', repeat('w', 255));
SELECT try(format('SELECT idem_claim(%L, %L)', repeat('k', 256), 'wf'));
SELECT try(format('SELECT idem_claim(%L, %L)', 'k256', repeat('w', 256)));
-- characters, not bytes
SELECT idem_claim(repeat('é', 255), 'wf');
SELECT try(format('SELECT idem_claim(%L, %L)', repeat('é', 256), 'wf'));
-- the limit is a setting
SET idem_gate.max_key_length = 8;
SELECT try($$SELECT idem_claim('123456789', 'wf')$$);
SELECT idem_claim('12345678', 'wf');
RESET idem_gate.max_key_length;
SELECT count(*) - :rows_before AS rows_added FROM idem_gate.claims;

------------------------------------------------------------------------
-- a claim in a rolled-back transaction leaves nothing behind
------------------------------------------------------------------------
BEGIN;
SELECT idem_claim('evt_rollback', 'wf');
SELECT count(*) FROM idem_gate.claims WHERE key = 'evt_rollback';
ROLLBACK;
SELECT count(*) FROM idem_gate.claims WHERE key = 'evt_rollback';
SELECT * FROM idem_status('evt_rollback', 'wf');
SELECT idem_claim('evt_rollback', 'wf');
-- and a completion rolled back leaves the claim processing
BEGIN;
SELECT idem_complete('evt_rollback', 'wf', NULL, '{"lost": true}');
ROLLBACK;
SELECT state, result FROM idem_status('evt_rollback', 'wf');

-- in a read-only transaction, claims get PostgreSQL's read-only error and
-- idem_status still works
BEGIN TRANSACTION READ ONLY;
SELECT try($$SELECT idem_claim('evt_1', 'stripe_charge')$$);
SELECT try($$SELECT idem_complete('evt_1', 'stripe_charge')$$);
SELECT state FROM idem_status('evt_1', 'stripe_charge');
ROLLBACK;

-- every row is consistent with its state
SELECT state, count(*) FROM idem_gate.claims GROUP BY state ORDER BY state;

-- the functions write rows without the executor, so check every row they
-- wrote against the table's CHECK constraints, by copying them all into a
-- table that has the same constraints
CREATE TEMP TABLE claims_checked (LIKE idem_gate.claims INCLUDING CONSTRAINTS);
SELECT count(*) AS constraints FROM pg_constraint
 WHERE conrelid = 'claims_checked'::regclass AND contype = 'c';
INSERT INTO claims_checked SELECT * FROM idem_gate.claims;
SELECT (SELECT count(*) FROM claims_checked) = (SELECT count(*) FROM idem_gate.claims) AS all_rows_checked;

DROP TABLE claims_checked;

------------------------------------------------------------------------
-- a table the DBA changed: triggers, constraints and NOT NULLs of their
-- own are honoured (the functions then write through SQL).  Code a DBA
-- attached runs with the owner's rights under search_path pg_catalog,
-- pg_temp (so it qualifies its names), and a session that has a
-- temporary schema is refused (see sql/hardening.sql): start a new one.
------------------------------------------------------------------------
\c
CREATE TABLE claim_audit (op text, key text, state idem_gate.state, token_set boolean);
-- the trigger writes with the rights of the gate's owner: the superuser
-- who created the extension, or the role that installed the managed edition
GRANT INSERT ON claim_audit TO PUBLIC;
CREATE FUNCTION claim_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.claim_audit VALUES (TG_OP, NEW.key, NEW.state, NEW.token IS NOT NULL);
	RETURN NEW;
END $$;
CREATE TRIGGER claim_audit AFTER INSERT OR UPDATE ON idem_gate.claims
	FOR EACH ROW EXECUTE FUNCTION claim_audit();
SELECT idem_claim('evt_audit_1', 'wf');
SELECT idem_complete('evt_audit_1', 'wf', NULL, '{"ok": true}');
SELECT idem_claim('evt_audit_1', 'wf');
SELECT idem_claim('evt_audit_2', 'wf');
SELECT idem_fail('evt_audit_2', 'wf', NULL, 'timeout', true);
SELECT outcome, attempt FROM claim('evt_audit_2', 'wf');
SELECT idem_fail('evt_audit_2', 'wf', (SELECT token FROM idem_status('evt_audit_2', 'wf')), 'ambiguous', false);
SELECT * FROM claim_audit;
DROP TRIGGER claim_audit ON idem_gate.claims;
SELECT key, state, result, last_error FROM idem_gate.claims
 WHERE key LIKE 'evt_audit_%' ORDER BY key;

ALTER TABLE idem_gate.claims ADD CONSTRAINT no_test_keys CHECK (key NOT LIKE 'test\_%');
DO $$ BEGIN
	PERFORM idem_claim('test_1', 'wf');
EXCEPTION WHEN check_violation THEN
	RAISE NOTICE '%: %', SQLSTATE, SQLERRM;
END $$;
SELECT idem_claim('evt_own_check', 'wf');
SELECT idem_complete('evt_own_check', 'wf', NULL, '{"ok": true}');
ALTER TABLE idem_gate.claims DROP CONSTRAINT no_test_keys;
SELECT outcome FROM claim('test_1', 'wf');

BEGIN;
UPDATE idem_gate.claims SET last_error = 'set for the test' WHERE last_error IS NULL;
ALTER TABLE idem_gate.claims ALTER last_error SET NOT NULL;
DO $$ BEGIN
	PERFORM idem_claim('evt_not_null', 'wf');
EXCEPTION WHEN not_null_violation THEN
	RAISE NOTICE '%: %', SQLSTATE, SQLERRM;
END $$;
ROLLBACK;
SELECT outcome FROM claim('evt_not_null', 'wf');
