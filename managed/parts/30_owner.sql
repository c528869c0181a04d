/*
 * idem_gate managed edition: what the run that owns a claim does next
 * (the C edition's src/claim_owner.c), idem_status, and the announcement
 * of a claim that enters the inbox (src/alert.c).
 */

/* The "no claim exists" error. */
CREATE FUNCTION idem_gate.m_error_no_claim(verb pg_catalog.text, workflow pg_catalog.text,
										   key pg_catalog.text, detail pg_catalog.text DEFAULT NULL)
	RETURNS void
	LANGUAGE plpgsql IMMUTABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	msg pg_catalog.text := pg_catalog.format('cannot %s key "%s" in workflow "%s": no claim exists',
		verb, idem_gate.m_display(key), idem_gate.m_display(workflow));
	hint pg_catalog.text := 'Claim the key with idem_claim() or idem_claim_ex() first; completed and failed claims are deleted once their retention has passed.';
BEGIN
	IF detail IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = 'P0002', MESSAGE = msg, HINT = hint;
	END IF;
	RAISE EXCEPTION USING ERRCODE = 'P0002', MESSAGE = msg, DETAIL = detail, HINT = hint;
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_error_no_claim(pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.text) FROM PUBLIC;

/* The "transition not allowed" error, with a hint that fits the state. */
CREATE FUNCTION idem_gate.m_error_state(verb pg_catalog.text, workflow pg_catalog.text,
										key pg_catalog.text, state idem_gate.state,
										detail pg_catalog.text DEFAULT NULL)
	RETURNS void
	LANGUAGE plpgsql IMMUTABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	msg pg_catalog.text := pg_catalog.format('cannot %s key "%s" in workflow "%s": the claim is %s',
		verb, idem_gate.m_display(key), idem_gate.m_display(workflow), state);
	hint pg_catalog.text;
BEGIN
	hint := CASE state
				WHEN 'completed' THEN 'A completed claim is final; idem_status() shows its receipt.'
				WHEN 'needs_review' THEN 'Decide the outcome with idem_resolve(key, workflow, ''completed'') or idem_resolve(key, workflow, ''retry'').'
				WHEN 'failed_retryable' THEN CASE WHEN verb OPERATOR(pg_catalog.=) 'resolve'
					THEN 'Only needs_review and processing claims can be resolved; a failed_retryable claim runs again at its next claim.'
					ELSE 'Claim the key again with idem_claim() or idem_claim_ex() before recording an outcome.' END
				ELSE CASE WHEN verb OPERATOR(pg_catalog.=) 'replay'
					THEN 'Only a failed_retryable claim is replayed: a processing claim''s run may still finish it.'
					ELSE 'Only needs_review and processing claims can be resolved.' END END;
	IF detail IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = msg, HINT = hint;
	END IF;
	RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = msg, DETAIL = detail, HINT = hint;
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_error_state(pg_catalog.text, pg_catalog.text, pg_catalog.text, idem_gate.state, pg_catalog.text) FROM PUBLIC;

/*
 * Announce that a claim of workflow entered the inbox for reason: a
 * NOTIFY on idem_gate_alert, delivered when the transaction commits.  The
 * payload carries the workflow (cut to 500 bytes), the reason, the time
 * in UTC and a number that keeps two announcements of one transaction
 * apart (PostgreSQL folds identical ones): no key, token or error text.
 */
CREATE FUNCTION idem_gate.m_announce(workflow pg_catalog.text, reason pg_catalog.text)
	RETURNS pg_catalog.text
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	cut pg_catalog.text := workflow;
	seq pg_catalog.int8;
	payload pg_catalog.text;
BEGIN
	WHILE pg_catalog.octet_length(cut) OPERATOR(pg_catalog.>) 500 LOOP
		cut := pg_catalog.left(cut, -1);
	END LOOP;
	seq := COALESCE(NULLIF(pg_catalog.current_setting('idem_gate.m_announced', true), '')::pg_catalog.int8, 0)
		   OPERATOR(pg_catalog.+) 1;
	PERFORM pg_catalog.set_config('idem_gate.m_announced', seq::pg_catalog.text, true);
	payload := '{"workflow":' OPERATOR(pg_catalog.||) pg_catalog.to_json(cut)::pg_catalog.text
		OPERATOR(pg_catalog.||) CASE WHEN cut OPERATOR(pg_catalog.<>) workflow THEN ',"workflow_truncated":true' ELSE '' END
		OPERATOR(pg_catalog.||) ',"reason":' OPERATOR(pg_catalog.||) pg_catalog.to_json(reason)::pg_catalog.text
		OPERATOR(pg_catalog.||) ',"at":"' OPERATOR(pg_catalog.||)
		pg_catalog.btrim(pg_catalog.to_json(pg_catalog.timezone('UTC', pg_catalog.clock_timestamp()))::pg_catalog.text, '"')
		OPERATOR(pg_catalog.||) '+00:00","seq":' OPERATOR(pg_catalog.||) seq::pg_catalog.text OPERATOR(pg_catalog.||) '}';
	PERFORM pg_catalog.pg_notify('idem_gate_alert', payload);
	RETURN payload;
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_announce(pg_catalog.text, pg_catalog.text) FROM PUBLIC;

/*
 * Read the row an owner's call acts on, and check that the caller may act
 * on it: the claim exists, the token (if given) still owns it, and a NULL
 * token is allowed only where no token was handed out.  Returns NULL for
 * a completed row when completed_ok (a retried completion is harmless);
 * otherwise the row, which is processing.
 */
CREATE FUNCTION idem_gate.m_owner_read(workflow pg_catalog.text, key pg_catalog.text,
									   verb pg_catalog.text, fname pg_catalog.text,
									   token pg_catalog.int8, completed_ok pg_catalog.bool)
	RETURNS idem_gate.claims
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	r idem_gate.claims;
BEGIN
	SELECT * INTO r FROM ONLY idem_gate.claims c
	 WHERE c.workflow OPERATOR(pg_catalog.=) m_owner_read.workflow
	   AND c.key OPERATOR(pg_catalog.=) m_owner_read.key;
	IF NOT FOUND THEN
		PERFORM idem_gate.m_error_no_claim(verb, workflow, key);
	END IF;
	IF token IS NOT NULL AND r.token OPERATOR(pg_catalog.<>) token THEN
		RAISE EXCEPTION 'token % no longer owns key "%" in workflow "%"',
			token, idem_gate.m_display(key), idem_gate.m_display(workflow)
			USING ERRCODE = '55000',
				  DETAIL = pg_catalog.format('The claim was granted to another run: it is now %s, attempt %s.', r.state, r.attempt),
				  HINT = 'Another run owns this event now; this run must not record an outcome for it.';
	END IF;
	IF token IS NULL AND r.token_issued THEN
		RAISE EXCEPTION 'token must not be null for key "%" in workflow "%"',
			idem_gate.m_display(key), idem_gate.m_display(workflow)
			USING ERRCODE = '22004',
				  DETAIL = 'The claim was granted by idem_claim_ex() or idem_claim_many(), which handed its token to the run that owns it.',
				  HINT = pg_catalog.format('Pass the token returned with the claim to %s; an operator acts on any claim with idem_resolve() or idem_release().', fname);
	END IF;
	IF r.state OPERATOR(pg_catalog.=) 'completed' AND completed_ok THEN
		RETURN NULL;
	END IF;
	IF r.state OPERATOR(pg_catalog.<>) 'processing' THEN
		PERFORM idem_gate.m_error_state(verb, workflow, key, r.state);
	END IF;
	RETURN r;
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_owner_read(pg_catalog.text, pg_catalog.text, pg_catalog.text,
	pg_catalog.text, pg_catalog.int8, pg_catalog.bool) FROM PUBLIC;

/* idem_heartbeat's body: true while the token owns the claim, false once it does not. */
CREATE FUNCTION idem_gate_call.idem_heartbeat(caller pg_catalog.regrole, key pg_catalog.text,
											  workflow pg_catalog.text, token pg_catalog.int8)
	RETURNS pg_catalog.bool
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	r idem_gate.claims;
BEGIN
	IF token IS NULL THEN
		RAISE EXCEPTION 'token must not be null'
			USING ERRCODE = '22004', HINT = 'Pass the token returned by idem_claim_ex() for this claim.';
	END IF;
	PERFORM idem_gate.m_begin(caller, '@extschema@.idem_heartbeat(text,text,bigint)', key, workflow);
	LOOP
		SELECT * INTO r FROM ONLY idem_gate.claims c
		 WHERE c.workflow OPERATOR(pg_catalog.=) idem_heartbeat.workflow
		   AND c.key OPERATOR(pg_catalog.=) idem_heartbeat.key;
		IF NOT FOUND THEN
			PERFORM idem_gate.m_error_no_claim('heartbeat', workflow, key);
		END IF;
		IF r.state OPERATOR(pg_catalog.<>) 'processing' OR r.token OPERATOR(pg_catalog.<>) token THEN
			RETURN false;
		END IF;
		UPDATE ONLY idem_gate.claims c
		   SET updated_at = GREATEST(pg_catalog.clock_timestamp(), c.updated_at)
		 WHERE c.workflow OPERATOR(pg_catalog.=) idem_heartbeat.workflow
		   AND c.key OPERATOR(pg_catalog.=) idem_heartbeat.key
		   AND (c.state OPERATOR(pg_catalog.=) 'processing') IS TRUE
		   AND c.token OPERATOR(pg_catalog.=) idem_heartbeat.token;
		IF FOUND THEN
			RETURN true;
		END IF;
	END LOOP;
END
$$;
GRANT EXECUTE ON FUNCTION idem_gate_call.idem_heartbeat(pg_catalog.regrole, pg_catalog.text, pg_catalog.text, pg_catalog.int8) TO PUBLIC;

CREATE FUNCTION @extschema@.idem_heartbeat(key text, workflow text, token bigint)
RETURNS boolean
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT idem_gate_call.idem_heartbeat(CURRENT_USER::pg_catalog.regrole, key, workflow, token)
$$;

/*
 * idem_complete's and idem_fail's body: the owner's transition out of
 * processing.  A row changed between the read and the write is read
 * again.  Returns the row as written, or as read for a retried
 * completion.
 */
CREATE FUNCTION idem_gate.m_owner_finish(workflow pg_catalog.text, key pg_catalog.text,
										 verb pg_catalog.text, fname pg_catalog.text,
										 token pg_catalog.int8, new_state idem_gate.state,
										 value_result pg_catalog.jsonb, value_error pg_catalog.text)
	RETURNS idem_gate.claims
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	r idem_gate.claims;
	t pg_catalog.timestamptz;
BEGIN
	LOOP
		r := idem_gate.m_owner_read(workflow, key, verb, fname, token,
									new_state OPERATOR(pg_catalog.=) 'completed');
		IF r IS NULL THEN
			RETURN NULL;
		END IF;
		t := GREATEST(pg_catalog.clock_timestamp(), r.updated_at);
		IF new_state OPERATOR(pg_catalog.=) 'completed' THEN
			UPDATE ONLY idem_gate.claims c
			   SET state = 'completed', result = value_result, completed_at = t, updated_at = t,
				   payload = NULL, payload_dropped_bytes = NULL
			 WHERE c.workflow OPERATOR(pg_catalog.=) m_owner_finish.workflow
			   AND c.key OPERATOR(pg_catalog.=) m_owner_finish.key
			   AND (c.state OPERATOR(pg_catalog.=) 'processing') IS TRUE
			   AND c.token OPERATOR(pg_catalog.=) r.token
			RETURNING * INTO r;
		ELSE
			UPDATE ONLY idem_gate.claims c
			   SET state = new_state, last_error = value_error, updated_at = t
			 WHERE c.workflow OPERATOR(pg_catalog.=) m_owner_finish.workflow
			   AND c.key OPERATOR(pg_catalog.=) m_owner_finish.key
			   AND (c.state OPERATOR(pg_catalog.=) 'processing') IS TRUE
			   AND c.token OPERATOR(pg_catalog.=) r.token
			RETURNING * INTO r;
		END IF;
		IF FOUND THEN
			RETURN r;
		END IF;
	END LOOP;
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_owner_finish(pg_catalog.text, pg_catalog.text, pg_catalog.text,
	pg_catalog.text, pg_catalog.int8, idem_gate.state, pg_catalog.jsonb, pg_catalog.text) FROM PUBLIC;

/* idem_complete's body: the side effect happened; store its receipt. */
CREATE FUNCTION idem_gate_call.idem_complete(caller pg_catalog.regrole, key pg_catalog.text,
	workflow pg_catalog.text, token pg_catalog.int8, result pg_catalog.jsonb)
	RETURNS pg_catalog.bool
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	PERFORM idem_gate.m_begin(caller, '@extschema@.idem_complete(text,text,bigint,jsonb)', key, workflow);
	PERFORM idem_gate.m_owner_finish(workflow, key, 'complete', 'idem_complete()', token,
									 'completed', result, NULL);
	RETURN true;
END
$$;
GRANT EXECUTE ON FUNCTION idem_gate_call.idem_complete(pg_catalog.regrole, pg_catalog.text,
	pg_catalog.text, pg_catalog.int8, pg_catalog.jsonb) TO PUBLIC;

CREATE FUNCTION @extschema@.idem_complete(key text, workflow text,
	token bigint DEFAULT NULL, result jsonb DEFAULT NULL)
RETURNS boolean
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT idem_gate_call.idem_complete(CURRENT_USER::pg_catalog.regrole, key, workflow, token, result)
$$;

/*
 * idem_fail's body.  retryable means "before any side effect": the next
 * claim may run it again; otherwise a person decides.  A claim entering
 * the inbox is announced once, with this transaction.
 */
CREATE FUNCTION idem_gate_call.idem_fail(caller pg_catalog.regrole, key pg_catalog.text,
	workflow pg_catalog.text, token pg_catalog.int8, error pg_catalog.text,
	retryable pg_catalog.bool)
	RETURNS idem_gate.state
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	r idem_gate.claims;
	retry pg_catalog.bool := COALESCE(retryable, false);
BEGIN
	PERFORM idem_gate.m_begin(caller, '@extschema@.idem_fail(text,text,bigint,text,boolean)', key, workflow);
	r := idem_gate.m_owner_finish(workflow, key, 'fail', 'idem_fail()', token,
								  CASE WHEN retry THEN 'failed_retryable' ELSE 'needs_review' END::idem_gate.state,
								  NULL, error);
	IF NOT retry THEN
		PERFORM idem_gate.m_announce(workflow, 'needs_review');
	ELSIF r.attempt OPERATOR(pg_catalog.=) idem_gate.m_setting_number('idem_gate.max_attempts', '5', '', 1, 1000000) THEN
		/* announced at the max_attempts-th failure only; the digest tells the rest */
		PERFORM idem_gate.m_announce(workflow, 'failing');
	END IF;
	RETURN r.state;
END
$$;
GRANT EXECUTE ON FUNCTION idem_gate_call.idem_fail(pg_catalog.regrole, pg_catalog.text,
	pg_catalog.text, pg_catalog.int8, pg_catalog.text, pg_catalog.bool) TO PUBLIC;

CREATE FUNCTION @extschema@.idem_fail(key text, workflow text,
	token bigint DEFAULT NULL, error text DEFAULT NULL,
	retryable boolean DEFAULT false)
RETURNS idem_gate.state
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT idem_gate_call.idem_fail(CURRENT_USER::pg_catalog.regrole, key, workflow, token, error, retryable)
$$;

/* idem_status's body: the whole row, for people and error workflows; works on a standby. */
CREATE FUNCTION idem_gate_call.idem_status(caller pg_catalog.regrole, key pg_catalog.text,
										   workflow pg_catalog.text)
	RETURNS SETOF idem_gate.claims
	LANGUAGE plpgsql STABLE SECURITY DEFINER ROWS 1
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	PERFORM idem_gate.m_begin(caller, '@extschema@.idem_status(text,text)', key, workflow);
	RETURN QUERY SELECT * FROM ONLY idem_gate.claims c
				  WHERE c.workflow OPERATOR(pg_catalog.=) idem_status.workflow
					AND c.key OPERATOR(pg_catalog.=) idem_status.key;
END
$$;
GRANT EXECUTE ON FUNCTION idem_gate_call.idem_status(pg_catalog.regrole, pg_catalog.text, pg_catalog.text) TO PUBLIC;

CREATE FUNCTION @extschema@.idem_status(key text, workflow text)
RETURNS SETOF idem_gate.claims
LANGUAGE sql STABLE ROWS 1
SET search_path = pg_catalog, pg_temp
AS $$
SELECT * FROM idem_gate_call.idem_status(CURRENT_USER::pg_catalog.regrole, key, workflow)
$$;
