
/*
 * Per-workflow access, for reads too.  With idem_gate.workflow_acl on, a
 * role sees in idem_gate.claims and idem_gate.audit only the rows of the
 * workflows granted to it, whatever table privileges a DBA gave it;
 * superusers and the extension's owner (who also owns the tables, and so
 * passes row security) see everything.  With the setting off the policies
 * let everything through.  The gate's functions act as the table owner and
 * are not filtered: they check the caller's grants themselves.
 * workflow_visible() is executable by everyone, because a policy runs its
 * expressions with the privileges of whoever reads; it tells only whether
 * the current role may see a workflow it names.
 */
CREATE FUNCTION idem_gate.workflow_visible(workflow pg_catalog.text)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'idem_gate_workflow_visible'
LANGUAGE C STABLE PARALLEL RESTRICTED;
COMMENT ON FUNCTION idem_gate.workflow_visible(pg_catalog.text) IS 'may the current role see this workflow''s claims and audit rows (per-workflow access)';

/*
 * Permissive policies are ORed: a DBA who restricted a role with row
 * security of their own under 1.1 (permissive, the default) would find it
 * widened by the extension's own permissive policy, and the role would
 * see every workflow.  So where a table already has permissive policies,
 * the extension's policy there is restrictive instead: the DBA's keep
 * deciding what a role sees, and per-workflow access narrows it further.
 * A NOTICE names them.  A fresh install has none, and a DBA who adds one
 * later makes it AS RESTRICTIVE (docs/security.md).
 */
DO $$
DECLARE
	t pg_catalog.text;
	theirs pg_catalog.text;
	level pg_catalog.text := pg_catalog.current_setting('client_min_messages');
BEGIN
	FOREACH t IN ARRAY ARRAY['claims', 'audit'] LOOP
		SELECT pg_catalog.string_agg(pg_catalog.quote_ident(p.polname::pg_catalog.text), ', '
				ORDER BY p.polname)
		  INTO theirs
		  FROM pg_catalog.pg_policy p
		 WHERE p.polrelid OPERATOR(pg_catalog.=) pg_catalog.format('idem_gate.%I', t)::pg_catalog.regclass
		   AND p.polpermissive;
		EXECUTE pg_catalog.format('ALTER TABLE idem_gate.%I ENABLE ROW LEVEL SECURITY', t);
		EXECUTE pg_catalog.format(
			'CREATE POLICY %I ON idem_gate.%I AS %s USING (idem_gate.workflow_visible(workflow)) WITH CHECK (idem_gate.workflow_visible(workflow))',
			t OPERATOR(pg_catalog.||) '_by_workflow', t,
			CASE WHEN theirs IS NULL THEN 'PERMISSIVE' ELSE 'RESTRICTIVE' END);
		IF theirs IS NOT NULL THEN
			PERFORM pg_catalog.set_config('client_min_messages', 'notice', true);
			RAISE NOTICE 'idem_gate.% has permissive row security policies of yours (%): idem_gate''s own policy % there is restrictive, so that yours keep deciding what a role sees',
				t, theirs, t OPERATOR(pg_catalog.||) '_by_workflow'
				USING HINT = 'Your policies work as under 1.1; per-workflow access (idem_gate.workflow_acl) narrows what they let a role see.';
			PERFORM pg_catalog.set_config('client_min_messages', level, true);
		END IF;
	END LOOP;
END
$$;

/*
 * Delegated administration: grant_workflow() and revoke_workflow() act as
 * the extension's owner, as the gate's functions do, so that a role given
 * EXECUTE on them can use them; such a role grants and revokes only the
 * patterns its own grants cover (superusers and the owner any pattern).
 * They are C functions now, guarded against code attached to the grants
 * table; the GRANTs a DBA gave on the 1.1 ones are carried over.
 */
DO $$
DECLARE
	g pg_catalog.text[];
BEGIN
	SELECT pg_catalog.array_cat(
			idem_gate.upgrade_grants(a.proacl, a.proowner, 'FUNCTION idem_gate.grant_workflow(name, text)'),
			idem_gate.upgrade_grants(b.proacl, b.proowner, 'FUNCTION idem_gate.revoke_workflow(name, text)'))
	  INTO g
	  FROM pg_catalog.pg_proc a, pg_catalog.pg_proc b
	 WHERE a.oid OPERATOR(pg_catalog.=) 'idem_gate.grant_workflow(name, text)'::pg_catalog.regprocedure
	   AND b.oid OPERATOR(pg_catalog.=) 'idem_gate.revoke_workflow(name, text)'::pg_catalog.regprocedure;

	DROP FUNCTION idem_gate.grant_workflow(pg_catalog.name, pg_catalog.text);
	DROP FUNCTION idem_gate.revoke_workflow(pg_catalog.name, pg_catalog.text);
	CREATE FUNCTION idem_gate.grant_workflow(role pg_catalog.name, pattern pg_catalog.text)
	RETURNS pg_catalog.bool
	AS 'MODULE_PATHNAME', 'idem_gate_grant_workflow'
	LANGUAGE C VOLATILE;
	CREATE FUNCTION idem_gate.revoke_workflow(role pg_catalog.name, pattern pg_catalog.text)
	RETURNS pg_catalog.bool
	AS 'MODULE_PATHNAME', 'idem_gate_revoke_workflow'
	LANGUAGE C VOLATILE;
	REVOKE ALL ON FUNCTION idem_gate.grant_workflow(pg_catalog.name, pg_catalog.text) FROM PUBLIC;
	REVOKE ALL ON FUNCTION idem_gate.revoke_workflow(pg_catalog.name, pg_catalog.text) FROM PUBLIC;
	PERFORM idem_gate.outside_extension(g);
END
$$;
COMMENT ON FUNCTION idem_gate.grant_workflow(pg_catalog.name, pg_catalog.text) IS 'let a role (and its members) use the workflows a pattern matches (% any run of characters; _ literal; \% and \\ a literal % and \); false if already granted';
COMMENT ON FUNCTION idem_gate.revoke_workflow(pg_catalog.name, pg_catalog.text) IS 'take back a grant_workflow(); false if there was no such grant';

/* 1.1's argument check of the two, which they no longer call */
DROP FUNCTION idem_gate.workflow_role(pg_catalog.name, pg_catalog.text);

/*
 * 1.1 matched patterns with LIKE, where _ is a wildcard too; from 1.2 on
 * _ is a literal underscore, so a pattern holding one matches fewer
 * workflows than before.  Listed here so that the DBA can check them.
 */
DO $$
DECLARE
	held pg_catalog.text;
	level pg_catalog.text := pg_catalog.current_setting('client_min_messages');
BEGIN
	SELECT pg_catalog.string_agg(pg_catalog.format('%s to %s', pg_catalog.quote_literal(a.pattern),
			a.role::pg_catalog.text), ', ' ORDER BY a.pattern, a.role::pg_catalog.text)
	  INTO held
	  FROM ONLY idem_gate.workflow_acl a
	 WHERE pg_catalog.strpos(a.pattern, '_') OPERATOR(pg_catalog.>) 0;
	IF held IS NOT NULL THEN
		PERFORM pg_catalog.set_config('client_min_messages', 'notice', true);
		RAISE NOTICE 'idem_gate 1.2 reads _ in a workflow pattern as a literal underscore: these grants now match fewer workflows than under 1.1: %', held
			USING HINT = 'Under 1.1, _ matched any one character. Grant an extra pattern where a workflow needs one, for example with % in place of _.';
		PERFORM pg_catalog.set_config('client_min_messages', level, true);
	END IF;
END
$$;
