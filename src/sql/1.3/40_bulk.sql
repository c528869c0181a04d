
/*
 * Bulk decisions for a team of operators: idem_resolve_many() and
 * idem_release_many() decide each claim on its own, exactly as
 * idem_resolve() and idem_release() would one by one (one audit row each,
 * per-workflow access checked per call), and answer one row per key, in
 * input order: decided, already_decided (the claim is past what the
 * decision applies to, or this call decided its key already), not_found
 * (no such claim, or a NULL or empty key, which no claim can have) or
 * not_permitted (per-workflow access refuses the caller).  Nothing is
 * refused silently, and an error that is not about one key (a bad
 * workflow or resolution, a missing EXECUTE, a serialization failure)
 * fails the whole call and changes nothing.
 *
 * They are PL/pgSQL over the single-key functions, whose checks they
 * inherit: they run as the caller (no SECURITY DEFINER), so the caller
 * needs EXECUTE on idem_resolve() or idem_release() as well.  Each key is
 * decided in a subtransaction of its own (a BEGIN ... EXCEPTION block),
 * which PostgreSQL offers as the only way to go on after one key's error.
 */
CREATE FUNCTION @extschema@.idem_resolve_many(keys pg_catalog.text[], workflow pg_catalog.text,
	resolution pg_catalog.text, result pg_catalog.jsonb DEFAULT NULL,
	reason pg_catalog.text DEFAULT NULL, actor pg_catalog.text DEFAULT NULL)
RETURNS TABLE (ord pg_catalog.int4, key pg_catalog.text, outcome pg_catalog.text,
	state idem_gate.state)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	done pg_catalog.text[] := '{}';
BEGIN
	PERFORM idem_gate.bulk_args(keys, workflow, 'idem_resolve(text, text, text, jsonb, text, text)');
	IF resolution IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed',
			MESSAGE = 'resolution must not be null',
			HINT = 'Pass ''completed'' when the side effect happened, or ''retry'' to let the next delivery run it.';
	END IF;
	IF resolution OPERATOR(pg_catalog.<>) ALL (ARRAY['completed', 'retry']) THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
			MESSAGE = pg_catalog.format('resolution must be ''completed'' or ''retry'', not %s',
										pg_catalog.quote_literal(pg_catalog.left(resolution, 64))),
			HINT = 'Pass ''completed'' when the side effect happened, or ''retry'' to let the next delivery run it.';
	END IF;
	FOR i IN 1 .. COALESCE(pg_catalog.array_length(keys, 1), 0) LOOP
		ord := i;
		key := keys[i];
		state := NULL;
		IF key IS NULL OR key OPERATOR(pg_catalog.=) '' THEN
			outcome := 'not_found';
		ELSIF key OPERATOR(pg_catalog.=) ANY (done) THEN
			outcome := 'already_decided';
		ELSE
			done := done OPERATOR(pg_catalog.||) key;
			BEGIN
				state := @extschema@.idem_resolve(key, workflow, resolution, result, reason, actor);
				outcome := 'decided';
			EXCEPTION
				WHEN object_not_in_prerequisite_state THEN
					outcome := 'already_decided';
				WHEN no_data_found OR invalid_parameter_value THEN
					outcome := 'not_found';
				WHEN insufficient_privilege THEN
					outcome := 'not_permitted';
			END;
		END IF;
		RETURN NEXT;
	END LOOP;
END
$$;
COMMENT ON FUNCTION @extschema@.idem_resolve_many(text[], text, text, jsonb, text, text) IS 'operator decision on many claims of a workflow, each on its own: one row per key, in input order, saying what happened';
REVOKE ALL ON FUNCTION @extschema@.idem_resolve_many(text[], text, text, jsonb, text, text) FROM PUBLIC;

CREATE FUNCTION @extschema@.idem_release_many(keys pg_catalog.text[], workflow pg_catalog.text,
	reason pg_catalog.text DEFAULT NULL, actor pg_catalog.text DEFAULT NULL)
RETURNS TABLE (ord pg_catalog.int4, key pg_catalog.text, outcome pg_catalog.text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	done pg_catalog.text[] := '{}';
BEGIN
	PERFORM idem_gate.bulk_args(keys, workflow, 'idem_release(text, text, text, text)');
	FOR i IN 1 .. COALESCE(pg_catalog.array_length(keys, 1), 0) LOOP
		ord := i;
		key := keys[i];
		IF key IS NULL OR key OPERATOR(pg_catalog.=) '' THEN
			outcome := 'not_found';
		ELSIF key OPERATOR(pg_catalog.=) ANY (done) THEN
			outcome := 'already_decided';
		ELSE
			done := done OPERATOR(pg_catalog.||) key;
			BEGIN
				outcome := CASE WHEN @extschema@.idem_release(key, workflow, reason, actor)
							THEN 'decided' ELSE 'not_found' END;
			EXCEPTION
				WHEN invalid_parameter_value THEN
					outcome := 'not_found';
				WHEN insufficient_privilege THEN
					outcome := 'not_permitted';
			END;
		END IF;
		RETURN NEXT;
	END LOOP;
END
$$;
COMMENT ON FUNCTION @extschema@.idem_release_many(text[], text, text, text) IS 'operator release of many claims of a workflow, each on its own: one row per key, in input order, saying what happened';
REVOKE ALL ON FUNCTION @extschema@.idem_release_many(text[], text, text, text) FROM PUBLIC;

/*
 * The arguments every bulk decision checks before its first key: the keys
 * (an array, possibly empty), the workflow (as the single-key functions
 * check it), and EXECUTE on the single-key function it calls, so that a
 * caller without it is refused once, not answered not_permitted per key.
 * It reads nothing but its arguments and the caller's own privileges, and
 * the bulk functions run as their caller: everyone may execute it.
 */
CREATE FUNCTION idem_gate.bulk_args(keys pg_catalog.text[], workflow pg_catalog.text,
	single pg_catalog.text)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF keys IS NULL OR workflow IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed',
			MESSAGE = pg_catalog.format('%s must not be null', CASE WHEN keys IS NULL THEN 'keys' ELSE 'workflow' END),
			HINT = CASE WHEN keys IS NULL THEN 'Pass an array of the keys to decide, such as ARRAY[''evt_1'', ''evt_2''].'
						ELSE 'Pass the workflow the keys belong to.' END;
	END IF;
	IF workflow OPERATOR(pg_catalog.=) '' THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
			MESSAGE = 'workflow must not be empty',
			HINT = 'Pass the workflow the keys belong to.';
	END IF;
	IF NOT pg_catalog.has_function_privilege(pg_catalog.format('@extschema@.%s', single), 'EXECUTE') THEN
		RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
			MESSAGE = pg_catalog.format('permission denied for function %s',
										pg_catalog.split_part(single, '(', 1)),
			HINT = pg_catalog.format('A bulk decision calls %s for each key: grant EXECUTE on both.',
									 pg_catalog.split_part(single, '(', 1));
	END IF;
END
$$;
COMMENT ON FUNCTION idem_gate.bulk_args(text[], text, text) IS 'the arguments of idem_resolve_many() and idem_release_many(), checked before their first key';
GRANT EXECUTE ON FUNCTION idem_gate.bulk_args(text[], text, text) TO PUBLIC;
