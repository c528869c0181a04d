/* idem_gate 1.1 -> 1.2 (also the last part of a fresh 1.2 install) */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION idem_gate UPDATE TO '1.2'" to load this file. \quit

SET LOCAL search_path = pg_catalog, pg_temp;

/*
 * Helpers of this update, dropped again at its end (99_end.sql).  An
 * object the update must replace keeps the privileges DBAs granted on it:
 * upgrade_grants() writes them as GRANT statements for the new object, and
 * outside_extension() runs those as a DBA's grants, not as the
 * extension's own initial privileges, so that pg_dump keeps them.
 */
CREATE FUNCTION idem_gate.outside_extension(statements pg_catalog.text[])
RETURNS void
AS 'MODULE_PATHNAME', 'idem_gate_outside_extension'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION idem_gate.outside_extension(pg_catalog.text[]) FROM PUBLIC;

CREATE FUNCTION idem_gate.upgrade_grants(acl pg_catalog.aclitem[],
	owner pg_catalog.oid, target pg_catalog.text)
RETURNS pg_catalog.text[]
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT pg_catalog.array_agg(pg_catalog.format('GRANT %s ON %s TO %s%s%s',
			a.privilege_type, target,
			CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
				 ELSE pg_catalog.quote_ident(r.rolname) END,
			CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END,
			CASE WHEN a.grantor OPERATOR(pg_catalog.=) owner THEN ''
				 ELSE ' GRANTED BY ' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(g.rolname) END)
			ORDER BY a.grantor OPERATOR(pg_catalog.<>) owner, g.rolname, r.rolname,
				a.privilege_type)
	  FROM pg_catalog.aclexplode(acl) a
	  LEFT JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) a.grantee
	  LEFT JOIN pg_catalog.pg_roles g ON g.oid OPERATOR(pg_catalog.=) a.grantor
	 WHERE a.grantee OPERATOR(pg_catalog.<>) owner
$$;
REVOKE ALL ON FUNCTION idem_gate.upgrade_grants(pg_catalog.aclitem[], pg_catalog.oid, pg_catalog.text) FROM PUBLIC;

/*
 * The update to 1.1 carried GRANTs over to the objects it replaced
 * (idem_resolve with a reason, the counters) inside its own script, so
 * they were recorded as the extension's initial privileges and a dump
 * and restore lost them.  They are given again here as the DBA's.  On a
 * fresh install there is nothing to give.
 */
DO $$
DECLARE
	fn pg_catalog.regprocedure;
	g pg_catalog.text[];
	r pg_catalog.text;
BEGIN
	FOREACH fn IN ARRAY ARRAY['@extschema@.idem_resolve(text, text, text, jsonb, text)',
							  'idem_gate.stats_counters()']::pg_catalog.regprocedure[] LOOP
		SELECT idem_gate.upgrade_grants(p.proacl, p.proowner,
				'FUNCTION ' OPERATOR(pg_catalog.||) fn::pg_catalog.text)
		  INTO g
		  FROM pg_catalog.pg_proc p WHERE p.oid OPERATOR(pg_catalog.=) fn;
		CONTINUE WHEN g IS NULL;
		FOR r IN SELECT DISTINCT CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
								 ELSE pg_catalog.quote_ident(u.rolname) END
				   FROM pg_catalog.pg_proc p
				  CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) a
				   LEFT JOIN pg_catalog.pg_roles u ON u.oid OPERATOR(pg_catalog.=) a.grantee
				  WHERE p.oid OPERATOR(pg_catalog.=) fn
					AND a.grantee OPERATOR(pg_catalog.<>) p.proowner LOOP
			EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM %s CASCADE', fn, r);
		END LOOP;
		PERFORM idem_gate.outside_extension(g);
	END LOOP;
END
$$;
