-- idem_gate demo: a double delivery, a completed retry, a stale takeover.
\set VERBOSITY default
\pset footer off
\echo
\echo '== Stripe delivers evt_1; worker run-A claims it'
SELECT outcome, token, attempt, state FROM idem_claim_ex('evt_1', 'stripe_charge', '30 seconds', NULL, 'run-A') \gset a_
SELECT :'a_outcome' AS outcome, :a_token AS token, :a_attempt AS attempt, :'a_state' AS state;

\echo '== 30 ms later the same event arrives again; worker run-B claims it'
SELECT outcome, token, attempt, state FROM idem_claim_ex('evt_1', 'stripe_charge', '30 seconds', NULL, 'run-B');
\echo '   in_flight: run-B answers the sender 200 and does not charge'

\echo '== run-A charges the card and stores the receipt'
SELECT idem_complete('evt_1', 'stripe_charge', :a_token, '{"charge_id": "ch_3Kx9"}');

\echo '== Stripe retries evt_1 the next day'
SELECT outcome, token, state, result FROM idem_claim_ex('evt_1', 'stripe_charge', '30 seconds', NULL, 'run-C');
\echo '   completed, with the stored receipt: answer 200 again, charge nothing'

\echo
\echo '== evt_2: run-D claims it, then hangs before completing'
SELECT outcome, token FROM idem_claim_ex('evt_2', 'stripe_charge', '1 second', NULL, 'run-D') \gset d_
SELECT :'d_outcome' AS outcome, :d_token AS token;
SELECT pg_sleep(1.5);
\echo '== 1.5 s later the redelivery finds the claim stale (stale_interval 1 second): run-E takes over'
SELECT outcome, token, attempt FROM idem_claim_ex('evt_2', 'stripe_charge', '1 second', NULL, 'run-E') \gset e_
SELECT :'e_outcome' AS outcome, :e_token AS token, :e_attempt AS attempt;
\echo '== run-D wakes up and tries to record its outcome with its old token: refused'
SELECT idem_complete('evt_2', 'stripe_charge', :d_token, '{"charge_id": "ch_late"}');
\echo '== run-E completes with the token it owns'
SELECT idem_complete('evt_2', 'stripe_charge', :e_token, '{"charge_id": "ch_7Qa2"}');

\echo
\echo '== the state table'
SELECT workflow, key, state, attempt, token, execution_id, result FROM idem_gate.claims ORDER BY key;
