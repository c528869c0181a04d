/*
 * idem_gate managed edition: an operator's decisions, recorded in the
 * audit trail (the C edition's src/claim_operator.c and src/audit.c).
 */

/*
 * Record an operator's action on a claim.  The acting role is the
 * caller's (the body acts as the owner, but the decision is the
 * caller's); the session role is who logged in; the actor is the person
 * who decided, as the calling application knows them.
 */
CREATE FUNCTION idem_gate.m_audit(caller pg_catalog.oid, action pg_catalog.text,
								  workflow pg_catalog.text, key pg_catalog.text,
								  before idem_gate.state, after idem_gate.state,
								  token pg_catalog.int8, reason pg_catalog.text,
								  actor pg_catalog.text)
	RETURNS void
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
INSERT INTO idem_gate.audit (at, session_role, acting_role, action, workflow, key,
							 state_before, state_after, token, reason, actor)
VALUES (pg_catalog.clock_timestamp(), SESSION_USER,
		(SELECT u.rolname FROM pg_catalog.pg_roles u WHERE u.oid OPERATOR(pg_catalog.=) caller),
		action, workflow, key, before, after, token, reason, actor);
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_audit(pg_catalog.oid, pg_catalog.text, pg_catalog.text,
	pg_catalog.text, idem_gate.state, idem_gate.state, pg_catalog.int8, pg_catalog.text,
	pg_catalog.text) FROM PUBLIC;

/*
 * Who decided a claim last, and when, for the refusal of an operator's
 * action on a claim another operator (or the owner) decided first: the
 * newest audit row but the janitor's escalations, which decide nothing.
 * Names the person, the role and the time, never a reason or a token.
 * changed_at, the claim's last change, when it has a row.  Times are
 * written in ISO style whatever the session's DateStyle, as the C
 * edition's timestamptz_to_str() writes them.
 */
CREATE FUNCTION idem_gate.m_last_decision(workflow pg_catalog.text, key pg_catalog.text,
										  changed_at pg_catalog.timestamptz)
	RETURNS pg_catalog.text
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	SET datestyle = 'ISO, MDY'
	AS $$
DECLARE
	a record;
	out pg_catalog.text;
BEGIN
	SELECT x.at, x.action, x.actor, x.session_role::pg_catalog.text AS srole,
		   x.acting_role::pg_catalog.text AS arole, x.state_before, x.state_after
	  INTO a
	  FROM ONLY idem_gate.audit x
	 WHERE x.workflow OPERATOR(pg_catalog.=) m_last_decision.workflow
	   AND x.key OPERATOR(pg_catalog.=) m_last_decision.key
	   AND x.action OPERATOR(pg_catalog.<>) 'escalate'
	 ORDER BY x.id DESC LIMIT 1;
	IF NOT FOUND THEN
		RETURN CASE WHEN changed_at IS NULL THEN NULL
			   ELSE pg_catalog.format('No operator has acted on it; it last changed at %s.', changed_at) END;
	END IF;
	out := 'The last operator action on it was ' OPERATOR(pg_catalog.||) a.action;
	IF a.state_before IS NOT NULL AND a.state_after IS NOT NULL THEN
		out := out OPERATOR(pg_catalog.||) pg_catalog.format(' (%s to %s)', a.state_before, a.state_after);
	END IF;
	out := out OPERATOR(pg_catalog.||) ' by ' OPERATOR(pg_catalog.||)
		CASE WHEN a.actor IS NOT NULL THEN pg_catalog.format('%s (role %s)', idem_gate.m_display(a.actor), a.srole)
			 ELSE 'role ' OPERATOR(pg_catalog.||) a.srole END;
	IF a.srole OPERATOR(pg_catalog.<>) a.arole THEN
		out := out OPERATOR(pg_catalog.||) ' as ' OPERATOR(pg_catalog.||) a.arole;
	END IF;
	out := out OPERATOR(pg_catalog.||) pg_catalog.format(' at %s.', a.at);
	IF changed_at IS NOT NULL AND changed_at OPERATOR(pg_catalog.>) a.at THEN
		out := out OPERATOR(pg_catalog.||) pg_catalog.format(' The claim changed since, at %s.', changed_at);
	END IF;
	RETURN out;
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_last_decision(pg_catalog.text, pg_catalog.text, pg_catalog.timestamptz) FROM PUBLIC;

/*
 * idem_resolve's body, for both signatures: a decision about a claim
 * whose side effect may or may not have happened.
 */
CREATE FUNCTION idem_gate_call.idem_resolve(caller pg_catalog.regrole, api pg_catalog.text,
	key pg_catalog.text, workflow pg_catalog.text, resolution pg_catalog.text,
	result pg_catalog.jsonb, reason pg_catalog.text, actor pg_catalog.text)
	RETURNS idem_gate.state
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	complete pg_catalog.bool;
	r idem_gate.claims;
	before idem_gate.state;
	t pg_catalog.timestamptz;
BEGIN
	IF api OPERATOR(pg_catalog.<>) ALL (ARRAY['@extschema@.idem_resolve(text,text,text,jsonb,text)',
											  '@extschema@.idem_resolve(text,text,text,jsonb,text,text)']) THEN
		RAISE EXCEPTION 'permission denied for function idem_resolve' USING ERRCODE = '42501';
	END IF;
	IF resolution IS NULL THEN
		RAISE EXCEPTION 'resolution must not be null'
			USING ERRCODE = '22004', HINT = 'Use ''completed'' if the side effect happened, ''retry'' if it did not.';
	END IF;
	IF resolution OPERATOR(pg_catalog.=) 'completed' THEN
		complete := true;
	ELSIF resolution OPERATOR(pg_catalog.=) 'retry' THEN
		complete := false;
	ELSE
		RAISE EXCEPTION 'unknown resolution "%"', idem_gate.m_display(resolution)
			USING ERRCODE = '22023', HINT = 'Use ''completed'' if the side effect happened, ''retry'' if it did not.';
	END IF;
	IF NOT complete AND result IS NOT NULL THEN
		RAISE EXCEPTION 'resolution "retry" takes no result'
			USING ERRCODE = '22023', HINT = 'A receipt is stored only with resolution ''completed''.';
	END IF;
	PERFORM idem_gate.m_begin(caller, api, key, workflow);
	LOOP
		SELECT * INTO r FROM ONLY idem_gate.claims c
		 WHERE c.workflow OPERATOR(pg_catalog.=) idem_resolve.workflow
		   AND c.key OPERATOR(pg_catalog.=) idem_resolve.key;
		IF NOT FOUND THEN
			PERFORM idem_gate.m_error_no_claim('resolve', workflow, key,
											   idem_gate.m_last_decision(workflow, key, NULL));
		END IF;
		IF r.state OPERATOR(pg_catalog.<>) ALL (ARRAY['processing', 'needs_review']::idem_gate.state[]) THEN
			PERFORM idem_gate.m_error_state('resolve', workflow, key, r.state,
											idem_gate.m_last_decision(workflow, key, r.updated_at));
		END IF;
		before := r.state;
		t := GREATEST(pg_catalog.clock_timestamp(), r.updated_at);
		UPDATE ONLY idem_gate.claims c
		   SET state = CASE WHEN complete THEN 'completed' ELSE 'failed_retryable' END::idem_gate.state,
			   result = CASE WHEN complete THEN idem_resolve.result END,
			   completed_at = CASE WHEN complete THEN t END,
			   updated_at = t,
			   payload = CASE WHEN complete THEN NULL ELSE c.payload END,
			   payload_dropped_bytes = CASE WHEN complete THEN NULL ELSE c.payload_dropped_bytes END
		 WHERE c.workflow OPERATOR(pg_catalog.=) idem_resolve.workflow
		   AND c.key OPERATOR(pg_catalog.=) idem_resolve.key
		   AND (c.state OPERATOR(pg_catalog.=) ANY (ARRAY['processing', 'needs_review']::idem_gate.state[])) IS TRUE
		   AND c.token OPERATOR(pg_catalog.=) r.token
		RETURNING * INTO r;
		EXIT WHEN FOUND;
	END LOOP;
	PERFORM idem_gate.m_audit(caller::pg_catalog.oid, 'resolve', workflow, key, before, r.state,
							  r.token, reason, actor);
	RETURN r.state;
END
$$;
GRANT EXECUTE ON FUNCTION idem_gate_call.idem_resolve(pg_catalog.regrole, pg_catalog.text,
	pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text,
	pg_catalog.text) TO PUBLIC;

CREATE FUNCTION @extschema@.idem_resolve(key text, workflow text,
	resolution text, result jsonb DEFAULT NULL, reason text DEFAULT NULL)
RETURNS idem_gate.state
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT idem_gate_call.idem_resolve(CURRENT_USER::pg_catalog.regrole,
	'@extschema@.idem_resolve(text,text,text,jsonb,text)', key, workflow, resolution, result, reason, NULL)
$$;
REVOKE ALL ON FUNCTION @extschema@.idem_resolve(text, text, text, jsonb, text) FROM PUBLIC;

CREATE FUNCTION @extschema@.idem_resolve(key pg_catalog.text, workflow pg_catalog.text,
	resolution pg_catalog.text, result pg_catalog.jsonb, reason pg_catalog.text,
	actor pg_catalog.text)
RETURNS idem_gate.state
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT idem_gate_call.idem_resolve(CURRENT_USER::pg_catalog.regrole,
	'@extschema@.idem_resolve(text,text,text,jsonb,text,text)', key, workflow, resolution, result, reason, actor)
$$;

/*
 * idem_release's body, for both signatures: forget a claim in any state,
 * so the next delivery is new; false when there was no claim.
 */
CREATE FUNCTION idem_gate_call.idem_release(caller pg_catalog.regrole, api pg_catalog.text,
	key pg_catalog.text, workflow pg_catalog.text, reason pg_catalog.text, actor pg_catalog.text)
	RETURNS pg_catalog.bool
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	r idem_gate.claims;
BEGIN
	IF api OPERATOR(pg_catalog.<>) ALL (ARRAY['@extschema@.idem_release(text,text,text)',
											  '@extschema@.idem_release(text,text,text,text)']) THEN
		RAISE EXCEPTION 'permission denied for function idem_release' USING ERRCODE = '42501';
	END IF;
	PERFORM idem_gate.m_begin(caller, api, key, workflow);
	LOOP
		SELECT * INTO r FROM ONLY idem_gate.claims c
		 WHERE c.workflow OPERATOR(pg_catalog.=) idem_release.workflow
		   AND c.key OPERATOR(pg_catalog.=) idem_release.key;
		IF NOT FOUND THEN
			RETURN false;
		END IF;
		DELETE FROM ONLY idem_gate.claims c
		 WHERE c.workflow OPERATOR(pg_catalog.=) idem_release.workflow
		   AND c.key OPERATOR(pg_catalog.=) idem_release.key
		   AND c.token OPERATOR(pg_catalog.=) r.token
		RETURNING * INTO r;
		EXIT WHEN FOUND;
	END LOOP;
	PERFORM idem_gate.m_audit(caller::pg_catalog.oid, 'release', workflow, key, r.state, NULL,
							  r.token, reason, actor);
	RETURN true;
END
$$;
GRANT EXECUTE ON FUNCTION idem_gate_call.idem_release(pg_catalog.regrole, pg_catalog.text,
	pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.text) TO PUBLIC;

CREATE FUNCTION @extschema@.idem_release(key text, workflow text,
	reason text DEFAULT NULL)
RETURNS boolean
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT idem_gate_call.idem_release(CURRENT_USER::pg_catalog.regrole,
	'@extschema@.idem_release(text,text,text)', key, workflow, reason, NULL)
$$;

CREATE FUNCTION @extschema@.idem_release(key pg_catalog.text, workflow pg_catalog.text,
	reason pg_catalog.text, actor pg_catalog.text)
RETURNS pg_catalog.bool
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT idem_gate_call.idem_release(CURRENT_USER::pg_catalog.regrole,
	'@extschema@.idem_release(text,text,text,text)', key, workflow, reason, actor)
$$;

/*
 * idem_replay's body: an operator sends a failed_retryable claim's stored
 * payload to the gate again, because its sender cannot.  Nothing changes
 * here but the audit trail: the decision is recorded, and the payload to
 * send is the answer; a claim that cannot be replayed is refused first.
 */
CREATE FUNCTION idem_gate_call.idem_replay(caller pg_catalog.regrole, key pg_catalog.text,
	workflow pg_catalog.text, reason pg_catalog.text, actor pg_catalog.text)
	RETURNS pg_catalog.jsonb
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	r idem_gate.claims;
BEGIN
	PERFORM idem_gate.m_begin(caller, '@extschema@.idem_replay(text,text,text,text)', key, workflow);
	SELECT * INTO r FROM ONLY idem_gate.claims c
	 WHERE c.workflow OPERATOR(pg_catalog.=) idem_replay.workflow
	   AND c.key OPERATOR(pg_catalog.=) idem_replay.key;
	IF NOT FOUND THEN
		PERFORM idem_gate.m_error_no_claim('replay', workflow, key,
										   idem_gate.m_last_decision(workflow, key, NULL));
	END IF;
	IF r.state OPERATOR(pg_catalog.<>) 'failed_retryable' THEN
		PERFORM idem_gate.m_error_state('replay', workflow, key, r.state,
										idem_gate.m_last_decision(workflow, key, r.updated_at));
	END IF;
	IF r.payload IS NULL THEN
		RAISE EXCEPTION 'cannot replay key "%" in workflow "%": no payload is kept',
			idem_gate.m_display(key), idem_gate.m_display(workflow)
			USING ERRCODE = '55000',
				  DETAIL = 'Only a claim whose delivery''s payload was kept can be replayed: the gate keeps it when the delivery passes it and it fits in idem_gate.max_payload_bytes.',
				  HINT = 'Ask the sender to deliver the event again.';
	END IF;
	PERFORM idem_gate.m_audit(caller::pg_catalog.oid, 'replay', workflow, key, r.state, r.state,
							  r.token, reason, actor);
	RETURN r.payload;
END
$$;
GRANT EXECUTE ON FUNCTION idem_gate_call.idem_replay(pg_catalog.regrole, pg_catalog.text,
	pg_catalog.text, pg_catalog.text, pg_catalog.text) TO PUBLIC;

CREATE FUNCTION @extschema@.idem_replay(key pg_catalog.text, workflow pg_catalog.text,
	reason pg_catalog.text DEFAULT NULL, actor pg_catalog.text DEFAULT NULL)
RETURNS pg_catalog.jsonb
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT idem_gate_call.idem_replay(CURRENT_USER::pg_catalog.regrole, key, workflow, reason, actor)
$$;

/* idem_gate.history's body: the audit rows of a claim, oldest first; no tokens. */
CREATE FUNCTION idem_gate_call.history(caller pg_catalog.regrole, key pg_catalog.text,
									   workflow pg_catalog.text)
	RETURNS TABLE (at pg_catalog.timestamptz, action pg_catalog.text, actor pg_catalog.text,
	session_role pg_catalog.name, acting_role pg_catalog.name,
	state_before idem_gate.state, state_after idem_gate.state, reason pg_catalog.text)
	LANGUAGE plpgsql STABLE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	PERFORM idem_gate.m_begin(caller, 'idem_gate.history(text,text)', key, workflow);
	RETURN QUERY SELECT a.at, a.action, a.actor, a.session_role, a.acting_role,
						a.state_before, a.state_after, a.reason
				   FROM ONLY idem_gate.audit a
				  WHERE a.workflow OPERATOR(pg_catalog.=) history.workflow
					AND a.key OPERATOR(pg_catalog.=) history.key
				  ORDER BY a.id;
END
$$;
GRANT EXECUTE ON FUNCTION idem_gate_call.history(pg_catalog.regrole, pg_catalog.text, pg_catalog.text) TO PUBLIC;

CREATE FUNCTION idem_gate.history(key pg_catalog.text, workflow pg_catalog.text)
RETURNS TABLE (at pg_catalog.timestamptz, action pg_catalog.text, actor pg_catalog.text,
	session_role pg_catalog.name, acting_role pg_catalog.name,
	state_before idem_gate.state, state_after idem_gate.state, reason pg_catalog.text)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT * FROM idem_gate_call.history(CURRENT_USER::pg_catalog.regrole, key, workflow)
$$;

/*
 * The trigger that keeps the audit trail as written: only the janitor's
 * pruning (idem_gate.janitor_run(), as the owner, which marks its
 * transaction) may delete rows.
 */
CREATE FUNCTION idem_gate.audit_guard()
	RETURNS trigger
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	IF TG_OP OPERATOR(pg_catalog.=) 'DELETE'
	   AND CURRENT_USER::pg_catalog.regrole::pg_catalog.oid OPERATOR(pg_catalog.=) idem_gate.m_owner()
	   AND pg_catalog.current_setting('idem_gate.m_pruning', true) OPERATOR(pg_catalog.=) pg_catalog.txid_current()::pg_catalog.text THEN
		RETURN OLD;
	END IF;
	RAISE EXCEPTION 'idem_gate.audit cannot be changed'
		USING ERRCODE = '42501',
			  DETAIL = 'The audit trail keeps every operator''s decision as it was recorded; the janitor removes rows older than idem_gate.audit_retention.',
			  HINT = 'Shorten idem_gate.audit_retention to keep less history.';
END
$$;
