--
-- Bulk decisions (1.3): idem_resolve_many() and idem_release_many() decide
-- each claim on its own, with one audit row each, and answer one row per
-- key in input order: decided, already_decided, not_found, not_permitted.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idem_gate;
RESET client_min_messages;
DELETE FROM idem_gate.claims;
DELETE FROM idem_gate.policies;
SELECT current_user AS su \gset
\set SHOW_CONTEXT never

CREATE ROLE regress_bk_ops;
CREATE ROLE regress_bk_half;
GRANT USAGE ON SCHEMA idem_gate TO regress_bk_ops, regress_bk_half;
GRANT EXECUTE ON FUNCTION
	idem_resolve(text, text, text, jsonb, text, text),
	idem_release(text, text, text, text),
	idem_resolve_many(text[], text, text, jsonb, text, text),
	idem_release_many(text[], text, text, text),
	idem_gate.history(text, text)
	TO regress_bk_ops;
-- a role given the bulk function but not the single-key one it calls
GRANT EXECUTE ON FUNCTION idem_resolve_many(text[], text, text, jsonb, text, text) TO regress_bk_half;
ALTER ROLE regress_bk_ops SET idem_gate.workflow_acl = on;
SELECT idem_gate.grant_workflow('regress_bk_ops', 'bulk');

-- five claims in review, one completed, one in another workflow
SELECT count(idem_fail(k, 'bulk', NULL, 'timeout', false))
  FROM (SELECT k, idem_claim(k, 'bulk') FROM unnest(ARRAY['b1', 'b2', 'b3', 'b4', 'b6']) k) s;
SELECT idem_complete('b5', 'bulk', NULL, '{"charge": 5}') FROM idem_claim('b5', 'bulk');
SELECT idem_fail('x1', 'other', NULL, 'timeout', false) FROM idem_claim('x1', 'other');

SET ROLE regress_bk_ops;
-- each key answered on its own, in input order: a completed claim, an
-- unknown key, a NULL, an empty key and a repeat are not decided
SELECT * FROM idem_resolve_many(ARRAY['b1', 'b2', 'b5', 'nope', NULL, 'b1', ''],
	'bulk', 'retry', NULL, 'the sender fixed it', 'alice');
SELECT * FROM idem_resolve_many(ARRAY['b4'], 'bulk', 'completed', '{"by": "hand"}', 'charged by hand', 'alice');
-- another team's workflow: every key not permitted, nothing changed
SELECT * FROM idem_resolve_many(ARRAY['x1', 'x2'], 'other', 'retry', NULL, 'not ours', 'alice');
SELECT * FROM idem_release_many(ARRAY['b3', 'b3', 'zz', 'b1'], 'bulk', 'sender gave up', 'bob');
SELECT * FROM idem_release_many(ARRAY['x1'], 'other', 'not ours', 'bob');
-- an empty array answers nothing
SELECT count(*) FROM idem_resolve_many('{}', 'bulk', 'retry');
SELECT count(*) FROM idem_release_many('{}', 'bulk');
-- bad arguments: an error for the whole call, before any key
SELECT * FROM idem_resolve_many(NULL, 'bulk', 'retry');
SELECT * FROM idem_resolve_many(ARRAY['b6'], NULL, 'retry');
SELECT * FROM idem_resolve_many(ARRAY['b6'], '', 'retry');
SELECT * FROM idem_resolve_many(ARRAY['b6'], 'bulk', NULL);
SELECT * FROM idem_resolve_many(ARRAY['b6'], 'bulk', 'done');
SELECT * FROM idem_release_many(NULL, 'bulk');
-- a key longer than any claim's: not found
SELECT outcome FROM idem_resolve_many(ARRAY[repeat('k', 300)], 'bulk', 'retry');
-- one audit row per decision, with the person and the reason
SELECT action, actor, reason, state_before, state_after FROM idem_gate.history('b1', 'bulk');
SELECT action, actor, reason, state_before, state_after FROM idem_gate.history('b4', 'bulk');
RESET ROLE;
SET ROLE regress_bk_half;
SELECT * FROM idem_resolve_many(ARRAY['b6'], 'bulk', 'retry');
RESET ROLE;
SELECT workflow, key, state FROM idem_gate.claims ORDER BY workflow, key;
SELECT action, workflow, key, actor FROM idem_gate.audit
 WHERE workflow IN ('bulk', 'other') ORDER BY id;

-- "already decided" names who decided and when (errdetail; the time is
-- masked here), never the token, the reason or the receipt
CREATE FUNCTION bk_detail(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	st text; msg text; det text; hint text;
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
		det = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
	RETURN st || ': ' || msg || E'\n  DETAIL: ' || coalesce(regexp_replace(nullif(det, ''),
		'\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?[+-]\d\d', 'TIME', 'g'), '(none)') ||
		E'\n  HINT: ' || coalesce(nullif(hint, ''), '(none)');
END $$;
GRANT EXECUTE ON FUNCTION bk_detail(text) TO PUBLIC;
SET ROLE regress_bk_ops;
-- b4 was resolved completed by alice; b3 released by bob; b5 completed by
-- its run, which no operator decided
SELECT bk_detail($$SELECT idem_resolve('b4', 'bulk', 'retry', NULL, 'late', 'carol')$$);
SELECT bk_detail($$SELECT idem_resolve('b3', 'bulk', 'retry', NULL, 'late', 'carol')$$);
SELECT bk_detail($$SELECT idem_resolve('b5', 'bulk', 'retry', NULL, 'late', 'carol')$$);
-- a later change than the operator's is said as well: b1, released by
-- bob, then claimed again and completed by a run
RESET ROLE;
SELECT idem_complete('b1', 'bulk', t.token, '{"ok": true}') FROM idem_claim_ex('b1', 'bulk') t;
SET ROLE regress_bk_ops;
SELECT bk_detail($$SELECT idem_resolve('b1', 'bulk', 'retry', NULL, 'late', 'carol')$$);
-- the claim's change at the very microsecond of the operator's action is
-- that action's own: not said; one microsecond later is a later change
RESET ROLE;
UPDATE idem_gate.claims c SET updated_at = a.at, completed_at = a.at
  FROM (SELECT at FROM idem_gate.audit WHERE workflow = 'bulk' AND key = 'b4'
         ORDER BY id DESC LIMIT 1) a
 WHERE c.workflow = 'bulk' AND c.key = 'b4';
SET ROLE regress_bk_ops;
SELECT bk_detail($$SELECT idem_resolve('b4', 'bulk', 'retry', NULL, 'late', 'carol')$$);
RESET ROLE;
UPDATE idem_gate.claims SET updated_at = updated_at + interval '1 microsecond',
       completed_at = completed_at + interval '1 microsecond'
 WHERE workflow = 'bulk' AND key = 'b4';
SET ROLE regress_bk_ops;
SELECT bk_detail($$SELECT idem_resolve('b4', 'bulk', 'retry', NULL, 'late', 'carol')$$);
RESET ROLE;
UPDATE idem_gate.claims SET updated_at = updated_at - interval '1 microsecond',
       completed_at = completed_at - interval '1 microsecond'
 WHERE workflow = 'bulk' AND key = 'b4';
SET ROLE regress_bk_ops;
-- in bulk, who decided an already_decided key is its history's newest
-- operator row (docs/reference.md, Bulk decisions): b4 by alice, b5 by none
SELECT r.ord, r.key, r.outcome, h.actor AS decided_by, h.at IS NOT NULL AS decided_at
FROM idem_resolve_many(ARRAY['b4', 'b5'], 'bulk', 'retry', NULL, 'late', 'carol') AS r
LEFT JOIN LATERAL (SELECT actor, at FROM idem_gate.history(r.key, 'bulk')
                   WHERE action <> 'escalate' ORDER BY at DESC LIMIT 1) AS h
       ON r.outcome = 'already_decided'
ORDER BY r.ord;
RESET ROLE;
-- the answer shows none of what was stored: no token, reason or receipt
SELECT count(*) AS leaks FROM idem_gate.audit a, LATERAL (SELECT bk_detail(
	format('SELECT idem_resolve(%L, %L, %L)', a.key, a.workflow, 'retry')) AS d) x
 WHERE a.workflow = 'bulk' AND (x.d ~ ('(^|[^0-9a-z_])' || a.token || '([^0-9]|$)')
	OR strpos(x.d, a.reason) > 0 OR x.d LIKE '%hand%');

-- a replay has a record of its own: idem_replay() records who and why,
-- and answers the stored payload the page sends to the gate
GRANT EXECUTE ON FUNCTION idem_replay(text, text, text, text) TO regress_bk_ops;
SELECT idem_fail(k, w, t.token, 'downstream 503', true)
  FROM (VALUES ('r1', 'bulk', '{"order": 1}'::jsonb), ('r2', 'bulk', NULL), ('x3', 'other', '{"order": 3}')) v(k, w, p),
	LATERAL idem_claim_ex(k, w, NULL, NULL, 'run-' || k, p) t;
SELECT outcome FROM idem_claim_ex('r3', 'bulk', NULL, NULL, 'run-r3', '{"order": 3}');
SET ROLE regress_bk_ops;
SELECT idem_replay('r1', 'bulk', 'the sender cannot resend', 'alice');
SELECT action, actor, reason, state_before, state_after FROM idem_gate.history('r1', 'bulk');
-- refused before anything is sent, nothing recorded: no payload kept, a
-- claim in another state (processing, needs_review, completed), no claim,
-- another team's workflow, bad arguments
SELECT bk_detail($$SELECT idem_replay('r2', 'bulk', 'again', 'alice')$$);
SELECT bk_detail($$SELECT idem_replay('r3', 'bulk', 'again', 'alice')$$);
SELECT bk_detail($$SELECT idem_replay('b6', 'bulk', 'again', 'alice')$$);
SELECT bk_detail($$SELECT idem_replay('b4', 'bulk', 'again', 'alice')$$);
SELECT bk_detail($$SELECT idem_replay('b3', 'bulk', 'again', 'alice')$$);
SELECT bk_detail($$SELECT idem_replay('nope', 'bulk', 'again', 'alice')$$);
SELECT bk_detail($$SELECT idem_replay('x3', 'other', 'again', 'alice')$$);
SELECT bk_detail($$SELECT idem_replay(NULL, 'bulk', 'again', 'alice')$$);
SELECT bk_detail($$SELECT idem_replay('r1', '', 'again', 'alice')$$);
RESET ROLE;
-- without EXECUTE: refused
SET ROLE regress_bk_half;
SELECT bk_detail($$SELECT idem_replay('r1', 'bulk', 'again', 'mallory')$$);
RESET ROLE;
SELECT action, key, actor FROM idem_gate.audit WHERE action = 'replay' ORDER BY id;
-- only the known actions can be recorded
SELECT split_part(bk_detail($$INSERT INTO idem_gate.audit (at, session_role, acting_role, action, workflow, key, state_before, token)
	VALUES (now(), current_user, current_user, 'replayed', 'bulk', 'r1', 'failed_retryable', 1)$$), E'\n', 1);
DROP FUNCTION bk_detail(text);

-- the inbox filtered and paged as docs/reference.md shows: by workflow,
-- reason, age and key prefix, in (since, workflow, key) order, each page
-- starting after the last row of the one before; two claims share a since
DELETE FROM idem_gate.claims;
SELECT count(idem_fail(k, w, NULL, 'timeout', false))
  FROM (SELECT k, w, idem_claim(k, w) FROM (VALUES ('p_1', 'pg'), ('p_2', 'pg'), ('p_3', 'pg'),
		('q_1', 'pg'), ('p_4', 'pg2'), ('p_5', 'pg')) v(k, w)) s;
UPDATE idem_gate.claims SET created_at = '2026-01-01', claimed_at = '2026-01-01',
	updated_at = '2026-01-01'::timestamptz + (CASE key WHEN 'p_3' THEN 1 ELSE substr(key, 3)::int END) * interval '1 hour';
CREATE TEMP TABLE pages (page int, key text);
DO $$
DECLARE
	c_since timestamptz := '-infinity';
	c_workflow text := '';
	c_key text := '';
	n int := 0;
	got int;
BEGIN
	LOOP
		n := n + 1;
		INSERT INTO pages
			SELECT n, i.key FROM idem_gate.inbox i
			 WHERE i.workflow = 'pg' AND i.reason = 'needs_review'
			   AND i.since < now() - interval '1 hour' AND i.key LIKE 'p\_%'
			   AND (i.since, i.workflow, i.key) > (c_since, c_workflow, c_key)
			 ORDER BY i.since, i.workflow, i.key LIMIT 2;
		GET DIAGNOSTICS got = ROW_COUNT;
		EXIT WHEN got = 0;
		SELECT i.since, i.workflow, i.key INTO c_since, c_workflow, c_key
		  FROM idem_gate.inbox i JOIN pages p ON p.key = i.key AND p.page = n
		 ORDER BY i.since DESC, i.workflow DESC, i.key DESC LIMIT 1;
	END LOOP;
END $$;
SELECT page, key FROM pages ORDER BY page, key;

-- clean up
DELETE FROM idem_gate.claims;
DELETE FROM idem_gate.workflow_acl WHERE role::text LIKE 'regress_bk_%';
DROP OWNED BY regress_bk_ops, regress_bk_half;
DROP ROLE regress_bk_ops, regress_bk_half;
