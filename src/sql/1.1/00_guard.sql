/* idem_gate 1.0 -> 1.1 (also the second half of a fresh 1.1 install) */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION idem_gate UPDATE TO '1.1'" to load this file. \quit

/*
 * Refuse to install next to planted overloads.  Where untrusted roles may
 * CREATE in the API's schema (public, in databases created before
 * PostgreSQL 15), a function named like the API and owned by another role
 * would be picked by an operator's call, and run with the operator's
 * rights, or make n8n's calls ambiguous.  The extension's own functions
 * are members of it and pass.
 */
DO $$
DECLARE
	planted text;
BEGIN
	SELECT pg_catalog.string_agg(p.oid::pg_catalog.regprocedure::pg_catalog.text
			 OPERATOR(pg_catalog.||) ' owned by '
			 OPERATOR(pg_catalog.||) pg_catalog.quote_ident(r.rolname), ', '
			 ORDER BY p.oid::pg_catalog.regprocedure::pg_catalog.text)
	  INTO planted
	  FROM pg_catalog.pg_proc p
	  JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) p.proowner
	 WHERE p.pronamespace OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.regnamespace
	   AND p.proname OPERATOR(pg_catalog.=) ANY (ARRAY['idem_claim', 'idem_claim_ex',
			'idem_claim_many', 'idem_heartbeat', 'idem_complete', 'idem_fail',
			'idem_resolve', 'idem_release', 'idem_status', 'idem_canonical',
			'idem_hash']::pg_catalog.name[])
	   AND p.proowner OPERATOR(pg_catalog.<>) (SELECT u.oid FROM pg_catalog.pg_roles u
											   WHERE u.rolname OPERATOR(pg_catalog.=) CURRENT_USER)
	   AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
					   WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
						 AND d.objid OPERATOR(pg_catalog.=) p.oid
						 AND d.deptype OPERATOR(pg_catalog.=) 'e');
	IF planted IS NOT NULL THEN
		RAISE EXCEPTION 'schema @extschema@ already holds functions named like the idem_gate API: %', planted
			USING ERRCODE = '42723',
				  DETAIL = 'A function owned by another role and named like an idem_gate function would be called instead of it, with the caller''s rights, or make calls ambiguous.',
				  HINT = 'Drop those functions, and run REVOKE CREATE ON SCHEMA public FROM PUBLIC so that untrusted roles cannot plant them again; or install idem_gate in a schema only trusted roles can write.';
	END IF;
END
$$;
