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

/*
 * Canonical JSON (RFC 8785, JCS): canonical.c, jcs_number.c, jcs_json.c.
 * Pure functions of their arguments, executable by everyone.  See
 * docs/canonical.md.
 */
CREATE FUNCTION @extschema@.idem_canonical(doc pg_catalog.jsonb,
										   numbers pg_catalog.text DEFAULT 'safe')
	RETURNS pg_catalog.text
	AS 'MODULE_PATHNAME', 'idem_canonical_jsonb'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.idem_canonical(pg_catalog.jsonb, pg_catalog.text) IS
	'RFC 8785 canonical form of a jsonb document; numbers => ''safe'' (default) or ''rfc''';

CREATE FUNCTION @extschema@.idem_canonical(doc pg_catalog.json,
										   numbers pg_catalog.text DEFAULT 'safe')
	RETURNS pg_catalog.text
	AS 'MODULE_PATHNAME', 'idem_canonical_json'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.idem_canonical(pg_catalog.json, pg_catalog.text) IS
	'RFC 8785 canonical form of a json document (duplicate member names are refused); numbers => ''safe'' (default) or ''rfc''';

CREATE FUNCTION @extschema@.idem_hash(doc pg_catalog.jsonb,
									  numbers pg_catalog.text DEFAULT 'safe')
	RETURNS pg_catalog.text
	AS 'MODULE_PATHNAME', 'idem_hash_jsonb'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.idem_hash(pg_catalog.jsonb, pg_catalog.text) IS
	'SHA-256 (64 lowercase hex digits) of the RFC 8785 canonical form of a jsonb document';

CREATE FUNCTION @extschema@.idem_hash(doc pg_catalog.json,
									  numbers pg_catalog.text DEFAULT 'safe')
	RETURNS pg_catalog.text
	AS 'MODULE_PATHNAME', 'idem_hash_json'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.idem_hash(pg_catalog.json, pg_catalog.text) IS
	'SHA-256 (64 lowercase hex digits) of the RFC 8785 canonical form of a json document (duplicate member names are refused)';

CREATE FUNCTION @extschema@.idem_hash(doc pg_catalog.jsonb,
									  fields pg_catalog.text[],
									  numbers pg_catalog.text DEFAULT 'safe')
	RETURNS pg_catalog.text
	AS 'MODULE_PATHNAME', 'idem_hash_fields'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.idem_hash(pg_catalog.jsonb, pg_catalog.text[], pg_catalog.text) IS
	'SHA-256 of the canonical object that maps each identity field (member name, or JSON pointer starting with /) to its value; a missing field is an error';

/* idem_gate 1.0: retention, stuck-claim alerts, per-workflow policies */

COMMENT ON COLUMN idem_gate.claims.alerted_token IS 'the token the janitor last raised a stuck alert for; a claim is alerted once per grant';

/*
 * Per-workflow overrides of idem_gate.retention, idem_gate.failed_retention
 * and idem_gate.stuck_after: a NULL column means "use the setting".
 */
CREATE TABLE idem_gate.policies (
	workflow			text PRIMARY KEY,
	retention			interval,
	failed_retention	interval,
	stuck_after			interval,
	CONSTRAINT policies_workflow_not_empty CHECK (workflow OPERATOR(pg_catalog.<>) ''),
	CONSTRAINT policies_retention_positive CHECK (
		retention OPERATOR(pg_catalog.>) '0'::interval),
	CONSTRAINT policies_failed_retention_positive CHECK (
		failed_retention OPERATOR(pg_catalog.>) '0'::interval),
	CONSTRAINT policies_stuck_after_positive CHECK (
		stuck_after OPERATOR(pg_catalog.>) '0'::interval),
	CONSTRAINT policies_sets_something CHECK (
		retention IS NOT NULL OR failed_retention IS NOT NULL OR stuck_after IS NOT NULL)
);
COMMENT ON TABLE idem_gate.policies IS 'per-workflow retention and stuck-claim thresholds; NULL columns fall back to the idem_gate.* settings';
REVOKE ALL ON TABLE idem_gate.policies FROM PUBLIC;

CREATE FUNCTION idem_gate.janitor_run(
	OUT deleted bigint, OUT deleted_completed bigint, OUT deleted_failed bigint,
	OUT alerts bigint, OUT escalated bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'idem_gate_janitor_run'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION idem_gate.janitor_run() IS 'one janitor pass in this transaction: retention deletes and stuck-claim alerts';
REVOKE ALL ON FUNCTION idem_gate.janitor_run() FROM PUBLIC;

/* idem_gate 1.0: counters and gauges */

CREATE FUNCTION idem_gate.stats_counters(
	OUT available boolean,
	OUT claims_new bigint, OUT claims_in_flight bigint,
	OUT claims_completed bigint, OUT claims_stale_taken bigint,
	OUT claims_needs_review bigint,
	OUT completions bigint, OUT fails_retryable bigint,
	OUT fails_needs_review bigint, OUT resolves bigint,
	OUT deleted_completed bigint, OUT deleted_failed bigint,
	OUT alerts bigint, OUT escalations bigint, OUT janitor_passes bigint,
	OUT last_pass_at timestamptz, OUT last_pass_ms double precision,
	OUT reset_at timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'idem_gate_stats_counters'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION idem_gate.stats_counters() IS 'shared-memory counters since idem_gate.stats_reset(); available = false when idem_gate is not preloaded';

CREATE FUNCTION idem_gate.stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'idem_gate_stats_reset'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION idem_gate.stats_reset() IS 'set the idem_gate counters to zero';
REVOKE ALL ON FUNCTION idem_gate.stats_reset() FROM PUBLIC;

/*
 * Counters, plus live gauges read from the table.  Rows that are not
 * completed are counted exactly (each an index range scan of a normally
 * small set); completed rows are estimated from the planner's statistics,
 * so reading the view stays cheap on a table of millions of rows.
 */
CREATE VIEW idem_gate.stats AS
SELECT s.*,
	g.rows_processing, g.rows_failed_retryable, g.rows_needs_review,
	GREATEST(0, (SELECT c.reltuples::bigint FROM pg_catalog.pg_class c
				 WHERE c.oid OPERATOR(pg_catalog.=) 'idem_gate.claims'::pg_catalog.regclass)
			 OPERATOR(pg_catalog.-) g.rows_processing
			 OPERATOR(pg_catalog.-) g.rows_failed_retryable
			 OPERATOR(pg_catalog.-) g.rows_needs_review) AS rows_completed_estimate,
	pg_catalog.now() OPERATOR(pg_catalog.-) g.oldest_processing_at AS oldest_processing_age
FROM idem_gate.stats_counters() s,
	(SELECT
		(SELECT pg_catalog.count(*) FROM idem_gate.claims
		 WHERE state OPERATOR(pg_catalog.=) 'processing'::idem_gate.state) AS rows_processing,
		(SELECT pg_catalog.count(*) FROM idem_gate.claims
		 WHERE state OPERATOR(pg_catalog.=) 'failed_retryable'::idem_gate.state) AS rows_failed_retryable,
		(SELECT pg_catalog.count(*) FROM idem_gate.claims
		 WHERE state OPERATOR(pg_catalog.=) 'needs_review'::idem_gate.state) AS rows_needs_review,
		(SELECT pg_catalog.min(updated_at) FROM idem_gate.claims
		 WHERE state OPERATOR(pg_catalog.=) 'processing'::idem_gate.state) AS oldest_processing_at
	) g;
COMMENT ON VIEW idem_gate.stats IS 'idem_gate counters since the last reset, and live gauges of the claims table';
