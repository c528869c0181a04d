
/*
 * The live gauges of idem_gate.stats: the rows that are not completed,
 * counted exactly (index ranges of normally small sets), and the oldest
 * claim in processing.  Its own view, so that the cluster-wide stats of
 * distribute() read the same figures.
 */
CREATE VIEW idem_gate.stats_gauges AS
SELECT
	(SELECT pg_catalog.count(*) FROM idem_gate.claims
	 WHERE state OPERATOR(pg_catalog.=) 'processing'::idem_gate.state) AS rows_processing,
	(SELECT pg_catalog.count(*) FROM idem_gate.claims
	 WHERE state OPERATOR(pg_catalog.=) 'failed_retryable'::idem_gate.state) AS rows_failed_retryable,
	(SELECT pg_catalog.count(*) FROM idem_gate.claims
	 WHERE state OPERATOR(pg_catalog.=) 'needs_review'::idem_gate.state) AS rows_needs_review,
	(SELECT pg_catalog.min(updated_at) FROM idem_gate.claims
	 WHERE state OPERATOR(pg_catalog.=) 'processing'::idem_gate.state) AS oldest_processing_at;
COMMENT ON VIEW idem_gate.stats_gauges IS 'live gauges of the claims table that idem_gate.stats shows';
REVOKE ALL ON TABLE idem_gate.stats_gauges FROM PUBLIC;

/*
 * The counters gain releases, cleared receipts, fingerprint mismatches and
 * fallbacks of the gate's writes to SQL.  A new shape is a new function
 * (and view); the GRANTs a DBA gave on the 1.0 view are carried over.
 * stats_counters() is no longer executable by PUBLIC: grant it with the
 * view to the roles that monitor the gate.
 */
DO $$
DECLARE
	grants text[];
	g text;
BEGIN
	SELECT pg_catalog.array_agg(pg_catalog.format('GRANT %s ON idem_gate.stats TO %s%s',
			a.privilege_type,
			CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
				 ELSE pg_catalog.quote_ident(r.rolname) END,
			CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END))
	  INTO grants
	  FROM pg_catalog.pg_class c
	 CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) a
	  LEFT JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) a.grantee
	 WHERE c.oid OPERATOR(pg_catalog.=) 'idem_gate.stats'::pg_catalog.regclass
	   AND a.grantee OPERATOR(pg_catalog.<>) c.relowner;

	SELECT grants OPERATOR(pg_catalog.||) pg_catalog.array_agg(pg_catalog.format('GRANT EXECUTE ON FUNCTION idem_gate.stats_counters() TO %s%s',
			pg_catalog.quote_ident(r.rolname),
			CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END))
	  INTO grants
	  FROM pg_catalog.pg_proc p
	 CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) a
	  JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) a.grantee
	 WHERE p.oid OPERATOR(pg_catalog.=) 'idem_gate.stats_counters()'::pg_catalog.regprocedure
	   AND a.grantee OPERATOR(pg_catalog.<>) p.proowner;

	DROP VIEW idem_gate.stats;
	DROP FUNCTION idem_gate.stats_counters();
	CREATE FUNCTION idem_gate.stats_counters(
		OUT available boolean,
		OUT claims_new bigint, OUT claims_in_flight bigint,
		OUT claims_completed bigint, OUT claims_stale_taken bigint,
		OUT claims_needs_review bigint,
		OUT completions bigint, OUT fails_retryable bigint,
		OUT fails_needs_review bigint, OUT resolves bigint,
		OUT deleted_completed bigint, OUT deleted_failed bigint,
		OUT alerts bigint, OUT escalations bigint, OUT janitor_passes bigint,
		OUT releases bigint, OUT receipts_cleared bigint,
		OUT fingerprint_mismatches bigint, OUT sql_fallbacks bigint,
		OUT last_pass_at timestamptz, OUT last_pass_ms double precision,
		OUT reset_at timestamptz)
	RETURNS record
	AS 'MODULE_PATHNAME', 'idem_gate_stats_counters_1_1'
	LANGUAGE C VOLATILE;
	REVOKE ALL ON FUNCTION idem_gate.stats_counters() FROM PUBLIC;

	/*
	 * Counters, plus live gauges read from the table.  Rows that are not
	 * completed are counted exactly (index ranges of normally small sets);
	 * completed rows are estimated from the planner's statistics, so
	 * reading the view stays cheap on a table of millions of rows.
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
		idem_gate.stats_gauges g;
	FOREACH g IN ARRAY COALESCE(grants, '{}') LOOP
		EXECUTE g;
	END LOOP;
END
$$;
COMMENT ON FUNCTION idem_gate.stats_counters() IS 'shared-memory counters since idem_gate.stats_reset(); available = false when idem_gate is not preloaded';
COMMENT ON VIEW idem_gate.stats IS 'idem_gate counters since the last reset (and the last server start), and live gauges of the claims table';

/*
 * Per-workflow figures.  The workflows are found by walking the
 * (state, workflow, updated_at) index one workflow at a time, and every
 * figure but the completed estimate is an index range of a normally small
 * set, so the view stays cheap on a table of ten million rows.  Completed
 * rows are estimated from the planner's statistics of the workflow column.
 */
CREATE VIEW idem_gate.workflow_stats AS
WITH RECURSIVE wf(workflow) AS (
	(SELECT c.workflow FROM idem_gate.claims c ORDER BY c.workflow LIMIT 1)
	UNION ALL
	SELECT (SELECT c.workflow FROM idem_gate.claims c
			WHERE c.workflow OPERATOR(pg_catalog.>) wf.workflow
			ORDER BY c.workflow LIMIT 1)
	FROM wf WHERE wf.workflow IS NOT NULL
)
SELECT n.workflow, n.rows_processing, n.rows_failed_retryable, n.rows_needs_review,
	GREATEST(0, pg_catalog.round(n.rows_estimate)::bigint
			 OPERATOR(pg_catalog.-) n.rows_processing
			 OPERATOR(pg_catalog.-) n.rows_failed_retryable
			 OPERATOR(pg_catalog.-) n.rows_needs_review) AS rows_completed_estimate,
	pg_catalog.now() OPERATOR(pg_catalog.-) n.oldest_processing_at AS oldest_processing_age,
	pg_catalog.now() OPERATOR(pg_catalog.-) n.oldest_needs_review_at AS oldest_needs_review_age
FROM (
	SELECT wf.workflow,
		(SELECT pg_catalog.count(*) FROM idem_gate.claims c
		 WHERE c.state OPERATOR(pg_catalog.=) 'processing'::idem_gate.state
		   AND c.workflow OPERATOR(pg_catalog.=) wf.workflow) AS rows_processing,
		(SELECT pg_catalog.count(*) FROM idem_gate.claims c
		 WHERE c.state OPERATOR(pg_catalog.=) 'failed_retryable'::idem_gate.state
		   AND c.workflow OPERATOR(pg_catalog.=) wf.workflow) AS rows_failed_retryable,
		(SELECT pg_catalog.count(*) FROM idem_gate.claims c
		 WHERE c.state OPERATOR(pg_catalog.=) 'needs_review'::idem_gate.state
		   AND c.workflow OPERATOR(pg_catalog.=) wf.workflow) AS rows_needs_review,
		(SELECT pg_catalog.min(c.updated_at) FROM idem_gate.claims c
		 WHERE c.state OPERATOR(pg_catalog.=) 'processing'::idem_gate.state
		   AND c.workflow OPERATOR(pg_catalog.=) wf.workflow) AS oldest_processing_at,
		(SELECT pg_catalog.min(c.updated_at) FROM idem_gate.claims c
		 WHERE c.state OPERATOR(pg_catalog.=) 'needs_review'::idem_gate.state
		   AND c.workflow OPERATOR(pg_catalog.=) wf.workflow) AS oldest_needs_review_at,
		/* the planner's share of the table for this workflow */
		(SELECT GREATEST(cl.reltuples, 0) OPERATOR(pg_catalog.*) COALESCE((
			SELECT f.freq FROM pg_catalog.pg_stats s,
				ROWS FROM (pg_catalog.unnest(s.most_common_vals::pg_catalog.text::pg_catalog.text[]),
						   pg_catalog.unnest(s.most_common_freqs)) AS f(val, freq)
			 WHERE s.schemaname OPERATOR(pg_catalog.=) 'idem_gate'
			   AND s.tablename OPERATOR(pg_catalog.=) 'claims'
			   AND s.attname OPERATOR(pg_catalog.=) 'workflow'
			   AND f.val OPERATOR(pg_catalog.=) wf.workflow), 0)
		   FROM pg_catalog.pg_class cl
		  WHERE cl.oid OPERATOR(pg_catalog.=) 'idem_gate.claims'::pg_catalog.regclass) AS rows_estimate
	FROM wf
	WHERE wf.workflow IS NOT NULL
) n;
COMMENT ON VIEW idem_gate.workflow_stats IS 'per workflow: rows by state (completed estimated) and the oldest processing and needs_review claims'' ages';
REVOKE ALL ON TABLE idem_gate.workflow_stats FROM PUBLIC;
