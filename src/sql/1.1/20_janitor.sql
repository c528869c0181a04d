
/*
 * Policies: intervals are durations of fixed length (their EXTRACT(epoch)
 * seconds), as the gate measures them, whatever the time zone; a policy
 * may keep receipts shorter than keys.  pg_dump keeps the policies.
 */
ALTER TABLE idem_gate.policies
	ADD COLUMN receipt_retention interval,
	DROP CONSTRAINT policies_retention_positive,
	DROP CONSTRAINT policies_failed_retention_positive,
	DROP CONSTRAINT policies_stuck_after_positive,
	DROP CONSTRAINT policies_sets_something,
	ADD CONSTRAINT policies_retention_duration CHECK (
		pg_catalog.date_part('epoch', retention) OPERATOR(pg_catalog.>) 0
		AND pg_catalog.date_part('epoch', retention) OPERATOR(pg_catalog.<) 1e11),
	ADD CONSTRAINT policies_failed_retention_duration CHECK (
		pg_catalog.date_part('epoch', failed_retention) OPERATOR(pg_catalog.>) 0
		AND pg_catalog.date_part('epoch', failed_retention) OPERATOR(pg_catalog.<) 1e11),
	ADD CONSTRAINT policies_stuck_after_duration CHECK (
		pg_catalog.date_part('epoch', stuck_after) OPERATOR(pg_catalog.>) 0
		AND pg_catalog.date_part('epoch', stuck_after) OPERATOR(pg_catalog.<) 1e11),
	ADD CONSTRAINT policies_receipt_retention_duration CHECK (
		pg_catalog.date_part('epoch', receipt_retention) OPERATOR(pg_catalog.>) 0
		AND pg_catalog.date_part('epoch', receipt_retention) OPERATOR(pg_catalog.<) 1e11),
	ADD CONSTRAINT policies_receipt_retention_within_retention CHECK (
		pg_catalog.date_part('epoch', receipt_retention) OPERATOR(pg_catalog.<=)
		pg_catalog.date_part('epoch', retention)),
	ADD CONSTRAINT policies_sets_something CHECK (
		retention IS NOT NULL OR failed_retention IS NOT NULL
		OR stuck_after IS NOT NULL OR receipt_retention IS NOT NULL);
COMMENT ON COLUMN idem_gate.policies.receipt_retention IS 'how long a completed claim keeps its receipt (result); the key stays until retention';
SELECT pg_catalog.pg_extension_config_dump('idem_gate.policies', '');

/*
 * The audit trail: one row per resolve, release and janitor escalation.
 * Only the gate's functions write it; a trigger refuses every other
 * change, except the janitor's pruning after idem_gate.audit_retention.
 */
CREATE TABLE idem_gate.audit (
	id				bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	at				timestamptz NOT NULL,
	session_role	name NOT NULL,
	acting_role		name NOT NULL,
	action			text NOT NULL,
	workflow		text COLLATE pg_catalog."C" NOT NULL,	/* as in claims */
	key				text COLLATE pg_catalog."C" NOT NULL,
	state_before	idem_gate.state,
	state_after		idem_gate.state,
	token			bigint,
	reason			text,
	CONSTRAINT audit_action_known CHECK (
		action OPERATOR(pg_catalog.=) ANY (ARRAY['resolve', 'release', 'escalate']))
);
COMMENT ON TABLE idem_gate.audit IS 'who decided what about which claim: resolves, releases and the janitor''s escalations';
CREATE INDEX audit_at ON idem_gate.audit (at);
CREATE INDEX audit_workflow_key ON idem_gate.audit (workflow, key);
REVOKE ALL ON TABLE idem_gate.audit FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('idem_gate.audit', '');

CREATE FUNCTION idem_gate.audit_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idem_gate_audit_guard'
LANGUAGE C;
COMMENT ON FUNCTION idem_gate.audit_guard() IS 'keeps idem_gate.audit as written: only the janitor prunes it';
REVOKE ALL ON FUNCTION idem_gate.audit_guard() FROM PUBLIC;
CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON idem_gate.audit
	FOR EACH ROW EXECUTE FUNCTION idem_gate.audit_guard();
CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON idem_gate.audit
	FOR EACH STATEMENT EXECUTE FUNCTION idem_gate.audit_guard();
SELECT pg_catalog.pg_extension_config_dump('idem_gate.audit_id_seq', '');

/*
 * How far the janitor has cleared receipts, per workflow, so that a pass
 * starts there instead of walking the rows it already cleared.  Derived
 * state: not dumped (after a restore the first pass walks once).
 */
CREATE TABLE idem_gate.janitor_watermarks (
	workflow				text PRIMARY KEY,
	receipts_cleared_until	timestamptz NOT NULL
);
COMMENT ON TABLE idem_gate.janitor_watermarks IS 'the janitor''s progress in clearing receipts, per workflow';
REVOKE ALL ON TABLE idem_gate.janitor_watermarks FROM PUBLIC;
