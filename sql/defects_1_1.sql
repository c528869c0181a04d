--
-- The defects of the 1.1 audit (least privilege), each reproduced as it
-- was found and required to behave as 1.2 says.  Numbers are the
-- issue's.  The worker's (2), the alert's (6) and the Citus coordinator's
-- (14) are in test/t/008_defects.pl and test/suites/70_citus.sh, the late
-- receipt's (11) in test/isolation/specs/receipt_late_commit.spec.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idem_gate;
RESET client_min_messages;

CREATE FUNCTION d_try(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	st text; msg text;
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
	RETURN st || ': ' || msg;
END $$;

-- the actors: an operator, a client (EXECUTE on the API, as the README
-- grants n8n), a client that owns a schema of its own
CREATE ROLE regress_d_ops;
CREATE ROLE regress_d_client;
GRANT EXECUTE ON FUNCTION idem_release(text, text, text),
	idem_resolve(text, text, text, jsonb, text) TO regress_d_ops;
GRANT EXECUTE ON FUNCTION idem_claim(text, text, interval),
	idem_claim_ex(text, text, interval, text, text),
	idem_complete(text, text, bigint, jsonb), idem_status(text, text)
	TO regress_d_client;
CREATE SCHEMA regress_d_client AUTHORIZATION regress_d_client;

-- the error with its detail
CREATE FUNCTION d_try_detail(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	st text; msg text; det text;
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
	RETURN st || ': ' || msg || ' / ' || det;
END $$;

-- did an actor gain a right?
CREATE VIEW d_rights AS
SELECT r.rolname, r.rolsuper,
	-- the gate's owner: the extension's, or the managed edition's installing role
	pg_has_role(r.rolname, (SELECT p.proowner FROM pg_proc p WHERE p.oid = 'idem_claim(text,text,interval)'::regprocedure), 'MEMBER') AS owner_member
  FROM pg_roles r WHERE r.rolname LIKE 'regress_d_%' ORDER BY 1;

------------------------------------------------------------------------
-- 1. an operator through a DBA's trigger on idem_gate.audit
------------------------------------------------------------------------
CREATE TABLE public.d_siem_log (action text, wf text, key text);
-- the trigger writes with the rights of the gate's owner: the superuser
-- who created the extension, or the role that installed the managed edition
GRANT INSERT ON public.d_siem_log TO PUBLIC;
CREATE FUNCTION public.d_audit_forward() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO d_siem_log VALUES (NEW.action, NEW.workflow, NEW.key);  -- unqualified
	RETURN NEW;
END $$;
CREATE TRIGGER d_audit_forward AFTER INSERT ON idem_gate.audit
	FOR EACH ROW EXECUTE FUNCTION public.d_audit_forward();
SELECT idem_claim('d1', 'orders');
SET ROLE regress_d_ops;
CREATE FUNCTION pg_temp.pwn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	ALTER ROLE regress_d_ops SUPERUSER;
	RETURN NEW;
END $$;
CREATE TEMP VIEW d_siem_log AS SELECT ''::text AS action, ''::text AS wf, ''::text AS key;
CREATE TRIGGER pwn INSTEAD OF INSERT ON pg_temp.d_siem_log
	FOR EACH ROW EXECUTE FUNCTION pg_temp.pwn();
SELECT d_try($$SELECT idem_release('d1', 'orders', 'routine')$$);
SELECT d_try($$SELECT idem_resolve('d1', 'orders', 'retry')$$);
RESET ROLE;
SELECT * FROM d_rights;
SELECT state FROM idem_gate.claims WHERE key = 'd1';
\c
-- without temporary objects the trigger runs, search_path pinned
SET ROLE regress_d_ops;
SELECT d_try($$SELECT idem_release('d1', 'orders', 'routine')$$);
RESET ROLE;
CREATE OR REPLACE FUNCTION public.d_audit_forward() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.d_siem_log VALUES (NEW.action, NEW.workflow, NEW.key);
	RETURN NEW;
END $$;
SET ROLE regress_d_ops;
SELECT idem_release('d1', 'orders', 'routine');
RESET ROLE;
SELECT * FROM public.d_siem_log;
DROP TRIGGER d_audit_forward ON idem_gate.audit;

------------------------------------------------------------------------
-- 3. a client through a DBA's expression index, with its own split_part
-- (PL/pgSQL, which resolves names when it runs: an inlinable LANGUAGE sql
-- function is refused since 1.3, see isolation_1_2.sql)
------------------------------------------------------------------------
CREATE FUNCTION public.d_key_prefix(k text) RETURNS text
	LANGUAGE plpgsql IMMUTABLE AS $$ BEGIN RETURN split_part(k, '_', 1); END $$;
CREATE INDEX d_claims_by_prefix ON idem_gate.claims (public.d_key_prefix(key));
SET ROLE regress_d_client;
CREATE FUNCTION regress_d_client.split_part(text, text, integer) RETURNS text
	LANGUAGE plpgsql AS $$
BEGIN
	ALTER ROLE regress_d_client SUPERUSER;
	RETURN 'x';
END $$;
SET search_path = regress_d_client, pg_catalog, public;
SELECT idem_claim('d3_evt', 'orders');
SELECT outcome FROM idem_claim_ex('d3_evt2', 'orders');
RESET search_path;
RESET ROLE;
SELECT * FROM d_rights;
SELECT public.d_key_prefix(key) FROM idem_gate.claims WHERE key LIKE 'd3%' ORDER BY 1;
DROP INDEX idem_gate.d_claims_by_prefix;
-- a partial index's predicate, likewise
CREATE FUNCTION public.d_is_order(w text) RETURNS boolean
	LANGUAGE plpgsql IMMUTABLE AS $$ BEGIN RETURN starts_with(w, 'orders'); END $$;
CREATE INDEX d_claims_orders ON idem_gate.claims (key) WHERE public.d_is_order(workflow);
SET ROLE regress_d_client;
CREATE FUNCTION regress_d_client.starts_with(text, text) RETURNS boolean
	LANGUAGE plpgsql AS $$
BEGIN
	ALTER ROLE regress_d_client SUPERUSER;
	RETURN true;
END $$;
SET search_path = regress_d_client, pg_catalog, public;
SELECT idem_claim('d3_evt3', 'orders');
RESET search_path;
RESET ROLE;
SELECT * FROM d_rights;
DROP INDEX idem_gate.d_claims_orders;

------------------------------------------------------------------------
-- 4. a DBA's child table of idem_gate.claims
------------------------------------------------------------------------
CREATE TABLE public.d_claims_history () INHERITS (idem_gate.claims);
INSERT INTO public.d_claims_history (workflow, key, state, attempt, token, created_at,
	claimed_at, updated_at, completed_at, token_issued)
SELECT 'd4', 'old_' || i, 'completed', 1, 1000000 + i, now() - '2 days'::interval,
	now() - '2 days'::interval, now() - '2 days'::interval, now() - '2 days'::interval, false
FROM generate_series(1, 100) i;
SELECT count(*) FROM (SELECT idem_claim('live_' || i, 'd4') FROM generate_series(1, 20) i) s;
SELECT count(*) FROM (SELECT idem_complete('live_' || i, 'd4', NULL, '{"ch": 1}') FROM generate_series(1, 20) i) s;
SET idem_gate.retention = '1d';
SELECT deleted FROM idem_gate.janitor_run();
RESET idem_gate.retention;
SELECT o AS redelivery, count(*) FROM (SELECT idem_claim('live_' || i, 'd4')::text o
	FROM generate_series(1, 20) i) s GROUP BY 1;
SELECT count(*) AS child_rows_kept FROM public.d_claims_history;
-- the stuck step: fresh claims are not escalated for a child's old row
DELETE FROM public.d_claims_history;
INSERT INTO public.d_claims_history (workflow, key, state, attempt, token, created_at,
	claimed_at, updated_at, token_issued)
SELECT 'd4s', 'old_' || i, 'processing', 1, 2000000 + i, now() - '2 days'::interval,
	now() - '2 days'::interval, now() - '2 days'::interval, false
FROM generate_series(1, 10) i;
SELECT count(*) FROM (SELECT idem_claim('new_' || i, 'd4s') FROM generate_series(1, 10) i) s;
SET idem_gate.stuck_after = '1h';
SET idem_gate.stuck_action = 'review';
SELECT alerts, escalated FROM idem_gate.janitor_run();
RESET idem_gate.stuck_after;
RESET idem_gate.stuck_action;
SELECT state, count(*) FROM ONLY idem_gate.claims WHERE workflow = 'd4s' GROUP BY 1;
-- an operator's release and status reach the extension's rows only
SELECT idem_release('old_1', 'd4s') AS released_a_childs_row;
SELECT count(*) AS status_of_a_childs_row FROM idem_status('old_1', 'd4s');
DROP TABLE public.d_claims_history;

------------------------------------------------------------------------
-- 5. rules on idem_gate.claims: refused, never silently skipped
------------------------------------------------------------------------
CREATE TABLE public.d_claim_log (op text, key text);
CREATE RULE d_log_ins AS ON INSERT TO idem_gate.claims
	DO ALSO INSERT INTO public.d_claim_log VALUES ('insert', NEW.key);
SELECT d_try($$SELECT idem_claim('d5', 'w')$$);
SET idem_gate.direct_writes = off;
SELECT d_try($$SELECT idem_claim('d5', 'w')$$);
RESET idem_gate.direct_writes;
DROP RULE d_log_ins ON idem_gate.claims;
SELECT token AS d5_token FROM idem_claim_ex('d5', 'w') \gset
CREATE RULE d_frozen AS ON UPDATE TO idem_gate.claims DO INSTEAD NOTHING;
SELECT d_try($$SELECT idem_complete('d5', 'w', $$ || :d5_token || $$)$$);
SELECT d_try($$SELECT idem_heartbeat('d5', 'w', $$ || :d5_token || $$)$$);
SELECT outcome FROM idem_claim_ex('d5', 'w');   -- reads are answered
SELECT d_try($$SELECT * FROM idem_gate.janitor_run()$$);
DROP RULE d_frozen ON idem_gate.claims;
SELECT key, state FROM idem_gate.claims WHERE key = 'd5';
SELECT count(*) AS logged FROM public.d_claim_log;
DROP TABLE public.d_claim_log;
-- a token sequence that could repeat a token, likewise
ALTER SEQUENCE idem_gate.token_seq CYCLE;
SELECT d_try($$SELECT idem_claim('d5_cycle', 'w')$$);
ALTER SEQUENCE idem_gate.token_seq NO CYCLE;
SELECT idem_claim('d5_cycle', 'w');

------------------------------------------------------------------------
-- 7. sync_token_seq() after a switch-over: past released tokens too
------------------------------------------------------------------------
SELECT token AS d7_token FROM idem_claim_ex('d7', 'w', NULL, NULL, 'run-A') \gset
SELECT idem_release('d7', 'w', 'looks stuck');
-- the new server's sequence starts low, as logical replication leaves it
SELECT setval('idem_gate.token_seq', 1);
SELECT idem_gate.sync_token_seq() > :d7_token AS next_token_past_the_released_one;
SELECT token > :d7_token AS run_b_token_is_new FROM idem_claim_ex('d7', 'w', NULL, NULL, 'run-B');
SELECT regexp_replace(d_try($$SELECT idem_complete('d7', 'w', $$ || :d7_token || $$)$$),
	'\d+', 'N', 'g') AS old_run_refused;

------------------------------------------------------------------------
-- 8. per-workflow access: _ is literal, and reads are filtered
------------------------------------------------------------------------
SET idem_gate.workflow_acl = on;
CREATE ROLE regress_d_orders;
GRANT USAGE ON SCHEMA idem_gate TO regress_d_orders;
GRANT EXECUTE ON FUNCTION idem_claim_ex(text, text, interval, text, text),
	idem_fail(text, text, bigint, text, boolean), idem_status(text, text) TO regress_d_orders;
GRANT SELECT (workflow, key, token, state, execution_id) ON idem_gate.claims TO regress_d_orders;
GRANT SELECT ON idem_gate.workflow_stats TO regress_d_orders;
SELECT idem_gate.grant_workflow('regress_d_orders', 'orders_%');
SELECT outcome FROM idem_claim_ex('emp_4711', 'ordersecret_payroll', NULL, NULL, 'payroll-7');
SELECT outcome FROM idem_claim_ex('ord_1', 'orders_eu', NULL, NULL, 'orders-1');
SET ROLE regress_d_orders;
SELECT d_try($$SELECT * FROM idem_status('emp_4711', 'ordersecret_payroll')$$);
SELECT d_try($$SELECT idem_fail('emp_4711', 'ordersecret_payroll', 1, 'sabotage', false)$$);
SELECT key, state FROM idem_status('ord_1', 'orders_eu');
SELECT DISTINCT workflow FROM idem_gate.claims ORDER BY 1;
SELECT workflow FROM idem_gate.workflow_stats ORDER BY 1;
RESET ROLE;
SELECT state FROM idem_gate.claims WHERE key = 'emp_4711';
-- escapes: \% is a literal %, \\ a literal backslash; a lone one is refused
SELECT idem_gate.grant_workflow('regress_d_orders', 'pct\%off');
SELECT d_try($$SELECT idem_gate.grant_workflow('regress_d_orders', 'a\b')$$);
SELECT outcome FROM idem_claim_ex('p1', 'pct%off');
SELECT outcome FROM idem_claim_ex('p2', 'pctXoff');
SET ROLE regress_d_orders;
SELECT DISTINCT workflow FROM idem_gate.claims ORDER BY 1;
RESET ROLE;

------------------------------------------------------------------------
-- 9. a CHECK tightened under the extension's name is enforced
------------------------------------------------------------------------
ALTER TABLE idem_gate.claims DROP CONSTRAINT claims_key_not_empty,
	ADD CONSTRAINT claims_key_not_empty CHECK (pg_catalog.btrim(key) <> '');
SELECT d_try($$SELECT idem_claim('   ', 'w')$$);
ALTER TABLE idem_gate.claims DROP CONSTRAINT claims_key_not_empty,
	ADD CONSTRAINT claims_key_not_empty CHECK (key OPERATOR(pg_catalog.<>) '');
-- back as the extension made it: the direct path again, by definition
SELECT sql_fallbacks AS before FROM idem_gate.stats \gset
SELECT idem_claim('d9_direct', 'w');
SELECT sql_fallbacks - :before AS fallbacks FROM idem_gate.stats;
SELECT count(*) FROM idem_gate.claims WHERE btrim(key) = '';

------------------------------------------------------------------------
-- 10. the stale-token error names no token
------------------------------------------------------------------------
SELECT token AS d10_token FROM idem_claim_ex('d10', 'stripe', NULL, NULL, 'run-41') \gset
SELECT outcome, token FROM idem_claim_ex('d10', 'stripe', NULL, NULL, 'run-42');
SELECT d_try_detail($$SELECT idem_complete('d10', 'stripe', 0)$$) AS message;
SELECT d_try_detail($$SELECT idem_complete('d10', 'stripe', 0)$$) ~ ('\m' || :'d10_token' || '\M') AS owner_token_shown;

------------------------------------------------------------------------
-- 12. the probe honours row level security, as the SQL path does
------------------------------------------------------------------------
RESET idem_gate.workflow_acl;
CREATE ROLE regress_d_owner;
GRANT USAGE ON SCHEMA idem_gate TO regress_d_owner;
GRANT SELECT, INSERT, UPDATE, DELETE ON idem_gate.claims TO regress_d_owner;
GRANT USAGE ON SEQUENCE idem_gate.token_seq TO regress_d_owner;
SELECT idem_claim('emp_1', 'payroll');
SELECT idem_complete('emp_1', 'payroll', NULL, '{"iban": "DE89"}');
ALTER FUNCTION idem_claim_ex(text, text, interval, text, text) OWNER TO regress_d_owner;
ALTER FUNCTION idem_status(text, text) OWNER TO regress_d_owner;
CREATE POLICY d_only_orders ON idem_gate.claims AS RESTRICTIVE TO regress_d_owner
	USING (workflow = 'orders') WITH CHECK (workflow = 'orders');
SELECT count(*) AS status_rows FROM idem_status('emp_1', 'payroll');
SELECT d_try($$SELECT * FROM idem_claim_ex('emp_1', 'payroll')$$);
SELECT outcome FROM idem_claim_ex('o_12', 'orders');
SELECT outcome FROM idem_claim_ex('o_12', 'orders');
SET idem_gate.direct_writes = off;
SELECT d_try($$SELECT * FROM idem_claim_ex('emp_1', 'payroll')$$);
RESET idem_gate.direct_writes;
DROP POLICY d_only_orders ON idem_gate.claims;
ALTER FUNCTION idem_claim_ex(text, text, interval, text, text) OWNER TO CURRENT_USER;
ALTER FUNCTION idem_status(text, text) OWNER TO CURRENT_USER;
SELECT outcome, result FROM idem_claim_ex('emp_1', 'payroll');

------------------------------------------------------------------------
-- 13. delegated administration of per-workflow access
------------------------------------------------------------------------
CREATE ROLE regress_d_admin;
CREATE ROLE regress_d_app;
GRANT USAGE ON SCHEMA idem_gate TO regress_d_admin;
GRANT EXECUTE ON FUNCTION idem_gate.grant_workflow(name, text),
	idem_gate.revoke_workflow(name, text) TO regress_d_admin;
SELECT idem_gate.grant_workflow('regress_d_admin', 'orders_%');
SET ROLE regress_d_admin;
SELECT idem_gate.grant_workflow('regress_d_app', 'orders_%');
SELECT idem_gate.grant_workflow('regress_d_app', 'orders_eu_%');
SELECT d_try($$SELECT idem_gate.grant_workflow('regress_d_app', 'payroll')$$);
SELECT d_try($$SELECT idem_gate.grant_workflow('regress_d_app', 'orders%')$$);
SELECT d_try($$SELECT idem_gate.grant_workflow('regress_d_app', '%')$$);
SELECT idem_gate.revoke_workflow('regress_d_app', 'orders_eu_%');
RESET ROLE;
SELECT role::text, pattern FROM idem_gate.workflow_acl WHERE role::text LIKE 'regress_d_%' ORDER BY 1, 2;

------------------------------------------------------------------------
SELECT * FROM d_rights;
DROP VIEW d_rights;
DROP FUNCTION d_try(text), d_try_detail(text);
DROP TABLE public.d_siem_log;
DROP FUNCTION public.d_audit_forward(), public.d_key_prefix(text), public.d_is_order(text);
DELETE FROM idem_gate.workflow_acl WHERE role::text LIKE 'regress_d_%';
DROP SCHEMA regress_d_client CASCADE;
DROP OWNED BY regress_d_ops, regress_d_client, regress_d_orders, regress_d_owner,
	regress_d_admin, regress_d_app;
DROP ROLE regress_d_ops, regress_d_client, regress_d_orders, regress_d_owner,
	regress_d_admin, regress_d_app;
