/*
 * idem_gate managed edition: the frame of one API call.
 *
 * The C edition's src/call.c and src/base.c, in PL/pgSQL: the checks of a
 * key, a workflow and a duration, the display of a value in a message,
 * the settings, and who the caller is.
 *
 * Who the caller is.  A SECURITY DEFINER function cannot see the role that
 * called it (current_user is its owner inside), and the C edition decides
 * per-workflow access and records the acting role from exactly that role.
 * So each API function is SECURITY INVOKER: it passes current_user to its
 * body, idem_gate_call.<name>, which runs as the owner.  The bodies have a
 * schema of their own, which every role may use, so that a role needs no
 * USAGE on idem_gate to call the API, as with the C edition.  A body is
 * executable by every role, and trusts the role it is given only when the session's
 * login may act as it (a member of it, as SET ROLE requires) and that role
 * may execute the API function itself: so calling a body directly gives
 * nothing that the API function and SET ROLE would not.
 */

/*
 * A key or workflow cut to 64 characters for a message, as ig_display():
 * an error about a 255-character key stays readable.
 */
CREATE FUNCTION idem_gate.m_display(v pg_catalog.text)
	RETURNS pg_catalog.text
	LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	RETURN (SELECT CASE WHEN pg_catalog.char_length(v) OPERATOR(pg_catalog.<=) 64 THEN v
					ELSE pg_catalog.left(v, 61) OPERATOR(pg_catalog.||) '...' END);
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_display(pg_catalog.text) FROM PUBLIC;

/*
 * A setting as text, or its default.  The managed edition cannot define
 * settings: idem_gate.* are placeholders, read as the session has them
 * (from ALTER DATABASE ... SET, ALTER ROLE ... SET or SET).  docs/managed.md
 * says what that means for each.
 */
CREATE FUNCTION idem_gate.m_setting(name pg_catalog.text, dflt pg_catalog.text)
	RETURNS pg_catalog.text
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	RETURN (SELECT COALESCE(NULLIF(pg_catalog.current_setting(name, true), ''), dflt));
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_setting(pg_catalog.text, pg_catalog.text) FROM PUBLIC;

/*
 * The hint of a setting refused at its first use (m_setting_number, the
 * janitor's stuck_action): where a value a call meets may have come from,
 * since that is not where the call was made.
 */
CREATE FUNCTION idem_gate.m_setting_hint(name pg_catalog.text)
	RETURNS pg_catalog.text
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $$
SELECT pg_catalog.format('The managed edition reads %s where it is used, not at SET: correct or RESET it where it was set (SET, ALTER ROLE ... SET or ALTER DATABASE ... SET).', name)
$$;
REVOKE ALL ON FUNCTION idem_gate.m_setting_hint(pg_catalog.text) FROM PUBLIC;

/*
 * A number setting, as PostgreSQL reads one of the C edition's: a time in
 * seconds (unit 's': '30d', '15min', '10s', '500ms'; a bare number is
 * seconds), a size in bytes (unit 'B': '1MB', '8kB'; a bare number is
 * bytes) or a count (unit '': a bare number only).  A value that is not
 * one, or is outside [lo, hi], the C edition's bounds of the setting, is
 * refused like PostgreSQL refuses it (22023).  The C edition refuses it at
 * SET; here it is refused at its first use, so that a value that could
 * never be set there cannot silently turn a feature off here (a
 * stuck_after of 0 would never announce a claim).  That first use may be
 * far from the SET (a call of a workflow, a janitor pass of pg_cron), so
 * the hint says where the value comes from.
 */
CREATE FUNCTION idem_gate.m_setting_number(name pg_catalog.text, dflt pg_catalog.text,
										   unit pg_catalog.text, lo pg_catalog.float8 DEFAULT NULL,
										   hi pg_catalog.float8 DEFAULT NULL)
	RETURNS pg_catalog.float8
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	v pg_catalog.text := idem_gate.m_setting(name, dflt);
	m pg_catalog.text[];
	f pg_catalog.float8;
BEGIN
	m := pg_catalog.regexp_match(pg_catalog.btrim(v), '^(-?[0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)$');
	IF m IS NOT NULL THEN
		f := m[1]::pg_catalog.float8 OPERATOR(pg_catalog.*) CASE
			WHEN m[2] OPERATOR(pg_catalog.=) '' THEN 1
			WHEN unit OPERATOR(pg_catalog.=) 's' THEN CASE m[2]
				WHEN 'ms' THEN 0.001 WHEN 's' THEN 1 WHEN 'min' THEN 60
				WHEN 'h' THEN 3600 WHEN 'd' THEN 86400 ELSE NULL END
			WHEN unit OPERATOR(pg_catalog.=) 'B' THEN CASE m[2]
				WHEN 'B' THEN 1 WHEN 'kB' THEN 1024 WHEN 'MB' THEN 1048576
				WHEN 'GB' THEN 1073741824 ELSE NULL END
			ELSE NULL END;
	END IF;
	IF f IS NULL THEN
		RAISE EXCEPTION 'invalid value for parameter "%": "%"', name, v
			USING ERRCODE = '22023',
				  HINT = CASE unit
						 WHEN 's' THEN 'Valid units for this parameter are "ms", "s", "min", "h", and "d". '
						 WHEN 'B' THEN 'Valid units for this parameter are "B", "kB", "MB", and "GB". '
						 ELSE 'This parameter takes a number without a unit. ' END
						 OPERATOR(pg_catalog.||) idem_gate.m_setting_hint(name);
	END IF;
	IF f OPERATOR(pg_catalog.<) lo OR f OPERATOR(pg_catalog.>) hi THEN
		RAISE EXCEPTION '% is outside the valid range for parameter "%" (% .. %)', v, name, lo, hi
			USING ERRCODE = '22023', HINT = idem_gate.m_setting_hint(name);
	END IF;
	RETURN f;
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_setting_number(pg_catalog.text, pg_catalog.text, pg_catalog.text,
	pg_catalog.float8, pg_catalog.float8) FROM PUBLIC;

/*
 * Check a key or workflow as ig_check_name() does: not null, not empty,
 * at most idem_gate.max_key_length characters and 1300 bytes, so that
 * both fit one index entry.  what names the argument in messages; secret
 * keeps the value out of them (a key that may be a personal value).
 */
CREATE FUNCTION idem_gate.m_check_name(v pg_catalog.text, what pg_catalog.text,
									   is_key pg_catalog.bool, secret pg_catalog.bool)
	RETURNS void
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	max_len pg_catalog.int4;
	chars pg_catalog.int4;
	bytes pg_catalog.int4;
BEGIN
	IF v IS NULL THEN
		RAISE EXCEPTION '% must not be null', what
			USING ERRCODE = '22004',
				  HINT = CASE WHEN is_key
						 THEN 'Pass the event''s identity, such as the provider''s event id, or derive one with idem_hash().'
						 ELSE 'Pass the name of the side effect the key protects, such as ''stripe_charge''.' END;
	END IF;
	bytes := pg_catalog.octet_length(v);
	IF bytes OPERATOR(pg_catalog.=) 0 THEN
		RAISE EXCEPTION '% must not be empty', what
			USING ERRCODE = '22023',
				  HINT = CASE WHEN is_key
						 THEN 'An empty key would make every delivery without an id one event; refuse such deliveries before claiming.'
						 ELSE 'Pass the name of the side effect the key protects, such as ''stripe_charge''.' END;
	END IF;
	/* unset, the common case, without parsing: this runs twice a call */
	max_len := CASE WHEN NULLIF(pg_catalog.current_setting('idem_gate.max_key_length', true), '') IS NULL THEN 255
					ELSE idem_gate.m_setting_number('idem_gate.max_key_length', '255', '', 1, 1000)::pg_catalog.int4 END;
	IF bytes OPERATOR(pg_catalog.>) max_len THEN
		chars := pg_catalog.char_length(v);
		IF chars OPERATOR(pg_catalog.>) max_len THEN
			RAISE EXCEPTION '%', CASE WHEN secret THEN pg_catalog.format('%s is too long', what)
									ELSE pg_catalog.format('%s "%s" is too long', what, idem_gate.m_display(v)) END
				USING ERRCODE = '22023',
					  DETAIL = pg_catalog.format('It has %s characters; idem_gate.max_key_length is %s.', chars, max_len),
					  HINT = 'Derive a shorter key, for example with idem_hash(), or raise idem_gate.max_key_length.';
		END IF;
		IF bytes OPERATOR(pg_catalog.>) 1300 THEN
			RAISE EXCEPTION '%', CASE WHEN secret THEN pg_catalog.format('%s is too long', what)
									ELSE pg_catalog.format('%s "%s" is too long', what, idem_gate.m_display(v)) END
				USING ERRCODE = '22023',
					  DETAIL = pg_catalog.format('It takes %s bytes; a key or workflow takes at most 1300 bytes, so that both fit in one index entry.', bytes),
					  HINT = 'Derive a shorter key, for example with idem_hash().';
		END IF;
	END IF;
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_check_name(pg_catalog.text, pg_catalog.text, pg_catalog.bool, pg_catalog.bool) FROM PUBLIC;

/*
 * An interval argument as a duration of fixed length, in seconds: its
 * EXTRACT(epoch) (a year 365.25 days, a month 30 days, a day 24 hours),
 * whatever the session's time zone.  Positive, and subtracting it from the
 * start of the transaction stays a valid timestamp.  The cutoff it gives
 * is measured from the transaction's start, the older and so safer clock.
 */
CREATE FUNCTION idem_gate.m_cutoff(iv pg_catalog.interval, what pg_catalog.text)
	RETURNS pg_catalog.timestamptz
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	secs pg_catalog.numeric;
BEGIN
	IF iv IS NULL THEN
		RETURN NULL;
	END IF;
	secs := pg_catalog.date_part('epoch', iv)::pg_catalog.numeric;
	IF secs OPERATOR(pg_catalog.<=) 0 THEN
		RAISE EXCEPTION '% must be a positive duration, not "%"', what, iv
			USING ERRCODE = '22023',
				  DETAIL = 'Intervals are measured as fixed durations: a day is 24 hours, a month 30 days.',
				  HINT = 'Pass NULL to never take over a claim, or a positive interval longer than the side effect can take, such as ''15 minutes''.';
	END IF;
	BEGIN
		RETURN pg_catalog.transaction_timestamp() OPERATOR(pg_catalog.-)
			pg_catalog.make_interval(secs => secs::pg_catalog.float8);
	EXCEPTION WHEN datetime_field_overflow OR interval_field_overflow
				   OR numeric_value_out_of_range THEN
		NULL;
	END;
	RAISE EXCEPTION '% "%" is too long', what, iv
		USING ERRCODE = '22023',
			  DETAIL = 'Subtracting it from the current time would leave the range of timestamps.',
			  HINT = 'Pass an interval of at most some thousand years, or NULL to never take over a claim.';
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_cutoff(pg_catalog.interval, pg_catalog.text) FROM PUBLIC;

/*
 * An optional text argument that, when given, must not be empty: an empty
 * execution id would make two runs one, an empty fingerprint would match
 * any payload hashed to nothing.
 */
CREATE FUNCTION idem_gate.m_optional(v pg_catalog.text, what pg_catalog.text)
	RETURNS pg_catalog.text
	LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	IF v OPERATOR(pg_catalog.=) '' THEN
		RAISE EXCEPTION '% must not be empty', what
			USING ERRCODE = '22023', HINT = 'Pass NULL when there is none.';
	END IF;
	RETURN v;
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_optional(pg_catalog.text, pg_catalog.text) FROM PUBLIC;

/*
 * The role a body may act for: the caller its API function named, when
 * the session's login may act as it and it may execute that API function
 * (api, a regprocedure's text).  Anything else is refused as PostgreSQL
 * refuses a function the role may not execute (42501).
 */
CREATE FUNCTION idem_gate.m_caller(caller pg_catalog.regrole, api pg_catalog.text)
	RETURNS pg_catalog.oid
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	IF caller IS NULL
	   OR NOT pg_catalog.pg_has_role(SESSION_USER, caller::pg_catalog.oid, 'MEMBER')
	   OR NOT pg_catalog.has_function_privilege(caller::pg_catalog.oid, api, 'EXECUTE') THEN
		RAISE EXCEPTION 'permission denied for function %', pg_catalog.split_part(api, '(', 1)
			USING ERRCODE = '42501';
	END IF;
	RETURN caller::pg_catalog.oid;
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_caller(pg_catalog.regrole, pg_catalog.text) FROM PUBLIC;

/*
 * A rule on a table a call is about to write, refused as the C edition's
 * ig_call_refuse_rules() refuses it (55000, naming the first of tables
 * that has one): a rule rewrites the gate's INSERT ... ON CONFLICT and
 * UPDATE ... RETURNING, so the gate could neither honour it nor write
 * around it.
 */
CREATE FUNCTION idem_gate.m_refuse_rules(tables pg_catalog.regclass[])
	RETURNS void
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	found_name pg_catalog.name;
	found_rel pg_catalog.text;
BEGIN
	SELECT r.rulename, r.ev_class::pg_catalog.regclass::pg_catalog.text
	  INTO found_name, found_rel
	  FROM pg_catalog.pg_rewrite r
	 WHERE r.ev_class OPERATOR(pg_catalog.=) ANY (tables)
	   AND r.ev_enabled OPERATOR(pg_catalog.<>) 'D'
	 ORDER BY pg_catalog.array_position(tables, r.ev_class::pg_catalog.regclass), r.rulename
	 LIMIT 1;
	IF FOUND THEN
		RAISE EXCEPTION 'idem_gate cannot write %: rule "%" is attached to it', found_rel, found_name
			USING ERRCODE = '55000',
				  DETAIL = 'A rule rewrites the gate''s INSERT ... ON CONFLICT, UPDATE ... RETURNING and data-modifying WITH statements, so the gate could neither honour it nor write around it.',
				  HINT = 'Drop the rule; a trigger can do what it did, and the gate honours triggers.';
	END IF;
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_refuse_rules(pg_catalog.regclass[]) FROM PUBLIC;

/*
 * Code a backend may hold parsed under another search_path, on a table a
 * call is about to write, refused as the C edition's cached_code.c refuses
 * it (55000): an index's expression or predicate, a CHECK of a column's
 * domain, or the partition key of a table it is a partition of, that
 * calls a LANGUAGE sql function with neither its own search_path nor a
 * BEGIN ATOMIC body.  PostgreSQL inlines such a function
 * into a cache that lives as long as the session, under the search_path of
 * whoever first used it, and the gate writes with its owner's rights: a
 * caller who primed that cache under a path of its own would have its own
 * function run as the owner.  Found through pg_depend, which records
 * every function an index, a constraint or a BEGIN ATOMIC body calls.
 */
CREATE FUNCTION idem_gate.m_refuse_cached_code(tables pg_catalog.regclass[])
	RETURNS void
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	t pg_catalog.regclass;
	what pg_catalog.text;
BEGIN
	/*
	 * Mostly there is nothing to look for: no index of those tables calls
	 * a function, no column is of a domain, and none is a partition.
	 * Three index probes say so, and spare every write the walk below.
	 */
	IF NOT EXISTS (
			SELECT FROM pg_catalog.pg_index i
			  JOIN pg_catalog.pg_depend d ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
										  AND d.objid OPERATOR(pg_catalog.=) i.indexrelid
										  AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
			 WHERE i.indrelid OPERATOR(pg_catalog.=) ANY (tables))
	   AND NOT EXISTS (
			SELECT FROM pg_catalog.pg_attribute att
			  JOIN pg_catalog.pg_type ty ON ty.oid OPERATOR(pg_catalog.=) att.atttypid
			 WHERE att.attrelid OPERATOR(pg_catalog.=) ANY (tables) AND att.attnum OPERATOR(pg_catalog.>) 0
			   AND NOT att.attisdropped AND ty.typtype OPERATOR(pg_catalog.=) 'd')
	   AND NOT EXISTS (
			SELECT FROM pg_catalog.pg_class c
			 WHERE c.oid OPERATOR(pg_catalog.=) ANY (tables) AND c.relispartition) THEN
		RETURN;
	END IF;
	FOREACH t IN ARRAY tables LOOP
		WITH RECURSIVE reach(o, n, what, fn) AS (
			/* the functions an index's expressions or predicate call */
			SELECT 1, ic.relname::pg_catalog.text, pg_catalog.format('index "%s"', ic.relname), d.refobjid
			  FROM pg_catalog.pg_index i
			  JOIN pg_catalog.pg_class ic ON ic.oid OPERATOR(pg_catalog.=) i.indexrelid
			  JOIN pg_catalog.pg_depend d ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
										  AND d.objid OPERATOR(pg_catalog.=) i.indexrelid
										  AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
			 WHERE i.indrelid OPERATOR(pg_catalog.=) t
			UNION ALL
			/* ... a CHECK of a column's domain calls */
			SELECT 2, con.conname::pg_catalog.text,
				   pg_catalog.format('CHECK constraint "%s" of domain %I.%I', con.conname, tn.nspname, ty.typname),
				   d.refobjid
			  FROM pg_catalog.pg_attribute att
			  JOIN pg_catalog.pg_type ty ON ty.oid OPERATOR(pg_catalog.=) att.atttypid AND ty.typtype OPERATOR(pg_catalog.=) 'd'
			  JOIN pg_catalog.pg_namespace tn ON tn.oid OPERATOR(pg_catalog.=) ty.typnamespace
			  JOIN pg_catalog.pg_constraint con ON con.contypid OPERATOR(pg_catalog.=) ty.oid
			  JOIN pg_catalog.pg_depend d ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_constraint'::pg_catalog.regclass
										  AND d.objid OPERATOR(pg_catalog.=) con.oid
										  AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
			 WHERE att.attrelid OPERATOR(pg_catalog.=) t AND att.attnum OPERATOR(pg_catalog.>) 0
			   AND NOT att.attisdropped
			UNION ALL
			/* ... the partition key of a table it is a partition of calls */
			SELECT 3, pc.relname::pg_catalog.text, pg_catalog.format('the partition key of %s', pc.relname),
				   d.refobjid
			  FROM pg_catalog.pg_partition_ancestors(t) a(relid)
			  JOIN pg_catalog.pg_partitioned_table pt ON pt.partrelid OPERATOR(pg_catalog.=) a.relid
			  JOIN pg_catalog.pg_class pc ON pc.oid OPERATOR(pg_catalog.=) a.relid
			  JOIN pg_catalog.pg_depend d ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
										  AND d.objid OPERATOR(pg_catalog.=) a.relid
										  AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
			UNION
			/* ... and what a BEGIN ATOMIC body among them calls in turn */
			SELECT r.o, r.n, r.what, d.refobjid
			  FROM reach r
			  JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) r.fn AND p.prosqlbody IS NOT NULL
			  JOIN pg_catalog.pg_depend d ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
										  AND d.objid OPERATOR(pg_catalog.=) p.oid
										  AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass),
		found AS (
			SELECT r.o, r.n,
				   pg_catalog.format('%s calls %I.%I(%s)', r.what, pn.nspname, p.proname,
					   (SELECT pg_catalog.string_agg(pg_catalog.format('%I.%I', tn.nspname, ty.typname), ', ' ORDER BY a.i)
						  FROM pg_catalog.unnest(p.proargtypes::pg_catalog.oid[]) WITH ORDINALITY AS a(ty_oid, i)
						  JOIN pg_catalog.pg_type ty ON ty.oid OPERATOR(pg_catalog.=) a.ty_oid
						  JOIN pg_catalog.pg_namespace tn ON tn.oid OPERATOR(pg_catalog.=) ty.typnamespace)) AS w
			  FROM reach r
			  JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) r.fn
			  JOIN pg_catalog.pg_namespace pn ON pn.oid OPERATOR(pg_catalog.=) p.pronamespace
			 WHERE p.prolang OPERATOR(pg_catalog.=) (SELECT l.oid FROM pg_catalog.pg_language l
													  WHERE l.lanname OPERATOR(pg_catalog.=) 'sql')
			   AND p.prosqlbody IS NULL AND NOT p.prosecdef AND NOT p.proretset
			   AND NOT EXISTS (SELECT 1 FROM pg_catalog.unnest(p.proconfig) c
								WHERE c LIKE 'search\_path=%'))
		SELECT f.w INTO what FROM found f ORDER BY f.o, f.n LIMIT 1;
		IF what IS NOT NULL THEN
			RAISE EXCEPTION 'idem_gate cannot write %: %, a LANGUAGE sql function parsed under the caller''s search_path',
				t::pg_catalog.text, what
				USING ERRCODE = '55000',
					  DETAIL = 'PostgreSQL inlines such a function into a cache that lives as long as the session, under the search_path of whoever first used it, and the gate writes with its owner''s rights.',
					  HINT = 'Give the function its own path (ALTER FUNCTION ... SET search_path = pg_catalog, public) or write its body as BEGIN ATOMIC ... END.';
		END IF;
	END LOOP;
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_refuse_cached_code(pg_catalog.regclass[]) FROM PUBLIC;

/*
 * What the C edition refuses before a call writes (src/call.c,
 * src/store.c), in the same order and words:
 *   - a read-only transaction (and so a standby), with PostgreSQL's own
 *     error naming the API function, before anything is looked up;
 *   - code a backend may hold parsed under the caller's search_path, in an
 *     index or a domain of those tables (m_refuse_cached_code());
 *   - a rule on the claims or the audit table: a rule rewrites the gate's
 *     INSERT ... ON CONFLICT and UPDATE ... RETURNING, so the gate could
 *     neither honour it nor write around it (an UPDATE rule that does
 *     INSTEAD NOTHING would otherwise leave a loop that retries a lost
 *     update waiting for a row that never changes);
 *   - for a call that draws a token, a token sequence that cycles or does
 *     not count up, which could hand one token to two runs;
 *   - a trigger on those tables while the session has a temporary schema
 *     (but the gate's own, whose functions are in schema idem_gate, where
 *     only the owner creates): the trigger runs with the owner's rights, and PostgreSQL resolves its
 *     table and type names in the session's temporary schema first.
 * api is the API function as a regprocedure's text.  Nothing is cached:
 * each is one catalog lookup, and a session could change any of them.
 * A claim checks only the first at its start (m_readonly()), and the
 * others where it writes (m_table_guard(), in m_claim_key()): a duplicate
 * is answered from the row, as in C, without reading the catalog.
 */
CREATE FUNCTION idem_gate.m_readonly(api pg_catalog.text)
	RETURNS void
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	fname pg_catalog.text := pg_catalog.split_part(api, '(', 1);
BEGIN
	IF pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'on' THEN
		IF fname NOT LIKE 'idem\_gate.%' THEN
			fname := pg_catalog.regexp_replace(fname, '^[^.]*\.', '');
		END IF;
		RAISE EXCEPTION 'cannot execute %() in a read-only transaction', fname
			USING ERRCODE = '25006';
	END IF;
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_readonly(pg_catalog.text) FROM PUBLIC;

/* The catalog's refusals, before a write to the claims or the audit table. */
CREATE FUNCTION idem_gate.m_table_guard(draws_token pg_catalog.bool)
	RETURNS void
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	found_name pg_catalog.text;
	found_rel pg_catalog.text;
BEGIN
	PERFORM idem_gate.m_refuse_rules(ARRAY['idem_gate.claims'::pg_catalog.regclass,
										   'idem_gate.audit'::pg_catalog.regclass]);
	PERFORM idem_gate.m_refuse_cached_code(ARRAY['idem_gate.claims'::pg_catalog.regclass,
												 'idem_gate.audit'::pg_catalog.regclass]);
	IF draws_token AND EXISTS (
			SELECT FROM pg_catalog.pg_sequence s
			 WHERE s.seqrelid OPERATOR(pg_catalog.=) 'idem_gate.token_seq'::pg_catalog.regclass
			   AND (s.seqcycle OR s.seqincrement OPERATOR(pg_catalog.<=) 0)) THEN
		RAISE EXCEPTION 'idem_gate cannot write idem_gate.claims: its token sequence idem_gate.token_seq cycles or does not count up'
			USING ERRCODE = '55000',
				  DETAIL = 'A fencing token could then be granted to two runs.',
				  HINT = 'Run ALTER SEQUENCE idem_gate.token_seq NO CYCLE INCREMENT BY 1.';
	END IF;
	IF pg_catalog.pg_my_temp_schema() OPERATOR(pg_catalog.<>) 0 THEN
		SELECT t.tgname, t.tgrelid::pg_catalog.regclass::pg_catalog.text
		  INTO found_name, found_rel
		  FROM pg_catalog.pg_trigger t
		 WHERE t.tgrelid OPERATOR(pg_catalog.=) ANY (ARRAY['idem_gate.claims'::pg_catalog.regclass,
														  'idem_gate.audit'::pg_catalog.regclass])
		   AND NOT t.tgisinternal AND t.tgenabled OPERATOR(pg_catalog.<>) 'D'
		   AND NOT EXISTS (SELECT FROM pg_catalog.pg_proc p
							WHERE p.oid OPERATOR(pg_catalog.=) t.tgfoid
							  AND p.pronamespace OPERATOR(pg_catalog.=) 'idem_gate'::pg_catalog.regnamespace)
		 ORDER BY t.tgrelid OPERATOR(pg_catalog.=) 'idem_gate.claims'::pg_catalog.regclass DESC, t.tgname
		 LIMIT 1;
		IF FOUND THEN
			RAISE EXCEPTION 'idem_gate cannot run trigger "%" of % for a session that has temporary objects',
				found_name, found_rel
				USING ERRCODE = '42501',
					  DETAIL = 'Code attached to the extension''s tables runs with the rights of the extension''s owner, and PostgreSQL resolves table and type names in the calling session''s temporary schema first.',
					  HINT = pg_catalog.format('Call idem_gate''s functions from a session that has created no temporary objects, or remove trigger "%s" from %s.',
											   found_name, found_rel);
		END IF;
	END IF;
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_table_guard(pg_catalog.bool) FROM PUBLIC;

/* Both, at the start of a call that writes whatever it finds. */
CREATE FUNCTION idem_gate.m_write_guard(api pg_catalog.text)
	RETURNS void
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	PERFORM idem_gate.m_readonly(api);
	PERFORM idem_gate.m_table_guard(false);
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_write_guard(pg_catalog.text) FROM PUBLIC;
