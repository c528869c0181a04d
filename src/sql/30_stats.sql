
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
