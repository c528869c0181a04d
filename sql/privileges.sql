--
-- A client role with EXECUTE on the API and USAGE on the schemas, and no
-- privileges on the table, can use every API function; nobody else can,
-- and nobody can write idem_gate.claims directly.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idem_gate;
RESET client_min_messages;

CREATE ROLE regress_idem_n8n LOGIN;
CREATE ROLE regress_idem_other LOGIN;

-- the GRANT lines the README gives for an n8n role
GRANT USAGE ON SCHEMA idem_gate TO regress_idem_n8n;
GRANT EXECUTE ON FUNCTION
	idem_claim(text, text, interval),
	idem_claim_ex(text, text, interval, text, text),
	idem_heartbeat(text, text, bigint),
	idem_complete(text, text, bigint, jsonb),
	idem_fail(text, text, bigint, text, boolean),
	idem_status(text, text)
	TO regress_idem_n8n;
-- deciding needs_review claims is an operator's job; grant it where wanted
GRANT EXECUTE ON FUNCTION idem_resolve(text, text, text, jsonb, text) TO regress_idem_n8n;

SET ROLE regress_idem_n8n;
SELECT idem_claim('priv_1', 'wf');
SELECT outcome, token IS NOT NULL AS has_token FROM idem_claim_ex('priv_2', 'wf', '1 minute', 'fp', 'exec-1');
SELECT token AS tok FROM idem_claim_ex('priv_2', 'wf', '1 minute', 'fp', 'exec-1') \gset
SELECT idem_heartbeat('priv_2', 'wf', :tok);
SELECT idem_complete('priv_2', 'wf', :tok, '{"id": 1}');
SELECT idem_fail('priv_1', 'wf', NULL, 'boom');
SELECT idem_resolve('priv_1', 'wf', 'retry');
SELECT state, result FROM idem_status('priv_2', 'wf');
-- but not the table itself
INSERT INTO idem_gate.claims (workflow, key, state, attempt, token, created_at, claimed_at, updated_at, completed_at)
	VALUES ('wf', 'forged', 'completed', 1, 1, now(), now(), now(), now());
UPDATE idem_gate.claims SET state = 'completed' WHERE key = 'priv_1';
DELETE FROM idem_gate.claims;
SELECT count(*) FROM idem_gate.claims;
SELECT nextval('idem_gate.token_seq');
RESET ROLE;

-- a role without the grants can neither call the gate nor touch the table
SET ROLE regress_idem_other;
SELECT idem_claim('priv_3', 'wf');
SELECT * FROM idem_claim_ex('priv_3', 'wf');
SELECT idem_complete('priv_2', 'wf');
SELECT * FROM idem_status('priv_2', 'wf');
INSERT INTO idem_gate.claims (workflow, key, state, attempt, token, created_at, claimed_at, updated_at)
	VALUES ('wf', 'forged', 'processing', 1, 1, now(), now(), now());
SELECT count(*) FROM idem_gate.claims;
-- the admin functions are not public either
SELECT idem_gate.stats_reset();
RESET ROLE;

SELECT key, state FROM idem_gate.claims WHERE key LIKE 'priv_%' OR key = 'forged' ORDER BY key;

-- a search_path that puts a hostile schema first changes nothing
CREATE SCHEMA regress_evil;
CREATE FUNCTION regress_evil.now() RETURNS timestamptz LANGUAGE sql AS $$ SELECT '2000-01-01'::timestamptz $$;
CREATE FUNCTION regress_evil.texteq_evil(text, text) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;
CREATE OPERATOR regress_evil.= (LEFTARG = text, RIGHTARG = text, PROCEDURE = regress_evil.texteq_evil);
SET search_path = regress_evil, public, pg_catalog;
SELECT idem_claim('priv_4', 'wf');
SELECT idem_claim('priv_5', 'wf');
SELECT key, claimed_at > '2001-01-01' AS real_clock FROM idem_status('priv_4', 'wf');
RESET search_path;
DROP SCHEMA regress_evil CASCADE;

-- the gate's functions act as their owner, who needs the privileges on the
-- table that the statement a call stands for would need: a read of the
-- row without SELECT is refused (the owner is normally the superuser who
-- installed idem_gate, who always has them)
BEGIN;
GRANT USAGE ON SCHEMA idem_gate TO regress_idem_other;
ALTER FUNCTION idem_heartbeat(text, text, bigint) OWNER TO regress_idem_other;
SELECT idem_heartbeat('priv_4', 'wf', 1);
ROLLBACK;
-- a new key also draws a token from idem_gate.token_seq: an owner with
-- every privilege on the table but none on the sequence is refused, as the
-- INSERT ... nextval() the call stands for would be
BEGIN;
GRANT USAGE ON SCHEMA idem_gate TO regress_idem_other;
GRANT SELECT, INSERT, UPDATE ON idem_gate.claims TO regress_idem_other;
ALTER FUNCTION idem_claim(text, text, interval) OWNER TO regress_idem_other;
SELECT idem_claim('priv_no_seq', 'wf');
ROLLBACK;
SELECT count(*) FROM idem_gate.claims WHERE key = 'priv_no_seq';

DROP OWNED BY regress_idem_n8n, regress_idem_other;
DROP ROLE regress_idem_n8n;
DROP ROLE regress_idem_other;
