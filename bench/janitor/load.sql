-- Loads :expired completed rows past a 1-day retention (completed two days
-- ago) interleaved with :live rows that must stay: completed an hour ago,
-- except that 1 in 100 of them is processing (fresh heartbeat) and 1 in 100
-- is failed_retryable (young), so every janitor query has its rows.
-- Written directly as superuser, as a long-running gate would have left them.
TRUNCATE idem_gate.claims;
INSERT INTO idem_gate.claims
	(workflow, key, state, attempt, token, result, created_at, claimed_at, updated_at, completed_at)
SELECT 'wf', k, st, 1, nextval('idem_gate.token_seq'),
	   CASE WHEN st = 'completed' THEN '{"action_id":"inv_1"}'::jsonb END,
	   t, t, t, CASE WHEN st = 'completed' THEN t END
  FROM (SELECT CASE WHEN x THEN 'exp_' || g ELSE 'live_' || g END AS k,
			   CASE WHEN x THEN 'completed'
					WHEN g % 100 = 1 THEN 'processing'
					WHEN g % 100 = 3 THEN 'failed_retryable'
					ELSE 'completed' END::idem_gate.state AS st,
			   CASE WHEN x THEN now() - interval '2 days' - g * interval '1 ms'
					WHEN g % 100 = 1 THEN now() - interval '1 minute'
					ELSE now() - interval '1 hour' + (g % 3600000) * interval '1 ms' END AS t
		  FROM (SELECT g, CASE WHEN g <= 2 * LEAST(:expired, :live) THEN g % 2 = 0
							   ELSE :expired > :live END AS x
				  FROM generate_series(1, :expired + :live) g) gs) s;
