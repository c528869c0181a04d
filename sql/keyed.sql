-- Keyed keys: a workflow whose policy says keyed stores HMAC-SHA256 of
-- each key under the secrets of idem_gate.secret_file, never the key, and
-- answers exactly as a plain workflow does.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idem_gate;
RESET client_min_messages;

CREATE FUNCTION k_try(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	st text; msg text; hint text;
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
	RETURN st || ': ' || msg;
END $$;

-- a file of secrets in the data directory, readable by its owner alone,
-- and the configuration reloaded
CREATE FUNCTION k_secrets(lines text[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('COPY (SELECT unnest(%L::text[])) TO PROGRAM %L', lines,
				   'umask 077 && cat > idem_gate_keyed_secrets.new && mv idem_gate_keyed_secrets.new idem_gate_keyed_secrets');
	PERFORM pg_reload_conf();
	PERFORM pg_sleep(0.3);
END $$;

INSERT INTO idem_gate.policies (workflow, keyed) VALUES ('k_crm', true);
INSERT INTO idem_gate.policies (workflow, keyed, retention) VALUES ('k_a', true, '30 days');
SELECT workflow, keyed FROM idem_gate.policies WHERE workflow LIKE 'k\_%' ORDER BY 1;

-- no secret yet: a keyed workflow refuses, naming the setting; never a plain key
\set VERBOSITY default
SELECT * FROM idem_claim_ex('alice@example.com', 'k_crm');
\set VERBOSITY terse
SELECT count(*) AS nothing_written FROM idem_gate.claims WHERE workflow = 'k_crm';
-- bad keys get the errors of a plain workflow, without the key
SELECT k_try($$SELECT idem_claim(NULL, 'k_crm', NULL)$$);
SELECT k_try($$SELECT idem_claim('', 'k_crm', NULL)$$);
SELECT k_try($$SELECT idem_claim(repeat('é', 300), 'k_crm', NULL)$$);
SELECT k_try($$SELECT idem_claim(repeat('é', 300), 'plain', NULL)$$) LIKE '%éééé%' AS plain_names_it;

-- a file other users can read is refused, as PostgreSQL refuses its SSL key
\set VERBOSITY default
COPY (SELECT 's1 ' || repeat('a1', 32)) TO PROGRAM 'umask 022 && cat > idem_gate_keyed_secrets';
ALTER SYSTEM SET idem_gate.secret_file = 'idem_gate_keyed_secrets';
\set VERBOSITY terse
-- the secrets: s1 current (a path relative to the data directory)
SELECT k_secrets(ARRAY['# current first', 's1 ' || repeat('a1', 32)]);
ALTER SYSTEM SET idem_gate.secret_file = 'idem_gate_keyed_secrets';
SELECT pg_reload_conf();
SELECT pg_sleep(0.3);
SELECT k_try($$SELECT * FROM idem_claim_many(ARRAY['ok', repeat('x', 300)], 'k_crm')$$);
SELECT secret_id, file_order, claims FROM idem_gate.secrets;

-- the stored form: the secret's id, a colon and 64 hex digits
SELECT outcome FROM idem_claim_ex('alice@example.com', 'k_crm');
SELECT key ~ '^s1:[0-9a-f]{64}$' AS stored_form, key = idem_key('k_crm', 'alice@example.com') AS idem_key_finds_it
  FROM idem_gate.claims WHERE workflow = 'k_crm';
SELECT idem_key('plain', 'alice@example.com') AS plain_key_itself;
SELECT idem_key('k_crm', 'alice@example.com') <> idem_key('k_a', 'alice@example.com') AS workflow_in_the_hmac;
SELECT count(*) AS raw_key_nowhere FROM idem_gate.claims WHERE key LIKE '%alice%';

-- every answer of the state machine is the same in a keyed and a plain
-- workflow: one script, run on both, tokens and keys left out
CREATE FUNCTION k_script(wf text) RETURNS TABLE (step int, answer text) LANGUAGE plpgsql AS $$
DECLARE
	t bigint;
	r record;
	n int := 0;
BEGIN
	-- new, duplicate, re-entry of the owner, completion, completed
	SELECT * INTO r FROM idem_claim_ex('e1', wf, '1 hour', 'fp1', 'run-1'); t := r.token;
	n := n + 1; step := n; answer := r.outcome || '/' || r.attempt || '/' || r.state; RETURN NEXT;
	SELECT * INTO r FROM idem_claim_ex('e1', wf, '1 hour', 'fp1', 'run-2');
	n := n + 1; step := n; answer := r.outcome || '/' || (r.token IS NULL); RETURN NEXT;
	SELECT * INTO r FROM idem_claim_ex('e1', wf, '1 hour', 'fp1', 'run-1');
	n := n + 1; step := n; answer := r.outcome || '/' || (r.token = t); RETURN NEXT;
	n := n + 1; step := n; answer := idem_heartbeat('e1', wf, t)::text; RETURN NEXT;
	n := n + 1; step := n; answer := k_try(format('SELECT idem_complete(%L, %L, %s, NULL)', 'e1', wf, t + 1000)); RETURN NEXT;
	n := n + 1; step := n; answer := k_try(format('SELECT idem_claim_ex(%L, %L, NULL, %L)', 'e1', wf, 'other')); RETURN NEXT;
	n := n + 1; step := n; answer := idem_complete('e1', wf, t, '{"receipt": 1}')::text; RETURN NEXT;
	n := n + 1; step := n; answer := idem_complete('e1', wf, t, '{"receipt": 1}')::text; RETURN NEXT;
	SELECT * INTO r FROM idem_claim_ex('e1', wf, '1 hour', 'fp1', 'run-3');
	n := n + 1; step := n; answer := r.outcome || '/' || r.result::text; RETURN NEXT;
	-- a retryable failure, the retry, a failure a person decides
	SELECT * INTO r FROM idem_claim_ex('e2', wf, NULL, NULL, 'run-1'); t := r.token;
	n := n + 1; step := n; answer := idem_fail('e2', wf, t, 'timeout', true)::text; RETURN NEXT;
	SELECT * INTO r FROM idem_claim_ex('e2', wf, NULL, NULL, 'run-2'); t := r.token;
	n := n + 1; step := n; answer := r.outcome || '/' || r.attempt; RETURN NEXT;
	n := n + 1; step := n; answer := idem_fail('e2', wf, t, 'after the charge', false)::text; RETURN NEXT;
	SELECT * INTO r FROM idem_claim_ex('e2', wf);
	n := n + 1; step := n; answer := r.outcome::text; RETURN NEXT;
	n := n + 1; step := n; answer := (SELECT string_agg(i.reason || '/' || i.attempt, ',') FROM idem_gate.inbox i WHERE i.workflow = wf); RETURN NEXT;
	n := n + 1; step := n; answer := idem_resolve('e2', wf, 'retry', NULL, 'checked', 'ops@example.com')::text; RETURN NEXT;
	SELECT * INTO r FROM idem_claim_ex('e2', wf, NULL, NULL, 'run-3'); t := r.token;
	n := n + 1; step := n; answer := r.outcome || '/' || r.attempt; RETURN NEXT;
	n := n + 1; step := n; answer := idem_fail('e2', wf, t, 'again', false)::text; RETURN NEXT;
	n := n + 1; step := n; answer := idem_resolve('e2', wf, 'completed', '{"by": "hand"}', 'paid', 'ops@example.com')::text; RETURN NEXT;
	n := n + 1; step := n; answer := (SELECT string_agg(h.action || '/' || coalesce(h.actor, '-') || '/' || h.state_before || '>' || coalesce(h.state_after::text, '-'), ',') FROM idem_gate.history('e2', wf) h); RETURN NEXT;
	-- a stale takeover, the old owner refused, release, status
	SELECT * INTO r FROM idem_claim_ex('e3', wf, NULL, NULL, 'run-1'); t := r.token;
	UPDATE idem_gate.claims c SET created_at = now() - interval '2 hours',
		claimed_at = now() - interval '2 hours', updated_at = now() - interval '2 hours'
	 WHERE c.workflow = wf AND c.token = t;
	SELECT * INTO r FROM idem_claim_ex('e3', wf, '1 hour', NULL, 'run-2');
	n := n + 1; step := n; answer := r.outcome || '/' || r.attempt || '/' || (r.token > t); RETURN NEXT;
	n := n + 1; step := n; answer := k_try(format('SELECT idem_complete(%L, %L, %s, NULL)', 'e3', wf, t)); RETURN NEXT;
	n := n + 1; step := n; answer := (SELECT s.state || '/' || s.attempt FROM idem_status('e3', wf) s); RETURN NEXT;
	n := n + 1; step := n; answer := idem_release('e3', wf, 'test', 'ops@example.com')::text; RETURN NEXT;
	n := n + 1; step := n; answer := idem_release('e3', wf, 'again')::text; RETURN NEXT;
	n := n + 1; step := n; answer := (SELECT count(*)::text FROM idem_status('e3', wf)); RETURN NEXT;
	n := n + 1; step := n; answer := k_try(format('SELECT idem_complete(%L, %L, 1, NULL)', 'never', wf)); RETURN NEXT;
	-- a batch: one new each, a repeat in_flight, one completed, in input order
	n := n + 1; step := n;
	answer := (SELECT string_agg(m.ord || ':' || m.outcome, ',' ORDER BY m.ord)
				 FROM idem_claim_many(ARRAY['b1', 'e1', 'b2', 'b1'], wf, NULL, NULL, 'run-b') m);
	RETURN NEXT;
	n := n + 1; step := n; answer := (SELECT string_agg(m.key, ',' ORDER BY m.ord) FROM idem_claim_many(ARRAY['b2', 'b1'], wf) m); RETURN NEXT;
	n := n + 1; step := n; answer := (SELECT count(*)::text FROM idem_gate.claims c WHERE c.workflow = wf); RETURN NEXT;
END $$;
-- (an error compares by its SQLSTATE: its text names the workflow, the
-- key as stored and a token)
CREATE FUNCTION k_norm(a text) RETURNS text LANGUAGE sql AS
$$ SELECT regexp_replace(regexp_replace(a, '^([0-9A-Z]{5}):.*$', '\1'), 'token \d+', 'token N') $$;
SELECT p.step, p.answer AS plain, k.answer AS keyed
  FROM k_script('k_plain') p FULL JOIN k_script('k_a') k ON k.step = p.step
 WHERE k_norm(p.answer) IS DISTINCT FROM k_norm(k.answer);
SELECT step, k_norm(answer) AS answer FROM k_script('k_plain2');
-- a keyed workflow's errors name the key as stored, never as given
SELECT k_try($$SELECT idem_complete('e1', 'k_a', 0, NULL)$$) ~ 'key "s1:[0-9a-f]{58}\.\.\." in workflow "k_a"' AS stored_form_named;
SELECT k_try($$SELECT idem_claim_ex('e1', 'k_a', NULL, 'other')$$) ~ 'key "s1:[0-9a-f]{58}\.\.\."' AS stored_form_named;
-- the keyed workflow stored no key it was given, not in the claims nor in the audit trail
SELECT count(*) AS raw_keys FROM idem_gate.claims WHERE workflow = 'k_a' AND key !~ '^s1:[0-9a-f]{64}$';
SELECT count(*) AS raw_keys_audited FROM idem_gate.audit WHERE workflow = 'k_a' AND key !~ '^s1:[0-9a-f]{64}$';
SELECT count(*) AS keys_audited FROM idem_gate.audit WHERE workflow = 'k_a';

-- rotation: s2 first, s1 still listed: s1's claims are found, new ones go under s2
SELECT k_secrets(ARRAY['s2 ' || repeat('b2', 40), 's1 ' || repeat('a1', 32)]);
SELECT outcome FROM idem_claim_ex('e1', 'k_a');
SELECT outcome FROM idem_claim_ex('r1', 'k_a');
SELECT split_part(key, ':', 1) AS secret_id, count(*) FROM idem_gate.claims WHERE workflow = 'k_a' GROUP BY 1 ORDER BY 1;
SELECT secret_id, file_order, claims FROM idem_gate.secrets;
SELECT idem_key('k_a', 'r1') LIKE 's2:%' AS idem_key_current;
SELECT action FROM idem_gate.history('e2', 'k_a');
SELECT state FROM idem_status('e1', 'k_a');
-- removing s1: its claims are kept, but no longer found by key
SELECT k_secrets(ARRAY['s2 ' || repeat('b2', 40)]);
SELECT outcome FROM idem_claim_ex('e1', 'k_a');
SELECT secret_id, file_order, claims FROM idem_gate.secrets;
SELECT count(*) AS s1_rows_kept FROM idem_gate.claims WHERE workflow = 'k_a' AND key LIKE 's1:%';

-- a malformed file keeps the secrets in force (the log names the line)
SELECT k_secrets(ARRAY['s3 ' || repeat('c3', 31)]);
SELECT idem_key('k_a', 'r1') LIKE 's2:%' AS last_good_secrets_kept;
SELECT k_secrets(ARRAY['s3 ' || repeat('zz', 32)]);
SELECT idem_key('k_a', 'r1') LIKE 's2:%' AS last_good_secrets_kept;
SELECT k_secrets(ARRAY['s3 ' || repeat('c3', 32), 's3 ' || repeat('c4', 32)]);
SELECT idem_key('k_a', 'r1') LIKE 's2:%' AS last_good_secrets_kept;
-- an id of 16 letters and digits is the longest, and kept whole; 17 are refused
SELECT k_secrets(ARRAY['Rot2026Dec03abcd ' || repeat('d5', 32), 's2 ' || repeat('b2', 40)]);
SELECT secret_id, file_order FROM idem_gate.secret_ids();
SELECT split_part(idem_key('k_a', 'r1'), ':', 1) AS current_id;
SELECT k_secrets(ARRAY['Rot2026Dec03abcde ' || repeat('d5', 32), 's2 ' || repeat('b2', 40)]);
SELECT secret_id, file_order FROM idem_gate.secret_ids();
SELECT k_secrets(ARRAY['s2 ' || repeat('b2', 40)]);
SELECT idem_key('k_a', 'r1') LIKE 's2:%' AS s2_current_again;

-- the policy changes in every backend's view at once; keyed off: plain keys
UPDATE idem_gate.policies SET keyed = false WHERE workflow = 'k_a';
SELECT idem_key('k_a', 'r1') AS plain_again;
UPDATE idem_gate.policies SET keyed = true WHERE workflow = 'k_a';
SELECT idem_key('k_a', 'r1') LIKE 's2:%' AS keyed_again;
SELECT k_try($$INSERT INTO idem_gate.policies (workflow) VALUES ('k_nothing')$$);

-- nobody but a superuser reads or sets the secret file
CREATE ROLE regress_k_user;
GRANT USAGE ON SCHEMA idem_gate TO regress_k_user;
GRANT EXECUTE ON FUNCTION idem_key(text, text), idem_claim(text, text, interval) TO regress_k_user;
SET ROLE regress_k_user;
-- (the wording of PostgreSQL's refusal changed in 16; the SQLSTATE did not)
SELECT regexp_replace(k_try($$SHOW idem_gate.secret_file$$), ':.*examine', ': refused to examine') AS show_secret_file;
SELECT regexp_replace(k_try($$SELECT current_setting('idem_gate.secret_file')$$), ':.*examine', ': refused to examine') AS current_setting;
SELECT count(*) AS visible_in_pg_settings FROM pg_settings WHERE name = 'idem_gate.secret_file';
SELECT k_try($$SET idem_gate.secret_file = '/tmp/mine'$$);
SELECT k_try($$SELECT * FROM idem_gate.secret_ids()$$);
ALTER SYSTEM SET idem_gate.secret_file = '/tmp/mine';
SELECT idem_claim('bob@example.com', 'k_crm', NULL);
SELECT idem_key('k_crm', 'bob@example.com') ~ '^s2:[0-9a-f]{64}$' AS operator_finds_the_form;
RESET ROLE;
REVOKE ALL ON SCHEMA idem_gate FROM regress_k_user;
REVOKE ALL ON FUNCTION idem_key(text, text), idem_claim(text, text, interval) FROM regress_k_user;
DROP ROLE regress_k_user;

-- with workflow_acl on, idem_key is checked like every call of the gate
CREATE ROLE regress_k_ops;
GRANT USAGE ON SCHEMA idem_gate TO regress_k_ops;
GRANT EXECUTE ON FUNCTION idem_key(text, text) TO regress_k_ops;
SELECT idem_gate.grant_workflow('regress_k_ops', 'k_crm');
SET idem_gate.workflow_acl = on;
SET ROLE regress_k_ops;
SELECT idem_key('k_crm', 'x') LIKE 's2:%' AS granted;
SELECT k_try($$SELECT idem_key('k_a', 'x')$$);
RESET ROLE;
RESET idem_gate.workflow_acl;
SELECT idem_gate.revoke_workflow('regress_k_ops', 'k_crm');
REVOKE ALL ON SCHEMA idem_gate FROM regress_k_ops;
REVOKE ALL ON FUNCTION idem_key(text, text) FROM regress_k_ops;
DROP ROLE regress_k_ops;

-- back to no secret file for the tests that follow
ALTER SYSTEM RESET idem_gate.secret_file;
SELECT pg_reload_conf();
SELECT pg_sleep(0.3);
SELECT k_try($$SELECT idem_key('k_crm', 'x')$$);
DELETE FROM idem_gate.claims WHERE workflow LIKE 'k\_%';
DELETE FROM idem_gate.policies WHERE workflow LIKE 'k\_%';
DROP FUNCTION k_script(text);
DROP FUNCTION k_norm(text);
DROP FUNCTION k_secrets(text[]);
DROP FUNCTION k_try(text);
