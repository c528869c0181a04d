--
-- Hardening in 1.1: each block is a defect of 1.0, reproduced, and must
-- behave as the 1.1 contract says.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idem_gate;
RESET client_min_messages;

CREATE FUNCTION h_try(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	st text; msg text;
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
	RETURN st || ': ' || msg;
END $$;

CREATE ROLE regress_h_client;
CREATE ROLE regress_h_operator;
GRANT USAGE ON SCHEMA idem_gate TO regress_h_client, regress_h_operator;
GRANT EXECUTE ON FUNCTION idem_claim(text, text, interval),
	idem_claim_ex(text, text, interval, text, text),
	idem_complete(text, text, bigint, jsonb),
	idem_fail(text, text, bigint, text, boolean),
	idem_heartbeat(text, text, bigint),
	idem_status(text, text) TO regress_h_client;
GRANT EXECUTE ON FUNCTION idem_gate.janitor_run() TO regress_h_operator;
GRANT CREATE ON SCHEMA public TO regress_h_client, regress_h_operator;

------------------------------------------------------------------------
-- 1. no path to the owner's rights through a DBA trigger
------------------------------------------------------------------------
CREATE TABLE public.audit_log (key text, who name);
-- the trigger writes with the rights of the gate's owner: the superuser
-- who created the extension, or the role that installed the managed edition
GRANT INSERT ON public.audit_log TO PUBLIC;
CREATE FUNCTION public.claims_to_audit_log() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO audit_log VALUES (NEW.key, current_user);
	RETURN NEW;
END $$;
CREATE TRIGGER h_audit AFTER INSERT OR UPDATE OR DELETE ON idem_gate.claims
	FOR EACH ROW EXECUTE FUNCTION public.claims_to_audit_log();

-- the client plants a temporary view with the DBA table's name, whose
-- INSTEAD OF trigger would make it superuser
SET ROLE regress_h_client;
CREATE TEMP TABLE h_dummy (x int);
CREATE TEMP VIEW audit_log AS SELECT NULL::text AS key, NULL::name AS who;
CREATE FUNCTION pg_temp.escalate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	ALTER ROLE regress_h_client SUPERUSER;
	RETURN NULL;
END $$;
CREATE TRIGGER escalate INSTEAD OF INSERT ON audit_log
	FOR EACH ROW EXECUTE FUNCTION pg_temp.escalate();
SELECT h_try($$SELECT idem_claim('h_temp', 'wf')$$);
RESET ROLE;
SELECT rolsuper FROM pg_roles WHERE rolname = 'regress_h_client';
SELECT count(*) AS rows_written FROM idem_gate.claims WHERE key = 'h_temp';

-- the operator's janitor_run() is guarded the same way
SET ROLE regress_h_operator;
CREATE TEMP TABLE h_dummy2 (x int);
SELECT h_try($$SELECT * FROM idem_gate.janitor_run()$$);
RESET ROLE;
\c
-- without temporary objects the trigger runs, with search_path pinned to
-- pg_catalog, pg_temp: an unqualified name no longer resolves ...
SET ROLE regress_h_client;
SELECT h_try($$SELECT idem_claim('h_unqualified', 'wf')$$);
RESET ROLE;
-- ... and a trigger that qualifies its names works, seeing the owner of
-- the gate's functions as current_user
CREATE OR REPLACE FUNCTION public.claims_to_audit_log() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.audit_log VALUES (NEW.key, current_user);
	RETURN NEW;
END $$;
SET ROLE regress_h_client;
SELECT idem_claim('h_qualified', 'wf');
RESET ROLE;
SELECT key, who = (SELECT r.rolname FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner
				   WHERE p.oid = 'idem_claim(text,text,interval)'::regprocedure) AS who_is_owner
  FROM public.audit_log;
DROP TRIGGER h_audit ON idem_gate.claims;
-- the guard holds for a trigger on inserts alone (the claims' writes) and
-- for one on deletes alone (the janitor's and idem_release's)
CREATE FUNCTION public.h_noop() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RETURN NULL;
END $$;
CREATE TRIGGER h_ins AFTER INSERT ON idem_gate.claims
	FOR EACH ROW EXECUTE FUNCTION public.h_noop();
SET ROLE regress_h_client;
CREATE TEMP TABLE h_dummy3 (x int);
SELECT h_try($$SELECT idem_claim('h_insert_only', 'wf')$$);
RESET ROLE;
DROP TRIGGER h_ins ON idem_gate.claims;
CREATE TRIGGER h_del AFTER DELETE ON idem_gate.claims
	FOR EACH ROW EXECUTE FUNCTION public.h_noop();
SET ROLE regress_h_operator;
SELECT h_try($$SELECT * FROM idem_gate.janitor_run()$$);
RESET ROLE;
-- and still when row security applies to the owner of janitor_run() (a
-- role that does not own the tables) through a policy of PostgreSQL's own
-- operators, which has no code to guard: the trigger has
CREATE ROLE regress_h_owner;
GRANT USAGE ON SCHEMA idem_gate TO regress_h_owner;
GRANT ALL ON ALL TABLES IN SCHEMA idem_gate TO regress_h_owner;
GRANT ALL ON ALL SEQUENCES IN SCHEMA idem_gate TO regress_h_owner;
BEGIN;
ALTER FUNCTION idem_gate.janitor_run() OWNER TO regress_h_owner;
ALTER TABLE idem_gate.claims ENABLE ROW LEVEL SECURITY;
CREATE POLICY h_every_row ON idem_gate.claims USING (true);
SET LOCAL ROLE regress_h_operator;
SELECT h_try($$SELECT * FROM idem_gate.janitor_run()$$);
ROLLBACK;
DROP TRIGGER h_del ON idem_gate.claims;
-- a policy that calls code, applying to the owner of idem_claim_ex (the
-- same role, which does not own the tables): refused to a session with
-- temporary objects, as a trigger is, before the claim is read or written
CREATE FUNCTION public.h_orders_only(w text) RETURNS boolean
	LANGUAGE sql IMMUTABLE AS $$ SELECT w = 'orders' $$;
BEGIN;
ALTER FUNCTION idem_claim_ex(text, text, interval, text, text) OWNER TO regress_h_owner;
ALTER TABLE idem_gate.claims ENABLE ROW LEVEL SECURITY;
CREATE POLICY h_calls_code ON idem_gate.claims
	USING (public.h_orders_only(workflow)) WITH CHECK (public.h_orders_only(workflow));
SET LOCAL ROLE regress_h_client;
CREATE TEMP TABLE h_dummy4 (x int);
SELECT h_try($$SELECT outcome FROM idem_claim_ex('h_policy', 'orders')$$);
ROLLBACK;
DROP FUNCTION public.h_orders_only(text);
-- a column of a type that is neither PostgreSQL's nor idem_gate's (here a
-- domain whose CHECK calls a function of the DBA's) runs code on every
-- write: refused to a session with temporary objects, as a trigger is
CREATE FUNCTION public.h_short(v text) RETURNS boolean
	LANGUAGE plpgsql IMMUTABLE AS $$ BEGIN RETURN length(v) < 100; END $$;
CREATE DOMAIN public.h_note AS text CHECK (public.h_short(VALUE));
BEGIN;
ALTER TABLE idem_gate.claims ADD COLUMN h_note public.h_note;
SET LOCAL ROLE regress_h_client;
CREATE TEMP TABLE h_dummy5 (x int);
SELECT h_try($$SELECT outcome FROM idem_claim_ex('h_domain', 'orders')$$);
ROLLBACK;
DROP DOMAIN public.h_note;
DROP FUNCTION public.h_short(text);
DROP OWNED BY regress_h_owner;
DROP ROLE regress_h_owner;
\c
DROP FUNCTION public.h_noop();
SELECT count(*) AS rows_written FROM idem_gate.claims WHERE key = 'h_insert_only';

------------------------------------------------------------------------
-- 2. pg_dump keeps the state (the dump and restore itself: test/t/004_dump.pl)
------------------------------------------------------------------------
SELECT c.relname, c.relkind
  FROM pg_extension e, unnest(e.extconfig) AS t(oid)
  JOIN pg_class c ON c.oid = t.oid
 WHERE e.extname = 'idem_gate' ORDER BY 1;

------------------------------------------------------------------------
-- 3. fencing without the NULL-token gap
------------------------------------------------------------------------
SET ROLE regress_h_client;
SELECT outcome FROM idem_claim_ex('h_fence', 'wf');
-- a duplicate delivery without the token cannot complete, fail or heartbeat
SELECT h_try($$SELECT idem_complete('h_fence', 'wf', NULL, '{"forged": true}')$$);
SELECT h_try($$SELECT idem_fail('h_fence', 'wf', NULL, 'forged')$$);
SELECT h_try($$SELECT idem_heartbeat('h_fence', 'wf', NULL)$$);
SELECT state, result FROM idem_status('h_fence', 'wf');
-- the owner's completion, with its token, is the one that counts
SELECT idem_complete('h_fence', 'wf', (SELECT token FROM idem_status('h_fence', 'wf')), '{"by": "owner"}');
SELECT state, result FROM idem_status('h_fence', 'wf');
-- idem_claim hands out no token: 1.0's rule stays for its claims
SELECT idem_claim('h_plain', 'wf');
SELECT idem_complete('h_plain', 'wf', NULL, '{"ok": true}');
-- a retry and a takeover granted by idem_claim_ex require the token too
SELECT idem_claim('h_retry', 'wf');
SELECT idem_fail('h_retry', 'wf', NULL, 'before the side effect', true);
SELECT outcome FROM idem_claim_ex('h_retry', 'wf');
SELECT h_try($$SELECT idem_complete('h_retry', 'wf')$$);
RESET ROLE;

------------------------------------------------------------------------
-- 5. one claim cannot break the alerter
------------------------------------------------------------------------
SET idem_gate.max_key_length = 1000;
SELECT outcome FROM idem_claim_ex(repeat(E'\n', 1000), repeat(E'\x01', 1000));
SELECT outcome FROM idem_claim_ex('h_stuck_2', 'h_stuck');
-- two days old, against a day: the file's other claims, however slowly it
-- runs (ten minutes under debug_discard_caches), are not stuck
UPDATE idem_gate.claims SET created_at = created_at - interval '2 days',
	claimed_at = claimed_at - interval '2 days', updated_at = updated_at - interval '2 days'
 WHERE workflow IN (repeat(E'\x01', 1000), 'h_stuck');
SET idem_gate.stuck_after = '1d';
SET client_min_messages = error;
SELECT alerts FROM idem_gate.janitor_run();
SELECT alerts FROM idem_gate.janitor_run();
RESET client_min_messages;
RESET idem_gate.stuck_after;

------------------------------------------------------------------------
-- 6. stale_interval is a duration of fixed length
------------------------------------------------------------------------
-- one month is 30 days of 24 hours whatever the calendar and the time
-- zone: a claim 720 hours and a second old is stale, one 720 hours less a
-- second old is not (1.0 used the calendar month in the session's time
-- zone, which gets one or the other wrong except after 30-day months
-- without a daylight saving change)
BEGIN;
SELECT outcome FROM idem_claim_ex('h_month_old', 'wf');
SELECT outcome FROM idem_claim_ex('h_month_young', 'wf');
UPDATE idem_gate.claims SET created_at = now() - interval '720:00:01',
	claimed_at = now() - interval '720:00:01',
	updated_at = now() - interval '720:00:01'
 WHERE workflow = 'wf' AND key = 'h_month_old';
UPDATE idem_gate.claims SET created_at = now() - interval '719:59:59',
	claimed_at = now() - interval '719:59:59',
	updated_at = now() - interval '719:59:59'
 WHERE workflow = 'wf' AND key = 'h_month_young';
SELECT outcome FROM idem_claim_ex('h_month_old', 'wf', '1 mon');
SELECT outcome FROM idem_claim_ex('h_month_young', 'wf', '1 mon');
COMMIT;
-- time zones do not matter
SET TimeZone = 'America/New_York';
SELECT outcome FROM idem_claim_ex('h_dst', 'wf');
SELECT outcome FROM idem_claim_ex('h_dst', 'wf', '1 day -23:59:00');
RESET TimeZone;
SELECT h_try($$SELECT idem_claim('h_x', 'wf', '290000 years')$$);
SELECT h_try($$SELECT idem_claim('h_x', 'wf', '1 year -366 days')$$);
-- policies measure the same way
SELECT h_try($$INSERT INTO idem_gate.policies (workflow, retention) VALUES ('h_p', '1 year -366 days')$$);
SELECT h_try($$INSERT INTO idem_gate.policies (workflow, retention) VALUES ('h_p', '290000 years')$$);

------------------------------------------------------------------------
-- 7. claim times are the time of the write
------------------------------------------------------------------------
BEGIN;
SELECT now() AS h_late_began \gset
SELECT pg_sleep(0.5);
SELECT claimed_at > now() + interval '0.4 seconds' AS claimed_late FROM idem_claim_ex('h_late', 'wf');
SELECT pg_sleep(0.5);
SELECT idem_heartbeat('h_late', 'wf', (SELECT token FROM idem_status('h_late', 'wf')));
SELECT updated_at > now() + interval '0.9 seconds' AS heartbeat_moved FROM idem_status('h_late', 'wf');
COMMIT;
-- a claim made late in a transaction is not already stale when it commits:
-- stale after the time since that transaction began, less 0.2 seconds, it
-- is in flight when its age counts from the heartbeat (a second after the
-- start), and stale when it counts from the start, however slowly the
-- server runs
SELECT outcome FROM idem_claim_ex('h_late', 'wf',
	clock_timestamp() - :'h_late_began'::timestamptz - interval '0.2 seconds');

------------------------------------------------------------------------
-- 8. CREATE EXTENSION refuses planted overloads
------------------------------------------------------------------------
SELECT current_database() AS regress_db \gset
CREATE DATABASE regress_h_planted;
\c regress_h_planted
CREATE ROLE regress_h_planter;
CREATE SCHEMA planted;
GRANT CREATE, USAGE ON SCHEMA planted TO regress_h_planter;
SET ROLE regress_h_planter;
CREATE FUNCTION planted.idem_complete(text, text, integer) RETURNS boolean
	LANGUAGE sql AS 'SELECT true';
RESET ROLE;
\set VERBOSITY terse
CREATE EXTENSION idem_gate SCHEMA planted;
\set VERBOSITY default
SELECT count(*) AS idem_gate_installed FROM pg_extension WHERE extname = 'idem_gate';
DROP FUNCTION planted.idem_complete(text, text, integer);
SET client_min_messages = warning;
CREATE EXTENSION idem_gate SCHEMA planted;
RESET client_min_messages;
SELECT extversion FROM pg_extension WHERE extname = 'idem_gate';
\c :regress_db
DROP DATABASE regress_h_planted;
DROP ROLE regress_h_planter;

------------------------------------------------------------------------
-- 10. small holes
------------------------------------------------------------------------
-- a long key of 4-byte characters is our error, not btree's
SET idem_gate.max_key_length = 1000;
SELECT h_try($$SELECT idem_claim(repeat('𝄞', 400), 'wf')$$);
SELECT h_try($$SELECT idem_claim('k', repeat('𝄞', 400))$$);
SELECT outcome FROM idem_claim_ex(repeat('𝄞', 300), 'wf');
RESET idem_gate.max_key_length;
-- empty execution ids and fingerprints are refused
SELECT h_try($$SELECT * FROM idem_claim_ex('h_empty', 'wf', NULL, NULL, '')$$);
SELECT h_try($$SELECT * FROM idem_claim_ex('h_empty', 'wf', NULL, '', NULL)$$);
SELECT count(*) FROM idem_gate.claims WHERE key = 'h_empty';
-- the counters are not public
SELECT has_function_privilege('public', 'idem_gate.stats_counters()', 'EXECUTE') AS public_counters;

------------------------------------------------------------------------
DROP TABLE public.audit_log;
DROP FUNCTION public.claims_to_audit_log();
REVOKE CREATE ON SCHEMA public FROM regress_h_client, regress_h_operator;
DROP OWNED BY regress_h_client, regress_h_operator;
DROP ROLE regress_h_client, regress_h_operator;
