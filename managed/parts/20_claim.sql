/*
 * idem_gate managed edition: the claim state machine (the C edition's
 * src/claim.c, src/claim_many.c and the SQL path of src/store_sql.c).
 *
 * Each claim reads the row of its key, then either answers from it or
 * attempts the one write the row's state allows; a write that finds the
 * row changed since it was read (it names the token it read) matches
 * nothing, and the claim starts over.  Exactly one concurrent first claim
 * inserts: INSERT ... ON CONFLICT DO NOTHING waits for a concurrent
 * inserter and then yields to it, which PostgreSQL offers no other way to
 * do.  Expected situations never raise an error; only bad input does.
 * Tests of the state are written "(...) IS TRUE", as in the C edition's
 * SQL path, so that no plan can use the state index: PL/pgSQL keeps a
 * generic plan, perhaps made while the table was empty, and every one
 * must find its row through the primary key.
 */

/*
 * A delivery's payload, kept as a reviewer's evidence: a JSON object or
 * array, or none.  One larger than idem_gate.max_payload_bytes (measured
 * as jsonb) is not kept; its size is.
 */
CREATE FUNCTION idem_gate.m_payload(payload pg_catalog.jsonb, what pg_catalog.text,
									OUT kept pg_catalog.jsonb, OUT dropped pg_catalog.int4)
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	bytes pg_catalog.int8;
BEGIN
	IF payload IS NULL THEN
		RETURN;
	END IF;
	IF pg_catalog.jsonb_typeof(payload) OPERATOR(pg_catalog.<>) ALL (ARRAY['object', 'array']) THEN
		RAISE EXCEPTION '% must be a JSON object or array', what
			USING ERRCODE = '22023',
				  DETAIL = 'It is a single JSON value.',
				  HINT = 'Pass the delivery''s body as it came, such as $json.body in n8n, or NULL to keep none.';
	END IF;
	/*
	 * its size as the C edition measures it, uncompressed with a 4-byte
	 * header: a value just built (an empty concatenation) has that form
	 */
	bytes := pg_catalog.pg_column_size(payload OPERATOR(pg_catalog.||)
		CASE WHEN pg_catalog.jsonb_typeof(payload) OPERATOR(pg_catalog.=) 'object'
			 THEN '{}'::pg_catalog.jsonb ELSE '[]'::pg_catalog.jsonb END);
	IF bytes OPERATOR(pg_catalog.>) idem_gate.m_setting_number('idem_gate.max_payload_bytes', '1MB', 'B', 0, 268435456) THEN
		dropped := LEAST(bytes, 2147483647)::pg_catalog.int4;
	ELSE
		kept := payload;
	END IF;
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_payload(pg_catalog.jsonb, pg_catalog.text) FROM PUBLIC;

/*
 * The error for a key reused for another payload: it shows the caller's
 * fingerprint, never the stored one.
 */
CREATE FUNCTION idem_gate.m_fingerprint_error(workflow pg_catalog.text, key pg_catalog.text,
											  given pg_catalog.text)
	RETURNS void
	LANGUAGE plpgsql IMMUTABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	RAISE EXCEPTION 'fingerprint mismatch for key "%" in workflow "%"',
		idem_gate.m_display(key), idem_gate.m_display(workflow)
		USING ERRCODE = 'IG001',
			  DETAIL = pg_catalog.format('The key was first claimed with another fingerprint; this call gives "%s".', idem_gate.m_display(given)),
			  HINT = 'The same key was reused for a different payload: check the sender''s event ids, or derive the key from the payload with idem_hash().';
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_fingerprint_error(pg_catalog.text, pg_catalog.text, pg_catalog.text) FROM PUBLIC;

/*
 * The first claim's insert: exactly one concurrent inserter wins, the
 * others wait for it and get NULL.  A function of its own, so that under
 * REPEATABLE READ alone it runs in a subtransaction that turns
 * PostgreSQL's serialization error into the C edition's.
 */
CREATE FUNCTION idem_gate.m_insert(p_workflow pg_catalog.text, p_key pg_catalog.text,
								   t pg_catalog.timestamptz, p_fp pg_catalog.text,
								   p_exec pg_catalog.text, p_payload pg_catalog.jsonb,
								   p_dropped pg_catalog.int4, p_issued pg_catalog.bool)
	RETURNS idem_gate.claims
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	r idem_gate.claims;
BEGIN
INSERT INTO idem_gate.claims AS c (workflow, key, state, attempt, token,
		execution_id, fingerprint, created_at, claimed_at, updated_at,
		token_issued, payload, payload_dropped_bytes)
VALUES (p_workflow, p_key, 'processing', 1,
		pg_catalog.nextval('idem_gate.token_seq'::pg_catalog.regclass),
		p_exec, p_fp, t, t, t, p_issued, p_payload, NULLIF(p_dropped, 0))
ON CONFLICT (workflow, key) DO NOTHING
RETURNING * INTO r;
RETURN r;
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_insert(pg_catalog.text, pg_catalog.text, pg_catalog.timestamptz,
	pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.int4, pg_catalog.bool) FROM PUBLIC;

/*
 * One claim of (workflow, key): the state machine of idem_claim,
 * idem_claim_ex and each element of idem_claim_many.  cutoff is NULL when
 * the call never takes over.  granted says the caller owns the claim;
 * wrote that this call changed the row.  Runs as the owner.
 */
CREATE FUNCTION idem_gate.m_claim_key(p_workflow pg_catalog.text, p_key pg_catalog.text,
									  p_cutoff pg_catalog.timestamptz,
									  p_fp pg_catalog.text, p_exec pg_catalog.text,
									  p_has_payload pg_catalog.bool,
									  p_payload pg_catalog.jsonb, p_dropped pg_catalog.int4,
									  p_issued pg_catalog.bool,
									  OUT outcome idem_gate.outcome, OUT granted pg_catalog.bool,
									  OUT wrote pg_catalog.bool, OUT r idem_gate.claims)
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	t pg_catalog.timestamptz;
	takeover pg_catalog.bool;
	read_committed pg_catalog.bool;
BEGIN
	granted := false;
	wrote := false;
	LOOP
		SELECT * INTO r FROM ONLY idem_gate.claims c
		 WHERE c.workflow OPERATOR(pg_catalog.=) p_workflow
		   AND c.key OPERATOR(pg_catalog.=) p_key;
		IF NOT FOUND THEN
			/* the first claim: exactly one concurrent inserter wins */
			PERFORM idem_gate.m_table_guard(true);
			t := pg_catalog.clock_timestamp();
			read_committed := pg_catalog.current_setting('transaction_isolation') OPERATOR(pg_catalog.=) 'read committed';
			IF read_committed THEN
				r := idem_gate.m_insert(p_workflow, p_key, t, p_fp, p_exec, p_payload, p_dropped, p_issued);
			ELSE
				BEGIN
					r := idem_gate.m_insert(p_workflow, p_key, t, p_fp, p_exec, p_payload, p_dropped, p_issued);
				EXCEPTION WHEN serialization_failure THEN
					/* REPEATABLE READ: a claim the snapshot does not see */
					RAISE EXCEPTION 'could not serialize access to key "%" in workflow "%" due to concurrent update',
						idem_gate.m_display(p_key), idem_gate.m_display(p_workflow)
						USING ERRCODE = '40001',
							  DETAIL = 'The claim was written by a transaction that this transaction''s snapshot does not see.',
							  HINT = 'Retry the transaction, or call idem_gate''s functions under READ COMMITTED, where they wait for a concurrent claim and answer from its row.';
				END;
			END IF;
			IF r.token IS NOT NULL THEN
				/*
				 * The token was drawn before the insert, which may have
				 * waited for a concurrent writer of the key that then took
				 * it over and released it: tokens of a key only grow, so a
				 * release recorded with a larger token (or, under
				 * REPEATABLE READ, one the snapshot cannot see) means a
				 * token drawn now.
				 */
				IF NOT read_committed
				   OR EXISTS (SELECT 1 FROM ONLY idem_gate.audit a
							   WHERE a.workflow OPERATOR(pg_catalog.=) p_workflow
								 AND a.key OPERATOR(pg_catalog.=) p_key
								 AND a.token OPERATOR(pg_catalog.>) r.token) THEN
					UPDATE ONLY idem_gate.claims c
					   SET token = pg_catalog.nextval('idem_gate.token_seq'::pg_catalog.regclass)
					 WHERE c.workflow OPERATOR(pg_catalog.=) p_workflow
					   AND c.key OPERATOR(pg_catalog.=) p_key
					RETURNING * INTO r;
				END IF;
				outcome := 'new';
				granted := true;
				wrote := true;
				RETURN;
			END IF;
			CONTINUE;
		END IF;

		IF COALESCE(r.fingerprint OPERATOR(pg_catalog.<>) p_fp, false) THEN
			PERFORM idem_gate.m_fingerprint_error(p_workflow, p_key, p_fp);
		END IF;

		IF r.state OPERATOR(pg_catalog.=) 'completed' THEN
			outcome := 'completed';
			RETURN;
		ELSIF r.state OPERATOR(pg_catalog.=) 'needs_review' THEN
			outcome := 'needs_review';
			RETURN;
		ELSIF r.state OPERATOR(pg_catalog.=) 'failed_retryable'
			  OR (r.state OPERATOR(pg_catalog.=) 'processing'
				  AND NOT COALESCE(r.execution_id OPERATOR(pg_catalog.=) p_exec, false)
				  AND p_cutoff IS NOT NULL AND r.updated_at OPERATOR(pg_catalog.<=) p_cutoff) THEN
			/* a retry after a clean failure, or a takeover of a stale claim */
			PERFORM idem_gate.m_table_guard(true);
			takeover := (r.state OPERATOR(pg_catalog.=) 'processing');
			t := GREATEST(pg_catalog.clock_timestamp(), r.updated_at);
			UPDATE ONLY idem_gate.claims c
			   SET state = 'processing', attempt = c.attempt OPERATOR(pg_catalog.+) 1,
				   token = pg_catalog.nextval('idem_gate.token_seq'::pg_catalog.regclass),
				   execution_id = p_exec, fingerprint = COALESCE(c.fingerprint, p_fp),
				   claimed_at = t, updated_at = t, token_issued = p_issued,
				   payload = CASE WHEN p_has_payload THEN p_payload ELSE c.payload END,
				   payload_dropped_bytes = CASE WHEN p_has_payload THEN NULLIF(p_dropped, 0)
											ELSE c.payload_dropped_bytes END
			 WHERE c.workflow OPERATOR(pg_catalog.=) p_workflow
			   AND c.key OPERATOR(pg_catalog.=) p_key
			   AND c.token OPERATOR(pg_catalog.=) r.token
			   AND (c.state OPERATOR(pg_catalog.=) r.state) IS TRUE
			   AND (c.state OPERATOR(pg_catalog.=) 'failed_retryable'
					OR c.updated_at OPERATOR(pg_catalog.<=) p_cutoff) IS TRUE
			RETURNING * INTO r;
			IF NOT FOUND THEN
				CONTINUE;
			END IF;
			outcome := CASE WHEN takeover THEN 'stale_taken' ELSE 'new' END;
			granted := true;
			wrote := true;
			RETURN;
		ELSIF COALESCE(r.execution_id OPERATOR(pg_catalog.=) p_exec, false) THEN
			/* the owning run came back: same token, nothing changes */
			outcome := 'new';
			granted := true;
			RETURN;
		END IF;
		outcome := 'in_flight';
		RETURN;
	END LOOP;
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_claim_key(pg_catalog.text, pg_catalog.text,
	pg_catalog.timestamptz, pg_catalog.text, pg_catalog.text, pg_catalog.bool,
	pg_catalog.jsonb, pg_catalog.int4, pg_catalog.bool) FROM PUBLIC;
