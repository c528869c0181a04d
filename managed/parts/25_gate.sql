/*
 * idem_gate managed edition: the gate's API functions, idem_claim,
 * idem_claim_ex, idem_claim_many, and the bodies they call as the owner.
 * Each body checks its arguments in the C edition's order: the key and
 * the workflow, the caller's access to the workflow, then the rest.
 */

/* The frame of a call about (workflow, key): the checks every call makes first. */
CREATE FUNCTION idem_gate.m_begin(caller pg_catalog.regrole, api pg_catalog.text,
								  key pg_catalog.text, workflow pg_catalog.text)
	RETURNS void
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	role pg_catalog.oid := idem_gate.m_caller(caller, api);
BEGIN
	PERFORM idem_gate.m_check_name(key, 'key', true, false);
	PERFORM idem_gate.m_check_name(workflow, 'workflow', false, false);
	IF pg_catalog.split_part(api, '(', 1) OPERATOR(pg_catalog.=) ANY
		(ARRAY['@extschema@.idem_claim', '@extschema@.idem_claim_ex']) THEN
		/* a claim reads the catalog's refusals only where it writes */
		PERFORM idem_gate.m_readonly(api);
	ELSIF pg_catalog.split_part(api, '(', 1) OPERATOR(pg_catalog.<>) ALL
		(ARRAY['@extschema@.idem_status', 'idem_gate.history', '@extschema@.idem_key']) THEN
		PERFORM idem_gate.m_write_guard(api);
	END IF;
	PERFORM idem_gate.m_acl_check(role, workflow);
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_begin(pg_catalog.regrole, pg_catalog.text, pg_catalog.text, pg_catalog.text) FROM PUBLIC;

/* idem_claim's body: the outcome only; no token is handed out. */
CREATE FUNCTION idem_gate_call.idem_claim(caller pg_catalog.regrole, key pg_catalog.text,
										  workflow pg_catalog.text, stale_interval pg_catalog.interval)
	RETURNS idem_gate.outcome
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	c record;
BEGIN
	PERFORM idem_gate.m_begin(caller, '@extschema@.idem_claim(text,text,interval)', key, workflow);
	c := idem_gate.m_claim_key(workflow, key, idem_gate.m_cutoff(stale_interval, 'stale_interval'),
							   NULL, NULL, false, NULL, NULL, false);
	RETURN c.outcome;
END
$$;
GRANT EXECUTE ON FUNCTION idem_gate_call.idem_claim(pg_catalog.regrole, pg_catalog.text, pg_catalog.text, pg_catalog.interval) TO PUBLIC;

CREATE FUNCTION @extschema@.idem_claim(key text, workflow text,
	stale_interval interval DEFAULT NULL)
RETURNS idem_gate.outcome
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT idem_gate_call.idem_claim(CURRENT_USER::pg_catalog.regrole, key, workflow, stale_interval)
$$;

/*
 * idem_claim_ex's body, for both signatures (payload_given: the 1.2 one).
 * The token goes only to the run that owns the claim, the stored receipt
 * only with completed.
 */
CREATE FUNCTION idem_gate_call.idem_claim_ex(caller pg_catalog.regrole, api pg_catalog.text,
	key pg_catalog.text, workflow pg_catalog.text, stale_interval pg_catalog.interval,
	fingerprint pg_catalog.text, execution_id pg_catalog.text, payload pg_catalog.jsonb,
	OUT outcome idem_gate.outcome, OUT token pg_catalog.int8, OUT attempt pg_catalog.int4,
	OUT state idem_gate.state, OUT result pg_catalog.jsonb, OUT claimed_at pg_catalog.timestamptz)
	RETURNS record
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	cutoff pg_catalog.timestamptz;
	p record;
	c record;
BEGIN
	IF api OPERATOR(pg_catalog.<>) ALL (ARRAY['@extschema@.idem_claim_ex(text,text,interval,text,text)',
											  '@extschema@.idem_claim_ex(text,text,interval,text,text,jsonb)']) THEN
		RAISE EXCEPTION 'permission denied for function idem_claim_ex' USING ERRCODE = '42501';
	END IF;
	PERFORM idem_gate.m_begin(caller, api, key, workflow);
	cutoff := idem_gate.m_cutoff(stale_interval, 'stale_interval');
	PERFORM idem_gate.m_optional(fingerprint, 'fingerprint');
	PERFORM idem_gate.m_optional(execution_id, 'execution_id');
	p := idem_gate.m_payload(payload, 'payload');
	c := idem_gate.m_claim_key(workflow, key, cutoff, fingerprint, execution_id,
							   payload IS NOT NULL, p.kept, p.dropped, true);
	outcome := c.outcome;
	token := CASE WHEN c.granted THEN (c.r).token END;
	attempt := (c.r).attempt;
	state := (c.r).state;
	result := CASE WHEN c.outcome OPERATOR(pg_catalog.=) 'completed' THEN (c.r).result END;
	claimed_at := (c.r).claimed_at;
END
$$;
GRANT EXECUTE ON FUNCTION idem_gate_call.idem_claim_ex(pg_catalog.regrole, pg_catalog.text,
	pg_catalog.text, pg_catalog.text, pg_catalog.interval, pg_catalog.text, pg_catalog.text,
	pg_catalog.jsonb) TO PUBLIC;

CREATE FUNCTION @extschema@.idem_claim_ex(key text, workflow text,
	stale_interval interval DEFAULT NULL, fingerprint text DEFAULT NULL,
	execution_id text DEFAULT NULL,
	OUT outcome idem_gate.outcome, OUT token bigint, OUT attempt integer,
	OUT state idem_gate.state, OUT result jsonb, OUT claimed_at timestamptz)
RETURNS record
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT * FROM idem_gate_call.idem_claim_ex(CURRENT_USER::pg_catalog.regrole,
	'@extschema@.idem_claim_ex(text,text,interval,text,text)',
	key, workflow, stale_interval, fingerprint, execution_id, NULL)
$$;

CREATE FUNCTION @extschema@.idem_claim_ex(key pg_catalog.text, workflow pg_catalog.text,
	stale_interval pg_catalog.interval, fingerprint pg_catalog.text,
	execution_id pg_catalog.text, payload pg_catalog.jsonb,
	OUT outcome idem_gate.outcome, OUT token pg_catalog.int8, OUT attempt pg_catalog.int4,
	OUT state idem_gate.state, OUT result pg_catalog.jsonb, OUT claimed_at pg_catalog.timestamptz)
RETURNS record
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT * FROM idem_gate_call.idem_claim_ex(CURRENT_USER::pg_catalog.regrole,
	'@extschema@.idem_claim_ex(text,text,interval,text,text,jsonb)',
	key, workflow, stale_interval, fingerprint, execution_id, payload)
$$;

/* The elements of a text array argument: one-dimensional, no NULL element (22004). */
CREATE FUNCTION idem_gate.m_text_elements(a pg_catalog.text[], what pg_catalog.text)
	RETURNS pg_catalog.int4
	LANGUAGE plpgsql IMMUTABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	pos pg_catalog.int4;
BEGIN
	IF pg_catalog.array_ndims(a) OPERATOR(pg_catalog.>) 1 THEN
		RAISE EXCEPTION '% must be a one-dimensional array', what
			USING ERRCODE = '22023',
				  HINT = 'Pass one element per key, such as ARRAY[''evt_1'', ''evt_2''].';
	END IF;
	pos := pg_catalog.array_position(a, NULL);
	IF pos IS NOT NULL THEN
		RAISE EXCEPTION '%[%] must not be null', what,
			pos OPERATOR(pg_catalog.-) pg_catalog.array_lower(a, 1) OPERATOR(pg_catalog.+) 1
			USING ERRCODE = '22004', HINT = 'Pass one non-null value per element.';
	END IF;
	RETURN COALESCE(pg_catalog.cardinality(a), 0);
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_text_elements(pg_catalog.text[], pg_catalog.text) FROM PUBLIC;

/*
 * idem_claim_many's body, for both signatures: one row per element in
 * input order, each claimed as idem_claim_ex would.  Keys are claimed in
 * sorted order (bytes, as the C edition's strcmp), so two calls sharing
 * keys wait for each other in one order and never deadlock; a key that
 * occurs again later in the array is in_flight there.
 */
CREATE FUNCTION idem_gate_call.idem_claim_many(caller pg_catalog.regrole, api pg_catalog.text,
	keys pg_catalog.text[], workflow pg_catalog.text, stale_interval pg_catalog.interval,
	fingerprints pg_catalog.text[], execution_id pg_catalog.text, payloads pg_catalog.jsonb[])
	RETURNS TABLE (ord pg_catalog.int4, key pg_catalog.text, outcome idem_gate.outcome,
	token pg_catalog.int8, attempt pg_catalog.int4, state idem_gate.state,
	result pg_catalog.jsonb, claimed_at pg_catalog.timestamptz)
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	role pg_catalog.oid;
	n pg_catalog.int4;
	cutoff pg_catalog.timestamptz;
	e record;
	prev pg_catalog.text;
	stored_fp pg_catalog.text;
	p record;
	c record;
	out_rows idem_gate.claims[] := '{}';
	outs idem_gate.outcome[] := '{}';
	granted pg_catalog.bool[] := '{}';
	last_row idem_gate.claims;
	last_outcome idem_gate.outcome;
BEGIN
	IF api OPERATOR(pg_catalog.<>) ALL (ARRAY['@extschema@.idem_claim_many(text[],text,interval,text[],text)',
											  '@extschema@.idem_claim_many(text[],text,interval,text[],text,jsonb[])']) THEN
		RAISE EXCEPTION 'permission denied for function idem_claim_many' USING ERRCODE = '42501';
	END IF;
	role := idem_gate.m_caller(caller, api);
	PERFORM idem_gate.m_readonly(api);
	IF keys IS NULL THEN
		RAISE EXCEPTION 'keys must not be null'
			USING ERRCODE = '22004', HINT = 'Pass an array of keys; an empty array claims nothing.';
	END IF;
	n := idem_gate.m_text_elements(keys, 'keys');
	IF fingerprints IS NOT NULL
	   AND idem_gate.m_text_elements(fingerprints, 'fingerprints') OPERATOR(pg_catalog.<>) n THEN
		RAISE EXCEPTION 'fingerprints must have as many elements as keys'
			USING ERRCODE = '22023',
				  DETAIL = pg_catalog.format('keys has %s elements, fingerprints %s.', n, pg_catalog.cardinality(fingerprints)),
				  HINT = 'Pass one fingerprint per key, or NULL for none.';
	END IF;
	IF payloads IS NOT NULL THEN
		IF pg_catalog.array_ndims(payloads) OPERATOR(pg_catalog.>) 1 THEN
			RAISE EXCEPTION 'payloads must be a one-dimensional array'
				USING ERRCODE = '22023', HINT = 'Pass one payload per key, or NULL for none.';
		END IF;
		IF COALESCE(pg_catalog.cardinality(payloads), 0) OPERATOR(pg_catalog.<>) n THEN
			RAISE EXCEPTION 'payloads must have as many elements as keys'
				USING ERRCODE = '22023',
					  DETAIL = pg_catalog.format('keys has %s elements, payloads %s.', n, COALESCE(pg_catalog.cardinality(payloads), 0)),
					  HINT = 'Pass one payload per key (NULL where there is none), or NULL for none at all.';
		END IF;
	END IF;
	/* every argument is checked, even when there is nothing to claim */
	cutoff := idem_gate.m_cutoff(stale_interval, 'stale_interval');
	PERFORM idem_gate.m_optional(execution_id, 'execution_id');
	PERFORM idem_gate.m_check_name(workflow, 'workflow', false, false);
	PERFORM idem_gate.m_acl_check(role, workflow);
	IF n OPERATOR(pg_catalog.=) 0 THEN
		RETURN;
	END IF;
	FOR i IN 1 .. n LOOP
		PERFORM idem_gate.m_check_name(keys[pg_catalog.array_lower(keys, 1) OPERATOR(pg_catalog.+) i OPERATOR(pg_catalog.-) 1],
									   pg_catalog.format('keys[%s]', i), true, false);
		IF fingerprints IS NOT NULL
		   AND fingerprints[pg_catalog.array_lower(fingerprints, 1) OPERATOR(pg_catalog.+) i OPERATOR(pg_catalog.-) 1] OPERATOR(pg_catalog.=) '' THEN
			RAISE EXCEPTION 'fingerprints[%] must not be empty', i
				USING ERRCODE = '22023', HINT = 'Pass NULL for no fingerprints.';
		END IF;
		IF payloads IS NOT NULL THEN
			PERFORM idem_gate.m_payload(payloads[pg_catalog.array_lower(payloads, 1) OPERATOR(pg_catalog.+) i OPERATOR(pg_catalog.-) 1],
										pg_catalog.format('payloads[%s]', i));
		END IF;
	END LOOP;
	FOR e IN
		SELECT u.k, u.o, f.fp, pl.pay
		  FROM pg_catalog.unnest(keys) WITH ORDINALITY AS u(k, o)
		  LEFT JOIN pg_catalog.unnest(fingerprints) WITH ORDINALITY AS f(fp, o) ON f.o OPERATOR(pg_catalog.=) u.o
		  LEFT JOIN pg_catalog.unnest(payloads) WITH ORDINALITY AS pl(pay, o) ON pl.o OPERATOR(pg_catalog.=) u.o
		 ORDER BY u.k COLLATE "C", u.o
	LOOP
		IF prev IS NOT NULL AND prev OPERATOR(pg_catalog.=) e.k THEN
			/* only the first occurrence can own the key */
			IF e.fp IS NOT NULL AND stored_fp IS NOT NULL AND stored_fp OPERATOR(pg_catalog.<>) e.fp THEN
				PERFORM idem_gate.m_fingerprint_error(workflow, e.k, e.fp);
			END IF;
			out_rows[e.o] := last_row;
			outs[e.o] := 'in_flight';
			granted[e.o] := false;
			CONTINUE;
		END IF;
		p := idem_gate.m_payload(e.pay, pg_catalog.format('payloads[%s]', e.o));
		c := idem_gate.m_claim_key(workflow, e.k, cutoff, e.fp, execution_id,
								   e.pay IS NOT NULL, p.kept, p.dropped, true);
		last_row := c.r;
		stored_fp := (c.r).fingerprint;
		out_rows[e.o] := c.r;
		outs[e.o] := c.outcome;
		granted[e.o] := c.granted;
		prev := e.k;
	END LOOP;
	FOR i IN 1 .. n LOOP
		ord := i;
		key := keys[pg_catalog.array_lower(keys, 1) OPERATOR(pg_catalog.+) i OPERATOR(pg_catalog.-) 1];
		outcome := outs[i];
		token := CASE WHEN granted[i] THEN (out_rows[i]).token END;
		attempt := (out_rows[i]).attempt;
		state := (out_rows[i]).state;
		result := CASE WHEN outs[i] OPERATOR(pg_catalog.=) 'completed' THEN (out_rows[i]).result END;
		claimed_at := (out_rows[i]).claimed_at;
		RETURN NEXT;
	END LOOP;
END
$$;
GRANT EXECUTE ON FUNCTION idem_gate_call.idem_claim_many(pg_catalog.regrole, pg_catalog.text,
	pg_catalog.text[], pg_catalog.text, pg_catalog.interval, pg_catalog.text[], pg_catalog.text,
	pg_catalog.jsonb[]) TO PUBLIC;

CREATE FUNCTION @extschema@.idem_claim_many(keys text[], workflow text,
	stale_interval interval DEFAULT NULL, fingerprints text[] DEFAULT NULL,
	execution_id text DEFAULT NULL)
RETURNS TABLE (ord integer, key text, outcome idem_gate.outcome, token bigint,
	attempt integer, state idem_gate.state, result jsonb, claimed_at timestamptz)
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT * FROM idem_gate_call.idem_claim_many(CURRENT_USER::pg_catalog.regrole,
	'@extschema@.idem_claim_many(text[],text,interval,text[],text)',
	keys, workflow, stale_interval, fingerprints, execution_id, NULL)
$$;

CREATE FUNCTION @extschema@.idem_claim_many(keys pg_catalog.text[], workflow pg_catalog.text,
	stale_interval pg_catalog.interval, fingerprints pg_catalog.text[],
	execution_id pg_catalog.text, payloads pg_catalog.jsonb[])
RETURNS TABLE (ord pg_catalog.int4, key pg_catalog.text, outcome idem_gate.outcome,
	token pg_catalog.int8, attempt pg_catalog.int4, state idem_gate.state,
	result pg_catalog.jsonb, claimed_at pg_catalog.timestamptz)
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT * FROM idem_gate_call.idem_claim_many(CURRENT_USER::pg_catalog.regrole,
	'@extschema@.idem_claim_many(text[],text,interval,text[],text,jsonb[])',
	keys, workflow, stale_interval, fingerprints, execution_id, payloads)
$$;
