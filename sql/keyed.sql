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
-- at most 64 kB: a file of 65,536 bytes is taken, one of 65,537 refused
COPY (SELECT unnest(ARRAY['s1 ' || repeat('a1', 32), '#' || repeat('x', 65466)]))
	TO PROGRAM 'umask 077 && cat > idem_gate_keyed_big';
ALTER SYSTEM SET idem_gate.secret_file = 'idem_gate_keyed_big';
COPY (SELECT unnest(ARRAY['s1 ' || repeat('a1', 32), '#' || repeat('x', 65467)]))
	TO PROGRAM 'umask 077 && cat > idem_gate_keyed_big';
ALTER SYSTEM SET idem_gate.secret_file = 'idem_gate_keyed_big';
COPY (SELECT 1) TO PROGRAM 'rm idem_gate_keyed_big';
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

-- the stored form is HMAC-SHA256(secret, workflow || 0x00 || key) byte for
-- byte, though each backend hashes a secret's two pads once, when it takes
-- the secrets in (keyed_hmac.c): answers computed outside the server
-- (Python's hmac module, and RFC 2104 by hand) for secrets of 32, 64 (one
-- SHA-256 block), 65, 100 and 128 bytes (longer than a block: hashed
-- first), keys of less and more than a block, in this one session across
-- reloads that put a new secret first and then remove the older one
CREATE FUNCTION k_hex(n int) RETURNS text LANGUAGE sql AS $$
	SELECT string_agg(lpad(to_hex((g * 37 + 11) % 256), 2, '0'), '' ORDER BY g)
	FROM generate_series(1, n) g $$;
CREATE TABLE k_kat (n int, k text, mac text);
INSERT INTO k_kat VALUES
 (32, 'alice@example.com', '555f32491eaf5467a6d2adce121a8119a014d2b0daba3f331b6fda12a7ba6afd'),
 (32, repeat('0123456789', 10), '1b1d5979db882da3f6a0088c5062238720c2abb60309bdb558d78b7497223bf0'),
 (32, 'Ünïcødé', '473d5e45b52d0e24a0d97a49d332f0efd6c230444b684b207b1d4e1ac5dbe2fa'),
 (64, 'alice@example.com', 'bbfe55f5433fcc15673fafccaad72cd651dac2c9de7c07b004fa18948fc12bd3'),
 (64, repeat('0123456789', 10), '69601c0845113e00c41ddc7b81316110cfb89a7ab504bbd2a0aff4bc344aaa18'),
 (64, 'Ünïcødé', '1191741fe67cf4d16bfabbc17d99869efebaf8c37692b67467596bf3cb9269b8'),
 (65, 'alice@example.com', '56d72474d6fa88500155b6e7379c0eb7e989195413c7ae8db6ea8adb36b4b812'),
 (65, repeat('0123456789', 10), 'ef838058193e254f1d084c090570776c767db9a0439d2ae2d7e7b09abafb0950'),
 (65, 'Ünïcødé', '754961e6d71f6467d9c64ff001f5eadf90584f2e4f0d518228d202eebe863144'),
 (100, 'alice@example.com', '344bd33cf1f1fb589e678549855176ddbd3c0266860c0c47e2e58f5ca1357764'),
 (100, repeat('0123456789', 10), '768d689c4b1b135615cb5de720cd1152ea5d34157fb5f504f6e95234c30ed9e5'),
 (100, 'Ünïcødé', 'fceb0b80ef854f01576bf74a90db4d5100e00a69f2c5b4e0fe8b07d6084b5c8d'),
 (128, 'alice@example.com', '6a11e868588d8fea40c95b49b2655b77a62935f5f9573634f17ac2c20f765b3c'),
 (128, repeat('0123456789', 10), '4d77a5eae827c083fceb3b828d54c15f52f83670bbdc808a904fc90fb4d0fab5'),
 (128, 'Ünïcødé', 'aa3493c500965a56d13c45bfe39677b2068bed95c260a89a726dfbaa3e1c2461');
INSERT INTO idem_gate.policies (workflow, keyed) VALUES ('k_kat', true);
-- kat32 alone: idem_key and the stored keys of new claims
SELECT k_secrets(ARRAY['kat32 ' || k_hex(32)]);
SELECT n, octet_length(k) AS key_bytes, idem_key('k_kat', k) = 'kat' || n || ':' || mac AS known_answer
  FROM k_kat WHERE n = 32 ORDER BY 2;
SELECT idem_claim(k, 'k_kat', NULL) FROM k_kat WHERE n = 32 ORDER BY k;
SELECT count(*) AS stored_as_known FROM idem_gate.claims c JOIN k_kat t ON c.key = 'kat32:' || t.mac
  WHERE c.workflow = 'k_kat';
-- kat64 first, kat32 second: the current form is kat64's, and kat32's claims
-- are found through their form under the older secret
SELECT k_secrets(ARRAY['kat64 ' || k_hex(64), 'kat32 ' || k_hex(32)]);
SELECT n, octet_length(k) AS key_bytes, idem_key('k_kat', k) = 'kat' || n || ':' || mac AS known_answer
  FROM k_kat WHERE n = 64 ORDER BY 2;
SELECT r.outcome FROM k_kat t, idem_claim_ex(t.k, 'k_kat') r WHERE t.n = 32 ORDER BY t.k;
-- kat65 first, kat64 second, kat32 removed: kat32's claims are no longer found,
-- and claimed again under kat65; kat64's under the older secret
SELECT k_secrets(ARRAY['kat65 ' || k_hex(65), 'kat64 ' || k_hex(64)]);
SELECT n, octet_length(k) AS key_bytes, idem_key('k_kat', k) = 'kat' || n || ':' || mac AS known_answer
  FROM k_kat WHERE n = 65 ORDER BY 2;
SELECT r.outcome FROM k_kat t, idem_claim_ex(t.k, 'k_kat') r WHERE t.n = 32 ORDER BY t.k;
SELECT count(*) AS stored_as_known FROM idem_gate.claims c JOIN k_kat t ON c.key = 'kat65:' || t.mac
  WHERE c.workflow = 'k_kat';
-- longer than a block: 100 and 128 bytes, each first, then alone
SELECT k_secrets(ARRAY['kat100 ' || k_hex(100), 'kat65 ' || k_hex(65)]);
SELECT n, octet_length(k) AS key_bytes, idem_key('k_kat', k) = 'kat' || n || ':' || mac AS known_answer
  FROM k_kat WHERE n = 100 ORDER BY 2;
SELECT r.outcome FROM k_kat t, idem_claim_ex(t.k, 'k_kat') r WHERE t.n = 32 ORDER BY t.k;
SELECT k_secrets(ARRAY['kat128 ' || k_hex(128)]);
SELECT n, octet_length(k) AS key_bytes, idem_key('k_kat', k) = 'kat' || n || ':' || mac AS known_answer
  FROM k_kat WHERE n = 128 ORDER BY 2;
SELECT idem_claim(k, 'k_kat', NULL) FROM k_kat WHERE n = 128 ORDER BY k;
SELECT count(*) AS stored_as_known FROM idem_gate.claims c JOIN k_kat t ON c.key = 'kat128:' || t.mac
  WHERE c.workflow = 'k_kat';
-- hex digits in capitals read as small letters: from another secret to
-- kat128 written in capitals (every digit and letter in it), its answers
SELECT k_secrets(ARRAY['s2 ' || repeat('b2', 40)]);
SELECT k_secrets(ARRAY['kat128 ' || upper(k_hex(128))]);
SELECT n, octet_length(k) AS key_bytes, idem_key('k_kat', k) = 'kat' || n || ':' || mac AS known_answer
  FROM k_kat WHERE n = 128 ORDER BY 2;
DROP TABLE k_kat;
DROP FUNCTION k_hex(int);
SELECT k_secrets(ARRAY['s2 ' || repeat('b2', 40)]);

-- the policy changes in every backend's view at once; keyed off: plain keys
UPDATE idem_gate.policies SET keyed = false WHERE workflow = 'k_a';
SELECT idem_key('k_a', 'r1') AS plain_again;
UPDATE idem_gate.policies SET keyed = true WHERE workflow = 'k_a';
SELECT idem_key('k_a', 'r1') LIKE 's2:%' AS keyed_again;
-- "already decided" finds an operator's decision on a keyed claim through
-- the key's stored forms, and names who (the time masked)
SELECT outcome FROM idem_claim_ex('d1', 'k_a');
SELECT idem_fail('d1', 'k_a', (SELECT token FROM idem_status('d1', 'k_a')), 'ambiguous', false);
SELECT idem_resolve('d1', 'k_a', 'completed', '{"ok": true}', 'charge found', 'alice');
DO $$
DECLARE
	det text;
BEGIN
	PERFORM idem_resolve('d1', 'k_a', 'retry', NULL, 'late', 'bob');
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS det = PG_EXCEPTION_DETAIL;
	RAISE NOTICE '%: %', SQLSTATE, regexp_replace(det,
		'\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?[+-]\d\d', 'TIME', 'g');
END $$;
-- a call that fails while the keyed workflows are read (here past
-- lock_timeout, for a lock that a prepared transaction holds) leaves
-- none of them half read: in a new session, the next claim of a claimed
-- key finds it, and no key is stored as given
\c -
BEGIN;
LOCK idem_gate.policies IN ACCESS EXCLUSIVE MODE;
PREPARE TRANSACTION 'regress_k_hold';
SET lock_timeout = '10ms';
SELECT outcome FROM idem_claim_ex('r1', 'k_a');
RESET lock_timeout;
COMMIT PREPARED 'regress_k_hold';
SELECT outcome FROM idem_claim_ex('r1', 'k_a');
SELECT count(*) AS raw_keys FROM idem_gate.claims WHERE workflow = 'k_a' AND key !~ '^s[12]:[0-9a-f]{64}$';
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
-- idem_key_forms (1.3): the key's form in each keyed workflow the role may
-- see, the others left out; not public, granted like idem_key
SELECT k_try($$SELECT * FROM idem_key_forms('x')$$);
RESET ROLE;
GRANT EXECUTE ON FUNCTION idem_key_forms(text) TO regress_k_ops;
SET ROLE regress_k_ops;
SELECT workflow, stored_key = idem_key(workflow, 'x') AS as_idem_key FROM idem_key_forms('x');
SELECT k_try($$SELECT * FROM idem_key_forms(NULL)$$);
SELECT k_try($$SELECT * FROM idem_key_forms('')$$);
SELECT k_try($$SELECT * FROM idem_key_forms(repeat('é', 300))$$);
RESET ROLE;
SELECT workflow, stored_key = idem_key(workflow, 'x') AS as_idem_key, stored_key LIKE 's2:%' AS current_secret
  FROM idem_key_forms('x') WHERE workflow LIKE 'k\_%' ORDER BY workflow;
RESET idem_gate.workflow_acl;
SELECT idem_gate.revoke_workflow('regress_k_ops', 'k_crm');
REVOKE ALL ON SCHEMA idem_gate FROM regress_k_ops;
REVOKE ALL ON FUNCTION idem_key(text, text), idem_key_forms(text) FROM regress_k_ops;
DROP ROLE regress_k_ops;

-- back to no secret file for the tests that follow
ALTER SYSTEM RESET idem_gate.secret_file;
SELECT pg_reload_conf();
SELECT pg_sleep(0.3);
SELECT k_try($$SELECT idem_key('k_crm', 'x')$$);
SELECT regexp_replace(k_try($$SELECT * FROM idem_key_forms('x')$$), '"k_[a-z]+"', '"k_…"') AS a_keyed_workflow_without_secret;
DELETE FROM idem_gate.claims WHERE workflow LIKE 'k\_%';
DELETE FROM idem_gate.policies WHERE workflow LIKE 'k\_%';
SELECT count(*) AS no_keyed_workflow_no_form FROM idem_key_forms('x');
DROP FUNCTION k_script(text);
DROP FUNCTION k_norm(text);
DROP FUNCTION k_secrets(text[]);
DROP FUNCTION k_try(text);
