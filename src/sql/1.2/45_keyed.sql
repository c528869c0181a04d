
/*
 * Keyed keys for personal data.  A workflow whose policy says keyed has
 * its keys stored as HMAC-SHA256(secret, workflow || 0x00 || key), written
 * as the secret's id, a colon and 64 hex digits, under the secrets of the
 * file idem_gate.secret_file names; the gate never stores, logs, alerts or
 * audits the key its caller passes.  The column has a constant default,
 * so adding it rewrites nothing.
 */
ALTER TABLE idem_gate.policies
	ADD COLUMN keyed pg_catalog.bool NOT NULL DEFAULT false,
	DROP CONSTRAINT policies_sets_something,
	ADD CONSTRAINT policies_sets_something CHECK (
		retention IS NOT NULL OR failed_retention IS NOT NULL
		OR stuck_after IS NOT NULL OR receipt_retention IS NOT NULL OR keyed);
COMMENT ON COLUMN idem_gate.policies.keyed IS 'store an HMAC of each key of the workflow (under idem_gate.secret_file), never the key; set it before the workflow''s first claim';

/* Every backend reads the keyed workflows again when the policies change. */
CREATE FUNCTION idem_gate.policies_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idem_gate_policies_changed'
LANGUAGE C;
REVOKE ALL ON FUNCTION idem_gate.policies_changed() FROM PUBLIC;
CREATE TRIGGER policies_changed
	AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON idem_gate.policies
	FOR EACH STATEMENT EXECUTE FUNCTION idem_gate.policies_changed();

CREATE FUNCTION @extschema@.idem_key(workflow pg_catalog.text, key pg_catalog.text)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'idem_key'
LANGUAGE C STABLE;
COMMENT ON FUNCTION @extschema@.idem_key(text, text) IS 'the form the gate stores a key in: its HMAC under the current secret in a keyed workflow, the key itself in another; for finding a claim from a personal value';
REVOKE ALL ON FUNCTION @extschema@.idem_key(text, text) FROM PUBLIC;

CREATE FUNCTION idem_gate.secret_ids(OUT secret_id pg_catalog.text, OUT file_order pg_catalog.int4)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'idem_gate_secret_ids'
LANGUAGE C STABLE;
COMMENT ON FUNCTION idem_gate.secret_ids() IS 'the ids of the secrets in force, the current one first (never a secret)';
REVOKE ALL ON FUNCTION idem_gate.secret_ids() FROM PUBLIC;

/*
 * How many claims of keyed workflows each secret id still holds, and
 * whether the file still lists it (file_order, 1 = current): a line whose
 * claims are 0 can go.  A claim under a secret no longer listed cannot be
 * found by its key any more; it is retained and deleted as usual.
 */
CREATE VIEW idem_gate.secrets AS
SELECT COALESCE(s.secret_id, r.secret_id) AS secret_id, s.file_order,
	COALESCE(r.claims, 0) AS claims, r.last_updated
  FROM idem_gate.secret_ids() s
  FULL JOIN (
	SELECT pg_catalog.split_part(c.key, ':', 1) AS secret_id,
		pg_catalog.count(*) AS claims, pg_catalog.max(c.updated_at) AS last_updated
	  FROM ONLY idem_gate.claims c
	  JOIN ONLY idem_gate.policies p ON p.workflow OPERATOR(pg_catalog.=) c.workflow
	 WHERE p.keyed
	 GROUP BY 1) r ON r.secret_id OPERATOR(pg_catalog.=) s.secret_id
 ORDER BY s.file_order NULLS LAST, 1;
COMMENT ON VIEW idem_gate.secrets IS 'claims of keyed workflows per secret id, and which ids the secret file lists';
REVOKE ALL ON TABLE idem_gate.secrets FROM PUBLIC;
