
/*
 * After a blue-green switch-over, the next token must be larger than every
 * token the old server handed out.  A claim released there has no row any
 * more, but its release is in the audit trail (replicated with the claims),
 * with its token: 1.1 looked at the claims only, and handed a released
 * run's token out again.
 */
DO $$
DECLARE
	g pg_catalog.text[];
BEGIN
	SELECT idem_gate.upgrade_grants(p.proacl, p.proowner, 'FUNCTION idem_gate.sync_token_seq()')
	  INTO g
	  FROM pg_catalog.pg_proc p
	 WHERE p.oid OPERATOR(pg_catalog.=) 'idem_gate.sync_token_seq()'::pg_catalog.regprocedure;
	DROP FUNCTION idem_gate.sync_token_seq();
	CREATE FUNCTION idem_gate.sync_token_seq()
	RETURNS bigint
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS $body$
	DECLARE
		last_token bigint;
		last_id bigint;
	BEGIN
		LOCK TABLE ONLY idem_gate.claims, ONLY idem_gate.audit IN SHARE MODE;
		SELECT GREATEST(s.last_value,
				(SELECT pg_catalog.max(c.token) FROM ONLY idem_gate.claims c),
				(SELECT pg_catalog.max(a.token) FROM ONLY idem_gate.audit a))
		  INTO last_token
		  FROM idem_gate.token_seq s;
		PERFORM pg_catalog.setval('idem_gate.token_seq'::pg_catalog.regclass, last_token, true);

		SELECT GREATEST(s.last_value, (SELECT pg_catalog.max(a.id) FROM ONLY idem_gate.audit a))
		  INTO last_id
		  FROM idem_gate.audit_id_seq s;
		PERFORM pg_catalog.setval('idem_gate.audit_id_seq'::pg_catalog.regclass, last_id, true);
		RETURN last_token OPERATOR(pg_catalog.+) 1;
	END
	$body$;
	REVOKE ALL ON FUNCTION idem_gate.sync_token_seq() FROM PUBLIC;
	PERFORM idem_gate.outside_extension(g);
END
$$;
COMMENT ON FUNCTION idem_gate.sync_token_seq() IS 'after a switch-over by logical replication: set the token sequence past every replicated claim and released claim (and the audit id sequence past every audit row); returns the next token';
