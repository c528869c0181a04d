/*
 * Stand-in for the view idem_gate.workflow_stats of idem_gate 1.1, created
 * only where the installed idem_gate does not have it yet, so that the
 * monitoring tests (test/suites/60_prometheus.sh) can read per-workflow
 * figures from a 1.0 installation.  Same columns and meaning as the 1.1
 * view; the completed count is exact here, an estimate there.  It is not
 * part of the extension: drop it with test/ops/workflow_stats_drop.sql
 * before DROP EXTENSION.
 */
DO $$
BEGIN
	IF pg_catalog.to_regclass('idem_gate.workflow_stats') IS NULL THEN
		CREATE VIEW idem_gate.workflow_stats AS
		SELECT c.workflow,
			pg_catalog.count(*) FILTER (WHERE c.state = 'processing') AS rows_processing,
			pg_catalog.count(*) FILTER (WHERE c.state = 'failed_retryable') AS rows_failed_retryable,
			pg_catalog.count(*) FILTER (WHERE c.state = 'needs_review') AS rows_needs_review,
			pg_catalog.count(*) FILTER (WHERE c.state = 'completed') AS rows_completed_estimate,
			pg_catalog.now() - pg_catalog.min(c.updated_at) FILTER (WHERE c.state = 'processing')
				AS oldest_processing_age,
			pg_catalog.now() - pg_catalog.min(c.updated_at) FILTER (WHERE c.state = 'needs_review')
				AS oldest_needs_review_age
		FROM idem_gate.claims c
		GROUP BY c.workflow;
		COMMENT ON VIEW idem_gate.workflow_stats IS 'test stand-in for the idem_gate 1.1 view';
	END IF;
END
$$;
