
/*
 * Logical replication carries rows, not sequences: on a subscriber the
 * token sequence still starts at 1, and a switch-over would hand out
 * tokens that restored rows already hold (and audit ids that collide).
 * Run this on the new primary after the last change has arrived and
 * before the first claim there.
 */
CREATE FUNCTION idem_gate.sync_token_seq()
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	last_token bigint;
	last_id bigint;
BEGIN
	LOCK TABLE idem_gate.claims IN SHARE MODE;
	SELECT GREATEST(COALESCE(pg_catalog.max(c.token), 1), s.last_value)
	  INTO last_token
	  FROM idem_gate.claims c, idem_gate.token_seq s
	 GROUP BY s.last_value;
	IF last_token IS NULL THEN
		SELECT s.last_value INTO last_token FROM idem_gate.token_seq s;
	END IF;
	PERFORM pg_catalog.setval('idem_gate.token_seq'::pg_catalog.regclass, last_token, true);

	SELECT GREATEST(COALESCE(pg_catalog.max(a.id), 1), s.last_value)
	  INTO last_id
	  FROM idem_gate.audit a, idem_gate.audit_id_seq s
	 GROUP BY s.last_value;
	IF last_id IS NOT NULL THEN
		PERFORM pg_catalog.setval('idem_gate.audit_id_seq'::pg_catalog.regclass, last_id, true);
	END IF;
	RETURN last_token OPERATOR(pg_catalog.+) 1;
END
$$;
COMMENT ON FUNCTION idem_gate.sync_token_seq() IS 'after a switch-over by logical replication: set the token (and audit id) sequences past every replicated row; returns the next token';
REVOKE ALL ON FUNCTION idem_gate.sync_token_seq() FROM PUBLIC;
