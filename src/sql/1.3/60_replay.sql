
/*
 * A replay is an operator's decision of its own: idem_replay() records it
 * in idem_gate.audit (who, why, when) and answers the stored payload that
 * the inbox page then sends to the gate as a redelivery.  It refuses a
 * claim that cannot be replayed (P0002 no claim; 55000 another state than
 * failed_retryable, or no payload kept) before anything is sent.  Like
 * idem_resolve() it acts as the owner, checks per-workflow access, and is
 * not public: grant EXECUTE to the inbox's role.
 */
ALTER TABLE idem_gate.audit DROP CONSTRAINT audit_action_known;
ALTER TABLE idem_gate.audit ADD CONSTRAINT audit_action_known CHECK (
	action OPERATOR(pg_catalog.=) ANY (ARRAY['resolve', 'release', 'escalate', 'replay']));

CREATE FUNCTION @extschema@.idem_replay(key pg_catalog.text, workflow pg_catalog.text,
	reason pg_catalog.text DEFAULT NULL, actor pg_catalog.text DEFAULT NULL)
RETURNS pg_catalog.jsonb
AS 'MODULE_PATHNAME', 'idem_replay'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.idem_replay(text, text, text, text) IS 'operator: record the replay of a failed_retryable claim in idem_gate.audit, naming the person, and answer its stored payload to send to the gate';
REVOKE ALL ON FUNCTION @extschema@.idem_replay(text, text, text, text) FROM PUBLIC;
