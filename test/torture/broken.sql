-- idem_gate fault torture: a deliberately broken gate, to show that every
-- violation the harness reports is detectable (test/torture/run.sh --broken=MODE).
--
-- A PL/pgSQL imitation of idem_claim_ex, idem_complete, idem_fail and
-- idem_heartbeat in the schema "broken" of the throwaway torture database,
-- writing the real idem_gate.claims table.  The installed idem_gate.so is
-- never touched.  With torture.broken unset it follows the contract; each
-- mode removes exactly one safeguard:
--
--   race          a first claim reads, then inserts with a blind upsert
--                 (no atomic conflict check), and a takeover updates
--                 without re-checking the token and staleness it read
--   reuse_token   a stale takeover keeps the old token instead of a new one
--   nofence       complete, fail and heartbeat do not check the token
--   review_retry  a needs_review claim is granted again like a failed one
--
-- (The mode "async" needs no broken function: the clients turn
-- synchronous_commit off, so acknowledged commits can be lost in a crash.)

CREATE SCHEMA broken;

CREATE FUNCTION broken.mode() RETURNS text
LANGUAGE sql STABLE AS $$ SELECT coalesce(current_setting('torture.broken', true), '') $$;

CREATE FUNCTION broken.idem_claim_ex(p_key text, p_workflow text,
	p_stale interval DEFAULT NULL, p_fingerprint text DEFAULT NULL,
	p_execution_id text DEFAULT NULL,
	OUT outcome idem_gate.outcome, OUT token bigint, OUT attempt integer,
	OUT state idem_gate.state, OUT result jsonb, OUT claimed_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
	m text := broken.mode();
	r idem_gate.claims;
	n int := 0;
BEGIN
	LOOP
		n := n + 1;
		SELECT * INTO r FROM idem_gate.claims c
		 WHERE c.workflow = p_workflow AND c.key = p_key;
		IF NOT FOUND THEN
			IF m = 'race' THEN
				-- read, then write: whoever writes last believes it is alone
				PERFORM pg_sleep(0.002);
				INSERT INTO idem_gate.claims AS c (workflow, key, state, attempt, token,
					execution_id, fingerprint, created_at, claimed_at, updated_at)
				VALUES (p_workflow, p_key, 'processing', 1, nextval('idem_gate.token_seq'),
					p_execution_id, p_fingerprint, now(), now(), now())
				ON CONFLICT (workflow, key) DO UPDATE SET state = 'processing',
					attempt = 1, token = nextval('idem_gate.token_seq'),
					execution_id = excluded.execution_id, result = NULL,
					completed_at = NULL, created_at = now(), claimed_at = now(),
					updated_at = now()
				RETURNING * INTO r;
			ELSE
				INSERT INTO idem_gate.claims AS c (workflow, key, state, attempt, token,
					execution_id, fingerprint, created_at, claimed_at, updated_at)
				VALUES (p_workflow, p_key, 'processing', 1, nextval('idem_gate.token_seq'),
					p_execution_id, p_fingerprint, now(), now(), now())
				ON CONFLICT (workflow, key) DO NOTHING
				RETURNING * INTO r;
				IF NOT FOUND THEN CONTINUE; END IF;
			END IF;
			outcome := 'new';
		ELSIF r.state = 'processing' AND p_execution_id IS NOT NULL
			  AND r.execution_id = p_execution_id THEN
			outcome := 'new';
		ELSIF r.state = 'processing' AND p_stale IS NOT NULL
			  AND r.updated_at <= now() - p_stale THEN
			IF m = 'race' THEN
				PERFORM pg_sleep(0.002);
				UPDATE idem_gate.claims c SET attempt = c.attempt + 1,
					token = nextval('idem_gate.token_seq'), execution_id = p_execution_id,
					claimed_at = greatest(now(), c.updated_at),
					updated_at = greatest(now(), c.updated_at)
				 WHERE c.workflow = p_workflow AND c.key = p_key
				RETURNING * INTO r;
			ELSE
				UPDATE idem_gate.claims c SET attempt = c.attempt + 1,
					token = CASE WHEN m = 'reuse_token' THEN c.token
							ELSE nextval('idem_gate.token_seq') END,
					execution_id = p_execution_id,
					claimed_at = greatest(now(), c.updated_at),
					updated_at = greatest(now(), c.updated_at)
				 WHERE c.workflow = p_workflow AND c.key = p_key
				   AND c.state = 'processing' AND c.token = r.token
				   AND c.updated_at <= now() - p_stale
				RETURNING * INTO r;
				IF NOT FOUND THEN CONTINUE; END IF;
			END IF;
			outcome := 'stale_taken';
		ELSIF r.state = 'failed_retryable'
			  OR (m = 'review_retry' AND r.state = 'needs_review') THEN
			UPDATE idem_gate.claims c SET state = 'processing', attempt = c.attempt + 1,
				token = nextval('idem_gate.token_seq'), execution_id = p_execution_id,
				last_error = NULL,
				claimed_at = greatest(now(), c.updated_at),
				updated_at = greatest(now(), c.updated_at)
			 WHERE c.workflow = p_workflow AND c.key = p_key
			   AND c.state = r.state AND c.token = r.token
			RETURNING * INTO r;
			IF NOT FOUND THEN CONTINUE; END IF;
			outcome := 'new';
		ELSIF r.state = 'processing' THEN
			outcome := 'in_flight';
		ELSIF r.state = 'completed' THEN
			outcome := 'completed';
		ELSE
			outcome := 'needs_review';
		END IF;
		EXIT;
	END LOOP;
	token := r.token;
	attempt := r.attempt;
	state := r.state;
	result := CASE WHEN r.state = 'completed' THEN r.result END;
	claimed_at := r.claimed_at;
END $$;

CREATE FUNCTION broken.idem_heartbeat(p_key text, p_workflow text, p_token bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	UPDATE idem_gate.claims c SET updated_at = greatest(now(), c.updated_at)
	 WHERE c.workflow = p_workflow AND c.key = p_key AND c.state = 'processing'
	   AND (broken.mode() = 'nofence' OR c.token = p_token);
	RETURN FOUND;
END $$;

CREATE FUNCTION broken.idem_complete(p_key text, p_workflow text,
	p_token bigint DEFAULT NULL, p_result jsonb DEFAULT NULL)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	r idem_gate.claims;
BEGIN
	UPDATE idem_gate.claims c SET state = 'completed', result = p_result,
		completed_at = greatest(now(), c.updated_at),
		updated_at = greatest(now(), c.updated_at)
	 WHERE c.workflow = p_workflow AND c.key = p_key AND c.state = 'processing'
	   AND (broken.mode() = 'nofence' OR p_token IS NULL OR c.token = p_token);
	IF FOUND THEN RETURN true; END IF;
	SELECT * INTO r FROM idem_gate.claims c WHERE c.workflow = p_workflow AND c.key = p_key;
	IF r.state = 'completed' AND (p_token IS NULL OR r.token = p_token) THEN RETURN true; END IF;
	RAISE EXCEPTION 'cannot complete key "%" of workflow "%" with token %', p_key, p_workflow, p_token
		USING ERRCODE = '55000';
END $$;

CREATE FUNCTION broken.idem_fail(p_key text, p_workflow text,
	p_token bigint DEFAULT NULL, p_error text DEFAULT NULL,
	p_retryable boolean DEFAULT false)
RETURNS idem_gate.state LANGUAGE plpgsql AS $$
DECLARE
	s idem_gate.state;
BEGIN
	UPDATE idem_gate.claims c SET state = CASE WHEN p_retryable
			THEN 'failed_retryable'::idem_gate.state ELSE 'needs_review'::idem_gate.state END,
		last_error = p_error, updated_at = greatest(now(), c.updated_at)
	 WHERE c.workflow = p_workflow AND c.key = p_key AND c.state = 'processing'
	   AND (broken.mode() = 'nofence' OR p_token IS NULL OR c.token = p_token)
	RETURNING c.state INTO s;
	IF FOUND THEN RETURN s; END IF;
	RAISE EXCEPTION 'cannot fail key "%" of workflow "%" with token %', p_key, p_workflow, p_token
		USING ERRCODE = '55000';
END $$;
