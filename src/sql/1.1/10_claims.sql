
/*
 * Fencing without gaps: a claim granted by idem_claim_ex or
 * idem_claim_many handed its token to the owner, and then requires it.
 * Rows claimed under 1.0 keep 1.0's rule.
 */
ALTER TABLE idem_gate.claims
	ADD COLUMN token_issued boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN idem_gate.claims.token_issued IS 'the grant handed the token to its owner (idem_claim_ex, idem_claim_many): completing, failing or heartbeating this claim then requires the token';

/*
 * Keys and workflow names are identifiers, compared byte for byte: their
 * indexes no longer depend on the operating system's collation library
 * (a glibc upgrade that reorders text silently breaks unique lookups in
 * text indexes), and each comparison is a memcmp instead of strcoll.
 * The 1.0 state index goes first, so that only the primary key is rebuilt
 * here.
 */
DROP INDEX idem_gate.claims_state_updated_at;
ALTER TABLE idem_gate.claims
	ALTER COLUMN workflow TYPE pg_catalog.text COLLATE pg_catalog."C",
	ALTER COLUMN key TYPE pg_catalog.text COLLATE pg_catalog."C";

/*
 * The janitor works per workflow: each workflow's expired rows and stuck
 * claims are one range of this index, so a short policy on one workflow
 * costs what expires there, not a walk over every other workflow's rows.
 * Tokens are unique, so (updated_at, token) orders rows totally and each
 * batch resumes exactly after the last one, even among rows that share a
 * timestamp.
 */
CREATE INDEX claims_state_workflow_updated_at
	ON idem_gate.claims (state, workflow, updated_at, token);

/* pg_dump keeps the claims and the token sequence's position. */
SELECT pg_catalog.pg_extension_config_dump('idem_gate.claims', '');
SELECT pg_catalog.pg_extension_config_dump('idem_gate.token_seq', '');

/* Canonical JSON: a NULL numbers or fields is an error, not a NULL hash. */
ALTER FUNCTION @extschema@.idem_canonical(pg_catalog.jsonb, pg_catalog.text) CALLED ON NULL INPUT;
ALTER FUNCTION @extschema@.idem_canonical(pg_catalog.json, pg_catalog.text) CALLED ON NULL INPUT;
ALTER FUNCTION @extschema@.idem_hash(pg_catalog.jsonb, pg_catalog.text) CALLED ON NULL INPUT;
ALTER FUNCTION @extschema@.idem_hash(pg_catalog.json, pg_catalog.text) CALLED ON NULL INPUT;
ALTER FUNCTION @extschema@.idem_hash(pg_catalog.jsonb, pg_catalog.text[], pg_catalog.text) CALLED ON NULL INPUT;

CREATE FUNCTION @extschema@.idem_claim_many(keys text[], workflow text,
	stale_interval interval DEFAULT NULL, fingerprints text[] DEFAULT NULL,
	execution_id text DEFAULT NULL)
RETURNS TABLE (ord integer, key text, outcome idem_gate.outcome, token bigint,
	attempt integer, state idem_gate.state, result jsonb, claimed_at timestamptz)
AS 'MODULE_PATHNAME', 'idem_claim_many'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.idem_claim_many(text[], text, interval, text[], text) IS 'claim many keys of one workflow at once: one row per element, in input order';
REVOKE ALL ON FUNCTION @extschema@.idem_claim_many(text[], text, interval, text[], text) FROM PUBLIC;

CREATE FUNCTION @extschema@.idem_release(key text, workflow text,
	reason text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_release'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.idem_release(text, text, text) IS 'operator: forget a claim in any state, so that the next delivery is new; recorded in idem_gate.audit';
REVOKE ALL ON FUNCTION @extschema@.idem_release(text, text, text) FROM PUBLIC;

/*
 * idem_resolve gains a reason.  A new signature is a new function: the
 * GRANTs a DBA gave on the 1.0 one are carried over to it.
 */
DO $$
DECLARE
	grants text[];
	g text;
BEGIN
	SELECT pg_catalog.array_agg(pg_catalog.format('GRANT EXECUTE ON FUNCTION @extschema@.idem_resolve(text, text, text, jsonb, text) TO %s%s',
			CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
				 ELSE pg_catalog.quote_ident(r.rolname) END,
			CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END))
	  INTO grants
	  FROM pg_catalog.pg_proc p
	 CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) a
	  LEFT JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) a.grantee
	 WHERE p.oid OPERATOR(pg_catalog.=) '@extschema@.idem_resolve(text, text, text, jsonb)'::pg_catalog.regprocedure
	   AND a.grantee OPERATOR(pg_catalog.<>) p.proowner;

	DROP FUNCTION @extschema@.idem_resolve(text, text, text, jsonb);
	CREATE FUNCTION @extschema@.idem_resolve(key text, workflow text,
		resolution text, result jsonb DEFAULT NULL, reason text DEFAULT NULL)
	RETURNS idem_gate.state
	AS 'MODULE_PATHNAME', 'idem_resolve_1_1'
	LANGUAGE C VOLATILE;
	REVOKE ALL ON FUNCTION @extschema@.idem_resolve(text, text, text, jsonb, text) FROM PUBLIC;
	FOREACH g IN ARRAY COALESCE(grants, '{}') LOOP
		EXECUTE g;
	END LOOP;
END
$$;
COMMENT ON FUNCTION @extschema@.idem_resolve(text, text, text, jsonb, text) IS 'operator decision on a needs_review or processing claim: completed or retry; recorded in idem_gate.audit';
