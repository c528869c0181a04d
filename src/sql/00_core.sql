/* idem_gate 1.0: the claim state machine */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION idem_gate" to load this file. \quit

/*
 * Data objects live in the fixed schema idem_gate; the API functions (idem_*)
 * land in the schema chosen at CREATE EXTENSION (@extschema@), normally
 * public, so that a client can call them with the default search_path.
 */
CREATE SCHEMA idem_gate;
COMMENT ON SCHEMA idem_gate IS 'idem_gate: claim table, types and administration';

CREATE TYPE idem_gate.state AS ENUM (
	'processing', 'completed', 'failed_retryable', 'needs_review');
COMMENT ON TYPE idem_gate.state IS 'state of one protected side effect';

CREATE TYPE idem_gate.outcome AS ENUM (
	'new', 'in_flight', 'completed', 'stale_taken', 'needs_review');
COMMENT ON TYPE idem_gate.outcome IS 'answer of idem_claim: may the caller perform the side effect?';

-- Fencing tokens: one sequence for every key, so tokens only grow.
CREATE SEQUENCE idem_gate.token_seq AS bigint MINVALUE 1 NO CYCLE;

CREATE TABLE idem_gate.claims (
	workflow		text NOT NULL,
	key				text NOT NULL,
	state			idem_gate.state NOT NULL,
	attempt			integer NOT NULL,
	token			bigint NOT NULL,
	execution_id	text,
	fingerprint		text,
	result			jsonb,
	last_error		text,
	created_at		timestamptz NOT NULL,
	claimed_at		timestamptz NOT NULL,
	updated_at		timestamptz NOT NULL,
	completed_at	timestamptz,
	alerted_token	bigint,
	CONSTRAINT claims_pkey PRIMARY KEY (workflow, key),
	CONSTRAINT claims_workflow_not_empty CHECK (workflow OPERATOR(pg_catalog.<>) ''),
	CONSTRAINT claims_key_not_empty CHECK (key OPERATOR(pg_catalog.<>) ''),
	CONSTRAINT claims_attempt_positive CHECK (attempt OPERATOR(pg_catalog.>=) 1),
	CONSTRAINT claims_token_positive CHECK (token OPERATOR(pg_catalog.>) 0),
	-- completed_at is set exactly when the row is completed, and then it is
	-- also the row's last change; a receipt exists only on a completed row
	CONSTRAINT claims_completed_at_iff_completed CHECK (
		(state OPERATOR(pg_catalog.=) 'completed'::idem_gate.state)
		OPERATOR(pg_catalog.=) (completed_at IS NOT NULL)),
	CONSTRAINT claims_completed_at_is_last_change CHECK (
		completed_at IS NULL OR completed_at OPERATOR(pg_catalog.=) updated_at),
	CONSTRAINT claims_result_only_when_completed CHECK (
		result IS NULL OR state OPERATOR(pg_catalog.=) 'completed'::idem_gate.state),
	CONSTRAINT claims_timestamps_ordered CHECK (
		created_at OPERATOR(pg_catalog.<=) claimed_at
		AND claimed_at OPERATOR(pg_catalog.<=) updated_at)
);
COMMENT ON TABLE idem_gate.claims IS 'one row per protected side effect; written only through the idem_* functions';

/*
 * One index serves the janitor and the stuck-claim alerter: completed rows
 * by completion time (completed_at = updated_at), failed_retryable rows by
 * failure time and processing rows by last heartbeat, each a range scan.
 */
CREATE INDEX claims_state_updated_at ON idem_gate.claims (state, updated_at);

REVOKE ALL ON TABLE idem_gate.claims FROM PUBLIC;
REVOKE ALL ON SEQUENCE idem_gate.token_seq FROM PUBLIC;

CREATE FUNCTION idem_gate.preloaded()
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_gate_preloaded'
LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION idem_gate.preloaded() IS 'true when idem_gate is in shared_preload_libraries';

CREATE FUNCTION @extschema@.idem_claim(key text, workflow text,
	stale_interval interval DEFAULT NULL)
RETURNS idem_gate.outcome
AS 'MODULE_PATHNAME', 'idem_claim'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.idem_claim(text, text, interval) IS 'claim the side effect of (workflow, key): new, in_flight, completed, stale_taken or needs_review';

CREATE FUNCTION @extschema@.idem_claim_ex(key text, workflow text,
	stale_interval interval DEFAULT NULL, fingerprint text DEFAULT NULL,
	execution_id text DEFAULT NULL,
	OUT outcome idem_gate.outcome, OUT token bigint, OUT attempt integer,
	OUT state idem_gate.state, OUT result jsonb, OUT claimed_at timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'idem_claim_ex'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.idem_claim_ex(text, text, interval, text, text) IS 'claim with fingerprint and execution id; returns the outcome, fencing token and stored receipt';

CREATE FUNCTION @extschema@.idem_heartbeat(key text, workflow text, token bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_heartbeat'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.idem_heartbeat(text, text, bigint) IS 'keep a claim fresh; false once the token no longer owns it';

CREATE FUNCTION @extschema@.idem_complete(key text, workflow text,
	token bigint DEFAULT NULL, result jsonb DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_complete'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.idem_complete(text, text, bigint, jsonb) IS 'record that the side effect happened, with its receipt';

CREATE FUNCTION @extschema@.idem_fail(key text, workflow text,
	token bigint DEFAULT NULL, error text DEFAULT NULL,
	retryable boolean DEFAULT false)
RETURNS idem_gate.state
AS 'MODULE_PATHNAME', 'idem_fail'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.idem_fail(text, text, bigint, text, boolean) IS 'record a failure: failed_retryable before any side effect, needs_review otherwise';

CREATE FUNCTION @extschema@.idem_resolve(key text, workflow text,
	resolution text, result jsonb DEFAULT NULL)
RETURNS idem_gate.state
AS 'MODULE_PATHNAME', 'idem_resolve'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.idem_resolve(text, text, text, jsonb) IS 'operator decision on a needs_review or processing claim: completed or retry';

CREATE FUNCTION @extschema@.idem_status(key text, workflow text)
RETURNS SETOF idem_gate.claims
AS 'MODULE_PATHNAME', 'idem_status'
LANGUAGE C STABLE ROWS 1;
COMMENT ON FUNCTION @extschema@.idem_status(text, text) IS 'the claim row of (workflow, key), or no row';

/*
 * The gate functions write idem_gate.claims on the caller's behalf, so they
 * are not public: grant EXECUTE to the roles that run workflows.
 */
REVOKE ALL ON FUNCTION @extschema@.idem_claim(text, text, interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.idem_claim_ex(text, text, interval, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.idem_heartbeat(text, text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.idem_complete(text, text, bigint, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.idem_fail(text, text, bigint, text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.idem_resolve(text, text, text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.idem_status(text, text) FROM PUBLIC;

DO $$
BEGIN
	IF NOT idem_gate.preloaded() THEN
		RAISE NOTICE 'idem_gate is not in shared_preload_libraries'
			USING DETAIL = 'The SQL API works. The background worker (janitor and stuck-claim alerts) and the shared-memory counters need preloading.',
				  HINT = 'Add idem_gate to shared_preload_libraries and restart the server; until then run idem_gate.janitor_run() by hand.';
	END IF;
END
$$;
