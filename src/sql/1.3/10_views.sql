
/*
 * Every view that shows claims filters its rows for its reader
 * (idem_gate.workflow_visible()).  As security barriers, no expression of
 * the reader's own WHERE runs on a row before that filter has passed it:
 * a cheap function of the reader's would otherwise be evaluated first,
 * and see other workflows' keys, payloads and errors.  Only leakproof
 * operators (a workflow's equality, for one) still reach into the view,
 * so an indexed filter by workflow stays cheap.
 */
ALTER VIEW idem_gate.inbox SET (security_barrier = true);
ALTER VIEW idem_gate.workflow_stats SET (security_barrier = true);
ALTER VIEW idem_gate.stats SET (security_barrier = true);
ALTER VIEW idem_gate.stats_gauges SET (security_barrier = true);
ALTER VIEW idem_gate.secrets SET (security_barrier = true);

/*
 * On Citus, distribute() replaces workflow_stats and stats with their
 * cluster-wide forms, and CREATE OR REPLACE VIEW drops a view's options:
 * the distribute() of 1.2 now runs as a step of one that makes every view
 * a security barrier again afterwards.  The GRANTs a DBA gave on it are
 * carried over, as the DBA's.
 */
ALTER FUNCTION idem_gate.distribute(integer) RENAME TO distribute_steps;
COMMENT ON FUNCTION idem_gate.distribute_steps(integer) IS 'the steps of idem_gate.distribute() (1.2); call idem_gate.distribute() instead';

CREATE FUNCTION idem_gate.distribute(shard_count integer DEFAULT 32)
RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	done text;
	v text;
BEGIN
	done := idem_gate.distribute_steps(shard_count);
	FOREACH v IN ARRAY ARRAY['inbox', 'workflow_stats', 'stats', 'stats_gauges', 'secrets'] LOOP
		EXECUTE pg_catalog.format('ALTER VIEW idem_gate.%I SET (security_barrier = true)', v);
	END LOOP;
	RETURN done;
END
$$;
COMMENT ON FUNCTION idem_gate.distribute(integer) IS 'on a Citus coordinator: distribute the gate by key and run every single-key API call on the node of its key';
REVOKE ALL ON FUNCTION idem_gate.distribute(integer) FROM PUBLIC;

DO $$
DECLARE
	g pg_catalog.text[];
	grantee record;
BEGIN
	SELECT pg_catalog.array_agg(pg_catalog.format('GRANT EXECUTE ON FUNCTION idem_gate.distribute(integer) TO %s%s',
			CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
				 ELSE pg_catalog.quote_ident(r.rolname) END,
			CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END))
	  INTO g
	  FROM pg_catalog.pg_proc p
	 CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) a
	  LEFT JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) a.grantee
	 WHERE p.oid OPERATOR(pg_catalog.=) 'idem_gate.distribute_steps(integer)'::pg_catalog.regprocedure
	   AND a.grantee OPERATOR(pg_catalog.<>) p.proowner;
	IF g IS NOT NULL THEN
		PERFORM idem_gate.outside_extension(g);
	END IF;
	-- the steps are the new function's, not the DBA's to call
	FOR grantee IN SELECT DISTINCT CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
							 ELSE pg_catalog.quote_ident(u.rolname) END AS who
			   FROM pg_catalog.pg_proc p
			  CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) a
			   LEFT JOIN pg_catalog.pg_roles u ON u.oid OPERATOR(pg_catalog.=) a.grantee
			  WHERE p.oid OPERATOR(pg_catalog.=) 'idem_gate.distribute_steps(integer)'::pg_catalog.regprocedure
				AND a.grantee OPERATOR(pg_catalog.<>) p.proowner LOOP
		EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION idem_gate.distribute_steps(integer) FROM %s CASCADE', grantee.who);
	END LOOP;
END
$$;
