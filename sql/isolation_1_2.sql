--
-- Isolation that no session state can switch off (1.3): the defects of
-- the 1.2 review, each as its reproduction showed it.  On 1.2 this file
-- shows other workflows' rows to roles granted only 'orders', and the
-- client becomes superuser.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idem_gate;
RESET client_min_messages;
DELETE FROM idem_gate.claims;
DELETE FROM idem_gate.policies;
SELECT current_user AS su \gset

-- the README's roles: an n8n client, the inbox's operator role and a
-- person who is a member of it, and a monitoring role
CREATE ROLE regress_i_n8n LOGIN;
CREATE ROLE regress_i_inbox LOGIN;
CREATE ROLE regress_i_alice LOGIN IN ROLE regress_i_inbox;
CREATE ROLE regress_i_bob LOGIN NOINHERIT IN ROLE regress_i_inbox;
CREATE ROLE regress_i_mon LOGIN;
GRANT USAGE ON SCHEMA idem_gate TO regress_i_n8n, regress_i_inbox, regress_i_mon;
GRANT EXECUTE ON FUNCTION
	idem_claim_ex(text, text, interval, text, text),
	idem_claim_ex(text, text, interval, text, text, jsonb),
	idem_complete(text, text, bigint, jsonb),
	idem_fail(text, text, bigint, text, boolean),
	idem_status(text, text)
	TO regress_i_n8n;
GRANT SELECT (workflow, key, token, state, execution_id) ON idem_gate.claims TO regress_i_n8n;
ALTER ROLE regress_i_n8n SET idem_gate.workflow_acl = on;
SELECT idem_gate.grant_workflow('regress_i_n8n', 'orders');
GRANT SELECT ON idem_gate.inbox TO regress_i_inbox;
GRANT EXECUTE ON FUNCTION
	idem_gate.history(text, text),
	idem_resolve(text, text, text, jsonb, text, text),
	idem_release(text, text, text, text),
	idem_status(text, text)
	TO regress_i_inbox;
ALTER ROLE regress_i_inbox SET idem_gate.workflow_acl = on;
SELECT idem_gate.grant_workflow('regress_i_inbox', 'orders');
GRANT SELECT ON idem_gate.workflow_stats TO regress_i_mon;
ALTER ROLE regress_i_mon SET idem_gate.workflow_acl = on;
SELECT idem_gate.grant_workflow('regress_i_mon', 'orders');

-- one claim in review in each of two workflows, one open payroll claim
SELECT idem_fail(k, w, (SELECT token FROM idem_claim_ex(k, w, NULL, NULL, 'run-1', p)), e, false)
  FROM (VALUES ('o-1', 'orders', '{"order": 1}'::jsonb, 'timeout'),
			   ('emp-4711', 'payroll', '{"iban": "DE89"}', 'bank rejected')) v(k, w, p, e)
 ORDER BY k;
SELECT outcome FROM idem_claim_ex('emp-4712', 'payroll', NULL, NULL, 'run-2');

------------------------------------------------------------------------
-- 01: a cheap function in the reader's WHERE sees only what the view
-- would show (every view is a security barrier)
------------------------------------------------------------------------
\c - regress_i_inbox
CREATE FUNCTION pg_temp.leak(w text, k text, p jsonb, e text) RETURNS boolean
	LANGUAGE plpgsql IMMUTABLE COST 0.0000001
	AS $$ BEGIN RAISE NOTICE 'saw % % % %', w, k, p, e; RETURN true; END $$;
SELECT workflow FROM idem_gate.inbox WHERE pg_temp.leak(workflow, key, payload, last_error);
-- a leakproof qual still reaches the view: an indexed filter stays cheap
SELECT workflow, key FROM idem_gate.inbox WHERE workflow = 'orders';
\c - regress_i_mon
CREATE FUNCTION pg_temp.leak(w text) RETURNS boolean
	LANGUAGE plpgsql IMMUTABLE COST 0.0000001
	AS $$ BEGIN RAISE NOTICE 'saw workflow %', w; RETURN true; END $$;
SELECT workflow FROM idem_gate.workflow_stats WHERE pg_temp.leak(workflow);
\c - :su
SELECT c.relname, c.reloptions FROM pg_class c
 WHERE c.relnamespace = 'idem_gate'::regnamespace AND c.relkind = 'v' ORDER BY 1;

------------------------------------------------------------------------
-- 02: a gate call that fails, in a savepoint, an EXCEPTION block or a
-- procedure, leaves per-workflow filtering on
------------------------------------------------------------------------
\c - regress_i_n8n
SHOW idem_gate.workflow_acl;
BEGIN;
SAVEPOINT s;
SELECT idem_complete('no-such-key', 'orders', 1, NULL);
ROLLBACK TO SAVEPOINT s;
SELECT workflow, key FROM idem_gate.claims ORDER BY 1, 2;
SAVEPOINT s2;
SELECT * FROM idem_status('emp-4711', 'payroll');
ROLLBACK TO SAVEPOINT s2;
SELECT workflow, key FROM idem_gate.claims ORDER BY 1, 2;
ROLLBACK;
BEGIN;
DO $$
BEGIN
	PERFORM idem_complete('no-such-key', 'orders', 1, NULL);
EXCEPTION WHEN OTHERS THEN
	RAISE NOTICE 'the call failed: %', SQLSTATE;
END $$;
SELECT workflow, key FROM idem_gate.claims ORDER BY 1, 2;
ROLLBACK;
CREATE PROCEDURE pg_temp.try_call() LANGUAGE plpgsql AS $$
BEGIN
	PERFORM idem_complete('no-such-key', 'orders', 1, NULL);
EXCEPTION WHEN OTHERS THEN
	RAISE NOTICE 'the call failed: %', SQLSTATE;
END $$;
BEGIN;
CALL pg_temp.try_call();
SELECT workflow, key FROM idem_gate.claims ORDER BY 1, 2;
ROLLBACK;
\c - regress_i_inbox
BEGIN;
SAVEPOINT s;
SELECT * FROM idem_status('emp-4711', 'payroll');
ROLLBACK TO SAVEPOINT s;
SELECT workflow, key FROM idem_gate.inbox ORDER BY 1, 2;
ROLLBACK;

------------------------------------------------------------------------
-- 07: a member of the operator role that logs in as itself is restricted
-- like the role; a NOINHERIT member gets nothing of the role
------------------------------------------------------------------------
\c - regress_i_alice
SHOW idem_gate.workflow_acl;
SELECT workflow, key FROM idem_gate.inbox ORDER BY 1, 2;
SELECT idem_release('emp-4711', 'payroll', 'member of the inbox role', 'alice');
SELECT * FROM idem_gate.history('emp-4711', 'payroll');
SELECT * FROM idem_status('emp-4711', 'payroll');
SELECT state FROM idem_status('o-1', 'orders');
\c - regress_i_bob
SELECT workflow FROM idem_gate.inbox;
SET ROLE regress_i_inbox;
SELECT workflow, key FROM idem_gate.inbox ORDER BY 1, 2;
RESET ROLE;
\c - :su
SELECT key, state FROM idem_gate.claims ORDER BY key;

------------------------------------------------------------------------
-- 08: an index whose LANGUAGE sql function was inlined into the caller's
-- relation cache under the caller's search_path: refused, never run as the
-- owner; a function with its own path, or a BEGIN ATOMIC body, works
------------------------------------------------------------------------
CREATE FUNCTION public.i_key_prefix(k text) RETURNS text
	LANGUAGE sql IMMUTABLE AS $$ SELECT split_part(k, '_', 1) $$;
CREATE INDEX i_claims_by_prefix ON idem_gate.claims (public.i_key_prefix(key));
CREATE SCHEMA regress_i_n8n AUTHORIZATION regress_i_n8n;
\c - regress_i_n8n
CREATE FUNCTION regress_i_n8n.pwn() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	BEGIN EXECUTE 'ALTER ROLE regress_i_n8n SUPERUSER'; EXCEPTION WHEN OTHERS THEN NULL; END;
	RETURN 'x';
END $$;
CREATE FUNCTION regress_i_n8n.split_part(text, text, integer) RETURNS text
	LANGUAGE plpgsql IMMUTABLE AS $$ BEGIN RETURN regress_i_n8n.pwn(); END $$;
SET search_path = regress_i_n8n, pg_catalog, public;
-- planned and run under the client's path (as the client, which may read its
-- own workflow's keys): that fills the index's expressions in this backend's
-- relation cache
SELECT 1 FROM idem_gate.claims WHERE public.i_key_prefix(key) = 'x';
RESET search_path;
SELECT outcome FROM idem_claim_ex('o_2', 'orders', NULL, NULL, 'run-3');
\c - :su
SELECT rolsuper FROM pg_roles WHERE rolname = 'regress_i_n8n';
SELECT count(*) FROM idem_gate.claims WHERE key = 'o_2';
-- the same for a partial index's predicate, and for a domain's CHECK
DROP INDEX idem_gate.i_claims_by_prefix;
CREATE FUNCTION public.i_is_order(w text) RETURNS boolean
	LANGUAGE sql IMMUTABLE AS $$ SELECT starts_with(w, 'orders') $$;
CREATE INDEX i_claims_orders ON idem_gate.claims (key) WHERE public.i_is_order(workflow);
SELECT outcome FROM idem_claim_ex('o_3', 'orders', NULL, NULL, 'run-3');
DROP INDEX idem_gate.i_claims_orders;
CREATE DOMAIN public.i_note AS text CHECK (public.i_is_order(VALUE));
ALTER TABLE idem_gate.claims ADD COLUMN i_note public.i_note;
SELECT outcome FROM idem_claim_ex('o_3', 'orders', NULL, NULL, 'run-3');
ALTER TABLE idem_gate.claims DROP COLUMN i_note;
-- through a BEGIN ATOMIC body that calls such a function
CREATE FUNCTION public.i_atomic(k text) RETURNS text LANGUAGE sql IMMUTABLE
	BEGIN ATOMIC SELECT public.i_key_prefix(k); END;
CREATE INDEX i_claims_atomic ON idem_gate.claims (public.i_atomic(key));
SELECT outcome FROM idem_claim_ex('o_3', 'orders', NULL, NULL, 'run-3');
DROP INDEX idem_gate.i_claims_atomic;
DROP FUNCTION public.i_atomic(text);
-- however deep the BEGIN ATOMIC bodies: a chain of 40, each calling the
-- one before, the first calling such a function
DO $$
BEGIN
	EXECUTE 'CREATE FUNCTION public.i_chain_1(k text) RETURNS text LANGUAGE sql IMMUTABLE
		BEGIN ATOMIC SELECT public.i_key_prefix(k); END';
	FOR i IN 2..40 LOOP
		EXECUTE format('CREATE FUNCTION public.i_chain_%s(k text) RETURNS text LANGUAGE sql IMMUTABLE
			BEGIN ATOMIC SELECT public.i_chain_%s(k); END', i, i - 1);
	END LOOP;
END $$;
CREATE INDEX i_claims_chain ON idem_gate.claims (public.i_chain_40(key));
SELECT outcome FROM idem_claim_ex('o_3', 'orders', NULL, NULL, 'run-3');
DROP INDEX idem_gate.i_claims_chain;
-- a body is walked whole: its WHERE clause too
CREATE FUNCTION public.i_atomic_where(k text) RETURNS text LANGUAGE sql IMMUTABLE
	BEGIN ATOMIC SELECT k WHERE public.i_is_order(k); END;
CREATE INDEX i_claims_where ON idem_gate.claims (public.i_atomic_where(key));
SELECT outcome FROM idem_claim_ex('o_3', 'orders', NULL, NULL, 'run-3');
DROP INDEX idem_gate.i_claims_where;
DROP FUNCTION public.i_atomic_where(text);
-- a domain of a table's first column counts (the grants' role), and so
-- does the partition key of a table that the claims are a partition of
CREATE FUNCTION public.i_role_ok(r regrole) RETURNS boolean
	LANGUAGE sql IMMUTABLE AS $$ SELECT r IS NOT NULL $$;
CREATE DOMAIN public.i_role AS regrole CHECK (public.i_role_ok(VALUE));
ALTER TABLE idem_gate.workflow_acl ALTER COLUMN role TYPE public.i_role;
SELECT idem_gate.grant_workflow('regress_i_n8n', 'orders_%');
ALTER TABLE idem_gate.workflow_acl ALTER COLUMN role TYPE regrole;
DROP DOMAIN public.i_role;
DROP FUNCTION public.i_role_ok(regrole);
CREATE TABLE public.i_all_claims (LIKE idem_gate.claims) PARTITION BY LIST ((public.i_is_order(workflow)));
CREATE TABLE public.i_kept AS SELECT * FROM idem_gate.claims WHERE NOT public.i_is_order(workflow);
DELETE FROM idem_gate.claims WHERE NOT public.i_is_order(workflow);
ALTER TABLE public.i_all_claims ATTACH PARTITION idem_gate.claims FOR VALUES IN (true);
SELECT outcome FROM idem_claim_ex('o_3', 'orders', NULL, NULL, 'run-3');
ALTER TABLE public.i_all_claims DETACH PARTITION idem_gate.claims;
DROP TABLE public.i_all_claims;
INSERT INTO idem_gate.claims SELECT * FROM public.i_kept;
DROP TABLE public.i_kept;
-- and bodies that call each other (one replaced to call the other)
-- are walked once each: none calls such a function, so the write is done
CREATE FUNCTION public.i_ring_a(k text) RETURNS text LANGUAGE sql IMMUTABLE
	BEGIN ATOMIC SELECT pg_catalog.upper(k); END;
CREATE FUNCTION public.i_ring_b(k text) RETURNS text LANGUAGE sql IMMUTABLE
	BEGIN ATOMIC SELECT public.i_ring_a(k); END;
CREATE OR REPLACE FUNCTION public.i_ring_a(k text) RETURNS text LANGUAGE sql IMMUTABLE
	BEGIN ATOMIC SELECT CASE WHEN k = '' THEN public.i_ring_b(k) ELSE pg_catalog.upper(k) END; END;
CREATE INDEX i_claims_ring ON idem_gate.claims (public.i_ring_b(key));
SELECT outcome FROM idem_claim_ex('o_ring', 'orders', NULL, NULL, 'run-3');
SELECT public.i_ring_b(key) FROM idem_gate.claims WHERE key = 'o_ring';
DROP INDEX idem_gate.i_claims_ring;
DELETE FROM idem_gate.claims WHERE key = 'o_ring';
DROP FUNCTION public.i_ring_a(text), public.i_ring_b(text);
DO $$
BEGIN
	FOR i IN REVERSE 40..1 LOOP
		EXECUTE format('DROP FUNCTION public.i_chain_%s(text)', i);
	END LOOP;
END $$;
-- with their own path, or as BEGIN ATOMIC, the same code is accepted
ALTER FUNCTION public.i_key_prefix(text) SET search_path = pg_catalog, public;
CREATE INDEX i_claims_by_prefix ON idem_gate.claims (public.i_key_prefix(key));
CREATE FUNCTION public.i_prefix_atomic(k text) RETURNS text LANGUAGE sql IMMUTABLE
	BEGIN ATOMIC SELECT pg_catalog.split_part(k, '_', 1); END;
CREATE INDEX i_claims_by_atomic ON idem_gate.claims (public.i_prefix_atomic(key));
\c - regress_i_n8n
SET search_path = regress_i_n8n, pg_catalog, public;
SELECT 1 FROM idem_gate.claims WHERE public.i_key_prefix(key) = 'x';
RESET search_path;
SELECT outcome FROM idem_claim_ex('o_4', 'orders', NULL, NULL, 'run-4');
\c - :su
SELECT rolsuper FROM pg_roles WHERE rolname = 'regress_i_n8n';
SELECT public.i_key_prefix(key), public.i_prefix_atomic(key) FROM idem_gate.claims WHERE key = 'o_4';
DROP INDEX idem_gate.i_claims_by_prefix, idem_gate.i_claims_by_atomic;
-- an accepted function does not hide the next one: an expression that
-- calls one with its own path, then one parsed late, is refused
CREATE INDEX i_claims_both ON idem_gate.claims
	((public.i_key_prefix(key) || public.i_is_order(workflow)::text));
SELECT outcome FROM idem_claim_ex('o_4b', 'orders');
DROP INDEX idem_gate.i_claims_both;
-- a function replaced later is judged again: PL/pgSQL is accepted, the
-- same name made an inlinable SQL function is refused at the next write,
-- and so is a domain's CHECK added to a column's domain
CREATE FUNCTION public.i_late(k text) RETURNS text LANGUAGE plpgsql IMMUTABLE
	AS $$ BEGIN RETURN split_part(k, '_', 1); END $$;
CREATE INDEX i_claims_late ON idem_gate.claims (public.i_late(key));
SELECT outcome FROM idem_claim_ex('o_5', 'orders');
CREATE OR REPLACE FUNCTION public.i_late(k text) RETURNS text LANGUAGE sql IMMUTABLE
	AS $$ SELECT split_part(k, '_', 1) $$;
SELECT outcome FROM idem_claim_ex('o_6', 'orders');
DROP INDEX idem_gate.i_claims_late;
DROP FUNCTION public.i_late(text);
CREATE DOMAIN public.i_plain AS text;
ALTER TABLE idem_gate.claims ADD COLUMN i_plain public.i_plain;
SELECT outcome FROM idem_claim_ex('o_7', 'orders');
ALTER DOMAIN public.i_plain ADD CONSTRAINT i_plain_order CHECK (public.i_is_order(VALUE));
SELECT outcome FROM idem_claim_ex('o_8', 'orders');
ALTER TABLE idem_gate.claims DROP COLUMN i_plain;
DROP DOMAIN public.i_plain;

------------------------------------------------------------------------
-- 09: a call that fails while the gate reads what it keeps per session
-- (here it waits past lock_timeout for a lock that a prepared transaction
-- holds, and the error is caught or not) leaves nothing half read: the
-- next call reads it all again
------------------------------------------------------------------------
-- the claims table's shape, in a new session: the code attached to it is
-- still found and refused
CREATE INDEX i_claims_orders ON idem_gate.claims (key) WHERE public.i_is_order(workflow);
\c - :su
BEGIN;
LOCK idem_gate.claims IN ACCESS EXCLUSIVE MODE;
PREPARE TRANSACTION 'regress_i_hold';
SET lock_timeout = '10ms';
-- (planning a call of a function that takes no key, its first argument
-- NULL, does not read the table's shape: it answers its own error)
SELECT idem_key(NULL, 'x');
SELECT outcome FROM idem_claim_ex('o_9', 'orders');
RESET lock_timeout;
COMMIT PREPARED 'regress_i_hold';
SELECT outcome FROM idem_claim_ex('o_9', 'orders');
DROP INDEX idem_gate.i_claims_orders;
-- the workflows a role was granted, in a new session: the client still
-- uses its own
\c - :su
BEGIN;
LOCK idem_gate.workflow_acl IN ACCESS EXCLUSIVE MODE;
PREPARE TRANSACTION 'regress_i_hold';
SET ROLE regress_i_n8n;
SET lock_timeout = '10ms';
DO $$
BEGIN
	PERFORM idem_claim_ex('o_9', 'orders', NULL, NULL, 'run-9');
EXCEPTION WHEN lock_not_available THEN
	RAISE NOTICE 'the call failed: %', SQLERRM;
END $$;
RESET lock_timeout;
RESET ROLE;
COMMIT PREPARED 'regress_i_hold';
SET ROLE regress_i_n8n;
SELECT outcome FROM idem_claim_ex('o_9', 'orders', NULL, NULL, 'run-9');
RESET ROLE;

-- clean up
DROP DOMAIN public.i_note;
DROP FUNCTION public.i_key_prefix(text), public.i_is_order(text), public.i_prefix_atomic(text);
SET client_min_messages = warning;
DROP SCHEMA regress_i_n8n CASCADE;
RESET client_min_messages;
DELETE FROM idem_gate.claims;
DELETE FROM idem_gate.workflow_acl WHERE role::text LIKE 'regress_i_%';
DROP OWNED BY regress_i_n8n, regress_i_inbox, regress_i_mon;
DROP ROLE regress_i_alice, regress_i_bob, regress_i_n8n, regress_i_inbox, regress_i_mon;
