/*
 * idem_gate managed edition: administration (the C edition's
 * src/acl_sql.c, src/keyed_sql.c, src/stats.c and idem_gate.preloaded()),
 * with what the managed edition cannot do said by its answers: there is
 * no shared memory for counters and no secret file for keyed workflows.
 */

/*
 * A pattern's symbols, as the C edition reads them: a wildcard (NULL)
 * for %, one literal character otherwise (\% and \\ are % and \).
 * A backslash before anything else is refused.
 */
CREATE FUNCTION idem_gate.m_pattern_symbols(pattern pg_catalog.text)
	RETURNS pg_catalog.text[]
	LANGUAGE plpgsql IMMUTABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	out pg_catalog.text[];
	bad pg_catalog.bool;
BEGIN
	/* one pass over the characters: \x, or one character */
	SELECT pg_catalog.array_agg(CASE WHEN m.t OPERATOR(pg_catalog.=) '%' THEN NULL
									 WHEN pg_catalog.length(m.t) OPERATOR(pg_catalog.=) 2 THEN pg_catalog.substr(m.t, 2, 1)
									 ELSE m.t END ORDER BY m.n),
		   pg_catalog.bool_or(m.t OPERATOR(pg_catalog.=) E'\\'
							  OR (pg_catalog.length(m.t) OPERATOR(pg_catalog.=) 2
								  AND pg_catalog.substr(m.t, 2, 1) OPERATOR(pg_catalog.<>) ALL (ARRAY['%', E'\\'])))
	  INTO out, bad
	  FROM (SELECT x.a[1] AS t, x.n
			  FROM pg_catalog.regexp_matches(pattern, E'\\\\.|.', 'g') WITH ORDINALITY AS x(a, n)) m;
	IF bad THEN
		RAISE EXCEPTION 'pattern "%" has a backslash that escapes nothing', idem_gate.m_display(pattern)
			USING ERRCODE = '22023',
				  DETAIL = 'In a pattern, % is any run of characters, \% a literal % and \\ a literal backslash; every other character, _ included, stands for itself.',
				  HINT = 'Double the backslash to match one.';
	END IF;
	RETURN COALESCE(out, '{}');
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_pattern_symbols(pg_catalog.text) FROM PUBLIC;

/*
 * Does pattern p match every workflow pattern q matches?  q's wildcard
 * (NULL) can only be met by one of p's; a literal by the same literal or
 * p's wildcard.  Glob matching, greedy with one step back to p's last
 * wildcard, so a long pattern costs no recursion.
 */
CREATE FUNCTION idem_gate.m_symbols_cover(q pg_catalog.text[], p pg_catalog.text[])
	RETURNS pg_catalog.bool
	LANGUAGE plpgsql IMMUTABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	nq pg_catalog.int4 := COALESCE(pg_catalog.cardinality(q), 0);
	np pg_catalog.int4 := COALESCE(pg_catalog.cardinality(p), 0);
	i pg_catalog.int4 := 1;
	j pg_catalog.int4 := 1;
	star_j pg_catalog.int4 := 0;
	star_i pg_catalog.int4 := 0;
BEGIN
	WHILE i OPERATOR(pg_catalog.<=) nq LOOP
		IF j OPERATOR(pg_catalog.<=) np AND p[j] IS NOT NULL AND q[i] IS NOT NULL
		   AND p[j] OPERATOR(pg_catalog.=) q[i] THEN
			i := i OPERATOR(pg_catalog.+) 1;
			j := j OPERATOR(pg_catalog.+) 1;
		ELSIF j OPERATOR(pg_catalog.<=) np AND p[j] IS NULL THEN
			star_j := j;
			star_i := i;
			j := j OPERATOR(pg_catalog.+) 1;
		ELSIF star_j OPERATOR(pg_catalog.>) 0 THEN
			star_i := star_i OPERATOR(pg_catalog.+) 1;
			i := star_i;
			j := star_j OPERATOR(pg_catalog.+) 1;
		ELSE
			RETURN false;
		END IF;
	END LOOP;
	WHILE j OPERATOR(pg_catalog.<=) np AND p[j] IS NULL LOOP
		j := j OPERATOR(pg_catalog.+) 1;
	END LOOP;
	RETURN j OPERATOR(pg_catalog.>) np;
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_symbols_cover(pg_catalog.text[], pg_catalog.text[]) FROM PUBLIC;

/*
 * grant_workflow's and revoke_workflow's body: as the owner, for the
 * patterns the caller's own grants cover (superusers and the owner: any).
 */
CREATE FUNCTION idem_gate_call.acl_write(caller pg_catalog.regrole, grant_it pg_catalog.bool,
										 role pg_catalog.name, pattern pg_catalog.text)
	RETURNS pg_catalog.bool
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	who pg_catalog.oid;
	target pg_catalog.oid;
	symbols pg_catalog.text[];
	verb pg_catalog.text := CASE WHEN grant_it THEN 'grant' ELSE 'revoke' END;
BEGIN
	who := idem_gate.m_caller(caller, pg_catalog.format('idem_gate.%s_workflow(name,text)', verb));
	IF role IS NULL OR pattern IS NULL THEN
		RAISE EXCEPTION '% must not be null', CASE WHEN role IS NULL THEN 'role' ELSE 'pattern' END
			USING ERRCODE = '22004', HINT = 'Name a role and a pattern of workflows, such as ''orders_%''.';
	END IF;
	IF pattern OPERATOR(pg_catalog.=) '' THEN
		RAISE EXCEPTION 'pattern must not be empty' USING ERRCODE = '22023', HINT = 'Use ''%'' for every workflow.';
	END IF;
	symbols := idem_gate.m_pattern_symbols(pattern);
	SELECT u.oid INTO target FROM pg_catalog.pg_roles u WHERE u.rolname OPERATOR(pg_catalog.=) role;
	IF target IS NULL THEN
		RAISE EXCEPTION 'role "%" does not exist', role
			USING ERRCODE = '42704', HINT = 'Check the spelling (role names are case sensitive), or create the role first.';
	END IF;
	IF who OPERATOR(pg_catalog.<>) idem_gate.m_owner()
	   AND NOT (SELECT u.rolsuper FROM pg_catalog.pg_roles u WHERE u.oid OPERATOR(pg_catalog.=) who)
	   AND NOT EXISTS (SELECT 1 FROM ONLY idem_gate.workflow_acl a
						WHERE pg_catalog.pg_has_role(who, a.role::pg_catalog.oid, 'USAGE')
						  AND idem_gate.m_symbols_cover(symbols, idem_gate.m_pattern_symbols(a.pattern))) THEN
		RAISE EXCEPTION 'role "%" may not % pattern "%"',
			(SELECT u.rolname FROM pg_catalog.pg_roles u WHERE u.oid OPERATOR(pg_catalog.=) who), verb,
			idem_gate.m_display(pattern)
			USING ERRCODE = '42501',
				  DETAIL = 'A role that administers per-workflow access grants and revokes only patterns that its own grants cover.',
				  HINT = pg_catalog.format('Ask a superuser to %s it, or grant the administering role a pattern that covers it.', verb);
	END IF;
	PERFORM idem_gate.m_readonly(pg_catalog.format('idem_gate.%s_workflow(name,text)', verb));
	PERFORM idem_gate.m_refuse_rules(ARRAY['idem_gate.workflow_acl'::pg_catalog.regclass]);
	PERFORM idem_gate.m_refuse_cached_code(ARRAY['idem_gate.workflow_acl'::pg_catalog.regclass]);
	IF grant_it THEN
		INSERT INTO idem_gate.workflow_acl (role, pattern) VALUES (target::pg_catalog.regrole, acl_write.pattern)
		ON CONFLICT DO NOTHING;
	ELSE
		DELETE FROM ONLY idem_gate.workflow_acl a
		 WHERE a.role OPERATOR(pg_catalog.=) target::pg_catalog.regrole
		   AND a.pattern OPERATOR(pg_catalog.=) acl_write.pattern;
	END IF;
	RETURN FOUND;
END
$$;
GRANT EXECUTE ON FUNCTION idem_gate_call.acl_write(pg_catalog.regrole, pg_catalog.bool, pg_catalog.name, pg_catalog.text) TO PUBLIC;

CREATE FUNCTION idem_gate.grant_workflow(role name, pattern text)
	RETURNS boolean
	LANGUAGE sql VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS $$
SELECT idem_gate_call.acl_write(CURRENT_USER::pg_catalog.regrole, true, role, pattern)
$$;

CREATE FUNCTION idem_gate.revoke_workflow(role name, pattern text)
	RETURNS boolean
	LANGUAGE sql VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS $$
SELECT idem_gate_call.acl_write(CURRENT_USER::pg_catalog.regrole, false, role, pattern)
$$;

/*
 * The C edition drops every backend's cached decision when the grants
 * change; the managed edition caches nothing, so there is nothing to drop.
 */
CREATE FUNCTION idem_gate.workflow_acl_changed()
	RETURNS trigger
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	RETURN NULL;
END
$$;

/*
 * Keyed workflows need the secret file only the C edition can read: a
 * policy that makes a workflow keyed is refused, never accepted and then
 * ignored.
 */
CREATE FUNCTION idem_gate.policies_changed()
	RETURNS trigger
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	IF TG_OP OPERATOR(pg_catalog.<>) 'TRUNCATE'
	   AND EXISTS (SELECT 1 FROM ONLY idem_gate.policies p WHERE p.keyed) THEN
		RAISE EXCEPTION 'keyed workflows need the C edition of idem_gate'
			USING ERRCODE = '0A000',
				  DETAIL = 'A keyed workflow stores an HMAC of each key under a secret from idem_gate.secret_file, which only the C extension can read and keep from other roles.',
				  HINT = 'Keep keyed = false here, or move to the C extension (docs/managed.md).';
	END IF;
	RETURN NULL;
END
$$;

/*
 * idem_key's body: with no keyed workflows, the stored form of a key is the
 * key.  The workflow, its first argument, is checked first, as in C.
 */
CREATE FUNCTION idem_gate_call.idem_key(caller pg_catalog.regrole, workflow pg_catalog.text,
										key pg_catalog.text)
	RETURNS pg_catalog.text
	LANGUAGE plpgsql STABLE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	PERFORM idem_gate.m_check_name(workflow, 'workflow', false, false);
	PERFORM idem_gate.m_begin(caller, '@extschema@.idem_key(text,text)', key, workflow);
	RETURN key;
END
$$;
GRANT EXECUTE ON FUNCTION idem_gate_call.idem_key(pg_catalog.regrole, pg_catalog.text, pg_catalog.text) TO PUBLIC;

CREATE FUNCTION @extschema@.idem_key(workflow pg_catalog.text, key pg_catalog.text)
RETURNS pg_catalog.text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT idem_gate_call.idem_key(CURRENT_USER::pg_catalog.regrole, workflow, key)
$$;

/*
 * idem_key_forms(key): a key's stored form in each keyed workflow the
 * caller may see.  The managed edition has no keyed workflow, so there is
 * none: no row, whatever the key.  The body checks the key as C does (a
 * NULL, empty or too long key is refused), as the owner of the checks.
 */
CREATE FUNCTION idem_gate_call.idem_key_forms(key pg_catalog.text,
	OUT workflow pg_catalog.text, OUT stored_key pg_catalog.text)
	RETURNS SETOF record
	LANGUAGE plpgsql STABLE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	PERFORM idem_gate.m_check_name(key, 'key', true, true);
END
$$;
GRANT EXECUTE ON FUNCTION idem_gate_call.idem_key_forms(pg_catalog.text) TO PUBLIC;

CREATE FUNCTION @extschema@.idem_key_forms(key pg_catalog.text,
	OUT workflow pg_catalog.text, OUT stored_key pg_catalog.text)
RETURNS SETOF record
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT f.workflow, f.stored_key FROM idem_gate_call.idem_key_forms(key) AS f
$$;

/* The managed edition reads no secret file: no secret is in force. */
CREATE FUNCTION idem_gate.secret_ids(OUT secret_id pg_catalog.text, OUT file_order pg_catalog.int4)
RETURNS SETOF record
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT NULL::pg_catalog.text, NULL::pg_catalog.int4 WHERE false
$$;

/* No shared_preload_libraries: the managed edition is never preloaded. */
CREATE FUNCTION idem_gate.preloaded()
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT false
$$;

/*
 * The counters live in the C edition's shared memory: here they are not
 * available, as in a C edition that is not preloaded.
 */
CREATE FUNCTION idem_gate.stats_counters(
	OUT available boolean,
	OUT claims_new bigint, OUT claims_in_flight bigint,
	OUT claims_completed bigint, OUT claims_stale_taken bigint,
	OUT claims_needs_review bigint,
	OUT completions bigint, OUT fails_retryable bigint,
	OUT fails_needs_review bigint, OUT resolves bigint,
	OUT deleted_completed bigint, OUT deleted_failed bigint,
	OUT alerts bigint, OUT escalations bigint, OUT janitor_passes bigint,
	OUT releases bigint, OUT receipts_cleared bigint,
	OUT fingerprint_mismatches bigint, OUT sql_fallbacks bigint,
	OUT last_pass_at timestamptz, OUT last_pass_ms double precision,
	OUT reset_at timestamptz)
RETURNS record
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT false, NULL::pg_catalog.int8, NULL::pg_catalog.int8, NULL::pg_catalog.int8,
	   NULL::pg_catalog.int8, NULL::pg_catalog.int8, NULL::pg_catalog.int8,
	   NULL::pg_catalog.int8, NULL::pg_catalog.int8, NULL::pg_catalog.int8,
	   NULL::pg_catalog.int8, NULL::pg_catalog.int8, NULL::pg_catalog.int8,
	   NULL::pg_catalog.int8, NULL::pg_catalog.int8, NULL::pg_catalog.int8,
	   NULL::pg_catalog.int8, NULL::pg_catalog.int8, NULL::pg_catalog.int8,
	   NULL::pg_catalog.timestamptz, NULL::pg_catalog.float8, NULL::pg_catalog.timestamptz
$$;

CREATE FUNCTION idem_gate.stats_reset()
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	RAISE EXCEPTION 'idem_gate counters are unavailable'
		USING ERRCODE = '55000',
			  DETAIL = 'The counters live in shared memory, which only the C edition of idem_gate has, when it is preloaded.',
			  HINT = 'The live gauges of idem_gate.stats and idem_gate.workflow_stats work without them.';
END
$$;
