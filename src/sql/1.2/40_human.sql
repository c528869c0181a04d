
/*
 * The human loop: the evidence a reviewer needs, an inbox, actions that
 * name the person, and a history.
 *
 * A claim keeps the delivery's payload while it is open (processing,
 * failed_retryable, needs_review), so that a reviewer has the original
 * event: cleared when the claim completes or is released, and, like a
 * receipt, by the receipt retention.  One larger than
 * idem_gate.max_payload_bytes is not kept; payload_dropped_bytes says so.
 * The columns are nullable, so adding them rewrites nothing; the CHECK
 * scans the table once.
 */
ALTER TABLE idem_gate.claims
	ADD COLUMN payload pg_catalog.jsonb,
	ADD COLUMN payload_dropped_bytes pg_catalog.int4,
	ADD CONSTRAINT claims_payload_only_while_open CHECK (
		payload IS NULL OR state OPERATOR(pg_catalog.<>) 'completed'::idem_gate.state);
COMMENT ON COLUMN idem_gate.claims.payload IS 'the delivery''s payload, kept as evidence while the claim is open';
COMMENT ON COLUMN idem_gate.claims.payload_dropped_bytes IS 'the size of a payload not kept because it was larger than idem_gate.max_payload_bytes';

ALTER TABLE idem_gate.audit ADD COLUMN actor pg_catalog.text;
COMMENT ON COLUMN idem_gate.audit.actor IS 'the person who decided, as the calling application knows them (an n8n user)';

/*
 * The new arguments come as overloads: the 1.1 signatures stay the same
 * objects, with every GRANT a DBA gave on them and every call written for
 * them.  The overloads take every argument (no defaults), so that no call
 * is ambiguous between the two; grant them as their 1.1 ones.
 */
CREATE FUNCTION @extschema@.idem_claim_ex(key pg_catalog.text, workflow pg_catalog.text,
	stale_interval pg_catalog.interval, fingerprint pg_catalog.text,
	execution_id pg_catalog.text, payload pg_catalog.jsonb,
	OUT outcome idem_gate.outcome, OUT token pg_catalog.int8, OUT attempt pg_catalog.int4,
	OUT state idem_gate.state, OUT result pg_catalog.jsonb, OUT claimed_at pg_catalog.timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'idem_claim_ex'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.idem_claim_ex(text, text, interval, text, text, jsonb) IS 'claim as idem_claim_ex, keeping the delivery''s payload as evidence while the claim is open';
REVOKE ALL ON FUNCTION @extschema@.idem_claim_ex(text, text, interval, text, text, jsonb) FROM PUBLIC;

CREATE FUNCTION @extschema@.idem_claim_many(keys pg_catalog.text[], workflow pg_catalog.text,
	stale_interval pg_catalog.interval, fingerprints pg_catalog.text[],
	execution_id pg_catalog.text, payloads pg_catalog.jsonb[])
RETURNS TABLE (ord pg_catalog.int4, key pg_catalog.text, outcome idem_gate.outcome,
	token pg_catalog.int8, attempt pg_catalog.int4, state idem_gate.state,
	result pg_catalog.jsonb, claimed_at pg_catalog.timestamptz)
AS 'MODULE_PATHNAME', 'idem_claim_many'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.idem_claim_many(text[], text, interval, text[], text, jsonb[]) IS 'claim many keys at once, keeping each delivery''s payload';
REVOKE ALL ON FUNCTION @extschema@.idem_claim_many(text[], text, interval, text[], text, jsonb[]) FROM PUBLIC;

CREATE FUNCTION @extschema@.idem_resolve(key pg_catalog.text, workflow pg_catalog.text,
	resolution pg_catalog.text, result pg_catalog.jsonb, reason pg_catalog.text,
	actor pg_catalog.text)
RETURNS idem_gate.state
AS 'MODULE_PATHNAME', 'idem_resolve'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.idem_resolve(text, text, text, jsonb, text, text) IS 'operator decision on a needs_review or processing claim, naming the person who decided; recorded in idem_gate.audit';
REVOKE ALL ON FUNCTION @extschema@.idem_resolve(text, text, text, jsonb, text, text) FROM PUBLIC;

CREATE FUNCTION @extschema@.idem_release(key pg_catalog.text, workflow pg_catalog.text,
	reason pg_catalog.text, actor pg_catalog.text)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'idem_release'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.idem_release(text, text, text, text) IS 'operator: forget a claim in any state, naming the person who decided; recorded in idem_gate.audit';
REVOKE ALL ON FUNCTION @extschema@.idem_release(text, text, text, text) FROM PUBLIC;

CREATE FUNCTION idem_gate.history(key pg_catalog.text, workflow pg_catalog.text)
RETURNS TABLE (at pg_catalog.timestamptz, action pg_catalog.text, actor pg_catalog.text,
	session_role pg_catalog.name, acting_role pg_catalog.name,
	state_before idem_gate.state, state_after idem_gate.state, reason pg_catalog.text)
AS 'MODULE_PATHNAME', 'idem_gate_history'
LANGUAGE C STABLE;
COMMENT ON FUNCTION idem_gate.history(text, text) IS 'the audit rows of a claim (a released one''s too), oldest first';
REVOKE ALL ON FUNCTION idem_gate.history(text, text) FROM PUBLIC;

/*
 * The inbox: one row per claim that needs a person, oldest first, without
 * its token.  needs_review: the side effect may have happened (why: its
 * last_error); stuck: processing for longer than its workflow's
 * stuck_after; failing: failed_retryable at idem_gate.max_attempts or
 * more.  stuck_after is measured as the janitor measures it, a duration
 * of fixed length (a day is 24 hours, a year 365.25 days), whatever the
 * calendar.  Each part is an index range of the state index over a normally
 * small set of rows, so the view stays cheap on a table of ten million
 * claims.  A role sees only the workflows it may (workflow_visible()).
 */
CREATE VIEW idem_gate.inbox AS
SELECT i.workflow, i.key, i.reason, i.since, i.state, i.attempt, i.execution_id,
	i.last_error, i.payload, i.payload_dropped_bytes, i.fingerprint, i.claimed_at,
	i.updated_at
FROM (
	SELECT c.workflow, c.key, 'needs_review'::pg_catalog.text AS reason, c.updated_at AS since,
		c.state, c.attempt, c.execution_id, c.last_error, c.payload,
		c.payload_dropped_bytes, c.fingerprint, c.claimed_at, c.updated_at
	  FROM ONLY idem_gate.claims c
	 WHERE c.state OPERATOR(pg_catalog.=) 'needs_review'::idem_gate.state
	UNION ALL
	SELECT c.workflow, c.key, 'stuck', c.updated_at, c.state, c.attempt, c.execution_id,
		c.last_error, c.payload, c.payload_dropped_bytes, c.fingerprint, c.claimed_at,
		c.updated_at
	  FROM ONLY idem_gate.claims c
	  LEFT JOIN ONLY idem_gate.policies p ON p.workflow OPERATOR(pg_catalog.=) c.workflow
	 WHERE c.state OPERATOR(pg_catalog.=) 'processing'::idem_gate.state
	   AND c.updated_at OPERATOR(pg_catalog.<=) (pg_catalog.now() OPERATOR(pg_catalog.-)
			pg_catalog.make_interval(secs => pg_catalog.date_part('epoch',
				COALESCE(p.stuck_after,
						 pg_catalog.current_setting('idem_gate.stuck_after')::pg_catalog.interval))))
	UNION ALL
	SELECT c.workflow, c.key, 'failing', c.updated_at, c.state, c.attempt, c.execution_id,
		c.last_error, c.payload, c.payload_dropped_bytes, c.fingerprint, c.claimed_at,
		c.updated_at
	  FROM ONLY idem_gate.claims c
	 WHERE c.state OPERATOR(pg_catalog.=) 'failed_retryable'::idem_gate.state
	   AND c.attempt OPERATOR(pg_catalog.>=)
			pg_catalog.current_setting('idem_gate.max_attempts')::pg_catalog.int4
) i
WHERE idem_gate.workflow_visible(i.workflow)
ORDER BY i.since, i.workflow, i.key;
COMMENT ON VIEW idem_gate.inbox IS 'claims that need a person, oldest first: needs_review, stuck in processing, failing repeatedly; no tokens';
REVOKE ALL ON TABLE idem_gate.inbox FROM PUBLIC;
