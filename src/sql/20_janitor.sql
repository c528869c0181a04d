
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
