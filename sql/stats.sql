--
-- The stats view: counters fed by the API and the janitor, live gauges.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idem_gate;
RESET client_min_messages;
TRUNCATE idem_gate.claims;
SELECT idem_gate.stats_reset();

SELECT idem_claim('s1', 'wf');
SELECT idem_claim('s1', 'wf');
SELECT idem_claim('s2', 'wf');
SELECT idem_complete('s1', 'wf');
SELECT idem_claim('s1', 'wf');
SELECT idem_fail('s2', 'wf', NULL, NULL, true);
SELECT idem_claim('s2', 'wf');
SELECT idem_fail('s2', 'wf');
SELECT idem_claim('s2', 'wf');
SELECT idem_resolve('s2', 'wf', 'retry');
SELECT idem_claim('s3', 'wf');
UPDATE idem_gate.claims SET created_at = created_at - interval '1 hour',
	claimed_at = claimed_at - interval '1 hour', updated_at = updated_at - interval '1 hour'
 WHERE key = 's3';
SELECT idem_claim('s3', 'wf', '10 minutes');
SELECT idem_claim('s4', 'wf');
UPDATE idem_gate.claims SET created_at = created_at - interval '1 day',
	claimed_at = claimed_at - interval '1 day', updated_at = updated_at - interval '1 day'
 WHERE key = 's4';
SET client_min_messages = error;
SELECT * FROM idem_gate.janitor_run();
RESET client_min_messages;

SELECT available, claims_new, claims_in_flight, claims_completed, claims_stale_taken,
	claims_needs_review, completions, fails_retryable, fails_needs_review, resolves,
	deleted_completed, deleted_failed, alerts, escalations, janitor_passes,
	last_pass_at IS NOT NULL AS passed, last_pass_ms >= 0 AS timed,
	reset_at <= now() AS reset_known
  FROM idem_gate.stats;
SELECT rows_processing, rows_failed_retryable, rows_needs_review,
	oldest_processing_age >= interval '1 day' AS oldest_is_s4
  FROM idem_gate.stats;

-- a rolled-back claim still counts as a call
BEGIN;
SELECT idem_claim('s5', 'wf');
ROLLBACK;
SELECT claims_new FROM idem_gate.stats;

-- a batch counts each key's outcome; a batch that fails answered nothing
-- and counts nothing (b0 is claimed first, then b1's fingerprint differs)
SELECT idem_gate.stats_reset();
SELECT count(*) FROM idem_claim_many(ARRAY['b1', 'b2', 'b1'], 'wf', NULL, ARRAY['x', 'x', 'x']);
SELECT count(*) FROM idem_claim_many(ARRAY['b0', 'b1'], 'wf', NULL, ARRAY['y', 'y']);
SELECT claims_new, claims_in_flight, fingerprint_mismatches FROM idem_gate.stats;

SELECT idem_gate.stats_reset();
SELECT claims_new + claims_in_flight + completions + janitor_passes AS all_zero,
	last_pass_at IS NULL AS no_pass FROM idem_gate.stats;
