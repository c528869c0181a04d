--
-- 1.1's janitor: receipts that expire before keys, escalations in the
-- audit trail, and the trail's own retention.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idem_gate;
RESET client_min_messages;

-- backdate(wf, by): move every row of a workflow back in time
CREATE FUNCTION backdate(wf text, by interval) RETURNS void LANGUAGE sql AS $$
	UPDATE idem_gate.claims
	   SET created_at = created_at - by, claimed_at = claimed_at - by,
	       updated_at = updated_at - by, completed_at = completed_at - by
	 WHERE workflow = wf $$;

-- a receipt retention must be shorter than the retention
SET idem_gate.receipt_retention = '31d';
SET idem_gate.retention = '1h';
SET idem_gate.receipt_retention = '2h';
-- as long as the retention is refused too, from either side
SET idem_gate.receipt_retention = '1h';
SET idem_gate.receipt_retention = '30min';
SET idem_gate.retention = '30min';
SHOW idem_gate.retention;
RESET idem_gate.receipt_retention;
RESET idem_gate.retention;
INSERT INTO idem_gate.policies (workflow, retention, receipt_retention) VALUES ('r_bad', '1 day', '2 days');
INSERT INTO idem_gate.policies (workflow, receipt_retention) VALUES ('r_bad', '0 seconds');

-- receipts older than the receipt retention are cleared, keys stay
SELECT outcome FROM idem_claim_ex('r_old_1', 'r_wf');
SELECT outcome FROM idem_claim_ex('r_old_2', 'r_wf');
SELECT idem_complete(key, 'r_wf', token, jsonb_build_object('customer', key))
  FROM idem_gate.claims WHERE workflow = 'r_wf' ORDER BY key;
SELECT backdate('r_wf', '3 hours');
SELECT outcome FROM idem_claim_ex('r_new', 'r_wf');
SELECT idem_complete('r_new', 'r_wf', (SELECT token FROM idem_status('r_new', 'r_wf')), '{"customer": "new"}');
SELECT s.receipts_cleared AS cleared_before FROM idem_gate.stats s \gset
SET idem_gate.receipt_retention = '2h';
SELECT deleted FROM idem_gate.janitor_run();
SELECT key, state, result FROM idem_gate.claims WHERE workflow = 'r_wf' ORDER BY key;
SELECT s.receipts_cleared - :cleared_before AS receipts_cleared FROM idem_gate.stats s;
SELECT outcome, result FROM idem_claim_ex('r_old_1', 'r_wf');
-- the janitor remembers how far it cleared
SELECT workflow, receipts_cleared_until < now() - interval '1 hour' AS behind_the_cutoff
  FROM idem_gate.janitor_watermarks WHERE workflow = 'r_wf';
SELECT deleted FROM idem_gate.janitor_run();
SELECT s.receipts_cleared - :cleared_before AS receipts_cleared FROM idem_gate.stats s;
RESET idem_gate.receipt_retention;

-- a policy's receipt retention, for its workflow only
INSERT INTO idem_gate.policies (workflow, receipt_retention) VALUES ('r_short', '1 hour');
SELECT outcome FROM idem_claim_ex('r_k', 'r_short');
SELECT outcome FROM idem_claim_ex('r_k', 'r_long');
SELECT idem_complete('r_k', w, (SELECT token FROM idem_status('r_k', w)), '{"pii": true}')
  FROM unnest(ARRAY['r_short', 'r_long']) w;
SELECT backdate('r_short', '2 hours'), backdate('r_long', '2 hours');
SELECT deleted FROM idem_gate.janitor_run();
SELECT workflow, result FROM idem_gate.claims WHERE key = 'r_k' ORDER BY workflow;

-- a receipt retention equal to the retention (1 second here, the least)
-- keeps receipts as long as their rows: the receipts step does not run for
-- the workflow, so it leaves no watermark
INSERT INTO idem_gate.policies (workflow, retention, receipt_retention) VALUES ('r_eq', '1 second', '1 second');
SELECT outcome FROM idem_claim_ex('r_e', 'r_eq');
SELECT idem_complete('r_e', 'r_eq', (SELECT token FROM idem_status('r_e', 'r_eq')), '{"kept": true}');
-- an hour ahead, so that no slow moment of the test makes it a second old
SELECT backdate('r_eq', '-1 hour');
SELECT deleted FROM idem_gate.janitor_run();
SELECT result FROM idem_status('r_e', 'r_eq');
SELECT count(*) AS watermarks FROM idem_gate.janitor_watermarks WHERE workflow = 'r_eq';
DELETE FROM idem_gate.policies WHERE workflow = 'r_eq';

-- a prepared transaction: its writes may be older than the start of any
-- transaction the janitor can see, so no watermark moves until it ends
-- (the receipts older than the retention are still cleared)
SELECT outcome FROM idem_claim_ex('r_p', 'r_prep');
SELECT idem_complete('r_p', 'r_prep', (SELECT token FROM idem_status('r_p', 'r_prep')), '{"prep": 1}');
SELECT backdate('r_prep', '3 hours');
BEGIN;
SELECT outcome FROM idem_claim_ex('r_p2', 'r_prep_other');
PREPARE TRANSACTION 'idem_gate_receipts';
SET idem_gate.receipt_retention = '2h';
SELECT deleted FROM idem_gate.janitor_run();
SELECT result FROM idem_status('r_p', 'r_prep');
SELECT count(*) AS watermarks FROM idem_gate.janitor_watermarks WHERE workflow = 'r_prep';
COMMIT PREPARED 'idem_gate_receipts';
SELECT deleted FROM idem_gate.janitor_run();
SELECT count(*) AS watermarks FROM idem_gate.janitor_watermarks WHERE workflow = 'r_prep';
RESET idem_gate.receipt_retention;

-- a row another transaction holds is skipped, and only it: the other
-- receipts of its workflow are cleared by the same pass, however small its
-- batches (2 here, the held row the first of six)
SELECT c.outcome, count(*) FROM generate_series(1, 6) i, idem_claim_ex('r_h' || i, 'r_held') c
 GROUP BY 1;
SELECT idem_complete('r_h' || i, 'r_held', (SELECT token FROM idem_status('r_h' || i, 'r_held')),
	'{"held": 1}') FROM generate_series(1, 6) i;
SELECT backdate('r_held', '3 hours');
BEGIN;
SELECT key FROM idem_gate.claims WHERE workflow = 'r_held' AND key = 'r_h1' FOR UPDATE;
PREPARE TRANSACTION 'idem_gate_receipts_held';
SET idem_gate.receipt_retention = '2h';
SET idem_gate.batch_size = 2;
SELECT deleted FROM idem_gate.janitor_run();
SELECT string_agg(key, ' ' ORDER BY key) FILTER (WHERE result IS NULL) AS cleared,
	string_agg(key, ' ' ORDER BY key) FILTER (WHERE result IS NOT NULL) AS kept
  FROM idem_gate.claims WHERE workflow = 'r_held';
COMMIT PREPARED 'idem_gate_receipts_held';
-- the next pass takes the row it skipped
SELECT deleted FROM idem_gate.janitor_run();
SELECT count(*) AS kept FROM idem_gate.claims WHERE workflow = 'r_held' AND result IS NOT NULL;
RESET idem_gate.batch_size;
RESET idem_gate.receipt_retention;

-- escalations are recorded in the audit trail
SELECT outcome FROM idem_claim_ex('r_stuck', 'r_esc', NULL, NULL, 'run-9');
SELECT backdate('r_esc', '1 hour');
SET idem_gate.stuck_after = '10min';
SET idem_gate.stuck_action = 'review';
SET client_min_messages = error;
SELECT alerts, escalated FROM idem_gate.janitor_run();
RESET client_min_messages;
RESET idem_gate.stuck_action;
RESET idem_gate.stuck_after;
SELECT action, workflow, key, state_before, state_after, session_role = session_user AS by_session,
	reason LIKE 'stuck in processing for %' AS reason_given
  FROM idem_gate.audit WHERE workflow = 'r_esc';
SELECT state FROM idem_status('r_stuck', 'r_esc');

-- nobody changes the trail
UPDATE idem_gate.audit SET reason = 'rewritten';
DELETE FROM idem_gate.audit;
TRUNCATE idem_gate.audit;
SELECT count(*) > 0 AS trail_kept FROM idem_gate.audit;

-- the janitor drops rows older than idem_gate.audit_retention
SELECT pg_sleep(1.1);
SET idem_gate.audit_retention = '1s';
SELECT deleted FROM idem_gate.janitor_run();
RESET idem_gate.audit_retention;
SELECT count(*) AS trail_after_retention FROM idem_gate.audit;

DELETE FROM idem_gate.policies WHERE workflow = 'r_short';
DELETE FROM idem_gate.claims WHERE workflow IN ('r_wf', 'r_short', 'r_long', 'r_esc', 'r_held');
DROP FUNCTION backdate(text, interval);
