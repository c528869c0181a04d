
/*
 * The views read ONLY the extension's tables (a DBA's child table of
 * claims, an archive say, is not the gate's), and workflow_stats shows a
 * role only the workflows it may see.  A view's query cannot change in
 * place: each is made anew, with the GRANTs a DBA gave on it.
 */
DO $$
DECLARE
	g pg_catalog.text[];
BEGIN
	SELECT pg_catalog.array_agg(x ORDER BY n, x) INTO g
	  FROM (SELECT v.n, pg_catalog.unnest(idem_gate.upgrade_grants(c.relacl, c.relowner,
				'TABLE ' OPERATOR(pg_catalog.||) c.oid::pg_catalog.regclass::pg_catalog.text)) AS x
			  FROM (VALUES (1, 'idem_gate.stats_gauges'::pg_catalog.regclass),
						   (2, 'idem_gate.stats'::pg_catalog.regclass),
						   (3, 'idem_gate.workflow_stats'::pg_catalog.regclass)) v(n, rel)
			  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) v.rel) s;

	DROP VIEW idem_gate.stats;
	DROP VIEW idem_gate.stats_gauges;
	DROP VIEW idem_gate.workflow_stats;

	CREATE VIEW idem_gate.stats_gauges AS
	SELECT
		(SELECT pg_catalog.count(*) FROM ONLY idem_gate.claims
		 WHERE state OPERATOR(pg_catalog.=) 'processing'::idem_gate.state) AS rows_processing,
		(SELECT pg_catalog.count(*) FROM ONLY idem_gate.claims
		 WHERE state OPERATOR(pg_catalog.=) 'failed_retryable'::idem_gate.state) AS rows_failed_retryable,
		(SELECT pg_catalog.count(*) FROM ONLY idem_gate.claims
		 WHERE state OPERATOR(pg_catalog.=) 'needs_review'::idem_gate.state) AS rows_needs_review,
		(SELECT pg_catalog.min(updated_at) FROM ONLY idem_gate.claims
		 WHERE state OPERATOR(pg_catalog.=) 'processing'::idem_gate.state) AS oldest_processing_at;
	REVOKE ALL ON TABLE idem_gate.stats_gauges FROM PUBLIC;

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
	REVOKE ALL ON TABLE idem_gate.stats FROM PUBLIC;

	CREATE VIEW idem_gate.workflow_stats AS
	WITH RECURSIVE wf(workflow) AS (
		(SELECT c.workflow FROM ONLY idem_gate.claims c ORDER BY c.workflow LIMIT 1)
		UNION ALL
		SELECT (SELECT c.workflow FROM ONLY idem_gate.claims c
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
			(SELECT pg_catalog.count(*) FROM ONLY idem_gate.claims c
			 WHERE c.state OPERATOR(pg_catalog.=) 'processing'::idem_gate.state
			   AND c.workflow OPERATOR(pg_catalog.=) wf.workflow) AS rows_processing,
			(SELECT pg_catalog.count(*) FROM ONLY idem_gate.claims c
			 WHERE c.state OPERATOR(pg_catalog.=) 'failed_retryable'::idem_gate.state
			   AND c.workflow OPERATOR(pg_catalog.=) wf.workflow) AS rows_failed_retryable,
			(SELECT pg_catalog.count(*) FROM ONLY idem_gate.claims c
			 WHERE c.state OPERATOR(pg_catalog.=) 'needs_review'::idem_gate.state
			   AND c.workflow OPERATOR(pg_catalog.=) wf.workflow) AS rows_needs_review,
			(SELECT pg_catalog.min(c.updated_at) FROM ONLY idem_gate.claims c
			 WHERE c.state OPERATOR(pg_catalog.=) 'processing'::idem_gate.state
			   AND c.workflow OPERATOR(pg_catalog.=) wf.workflow) AS oldest_processing_at,
			(SELECT pg_catalog.min(c.updated_at) FROM ONLY idem_gate.claims c
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
		  AND idem_gate.workflow_visible(wf.workflow)
	) n;
	REVOKE ALL ON TABLE idem_gate.workflow_stats FROM PUBLIC;

	PERFORM idem_gate.outside_extension(g);
END
$$;
COMMENT ON VIEW idem_gate.stats_gauges IS 'live gauges of the claims table that idem_gate.stats shows';
COMMENT ON VIEW idem_gate.stats IS 'idem_gate counters since the last reset (and the last server start), and live gauges of the claims table';
COMMENT ON VIEW idem_gate.workflow_stats IS 'per workflow the current role may see: rows by state (completed estimated) and the oldest processing and needs_review claims'' ages';
