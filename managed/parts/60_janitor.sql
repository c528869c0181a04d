/*
 * idem_gate managed edition: idem_gate.janitor_run(), the janitor's pass
 * (the C edition's src/janitor.c and src/janitor_sql.c), run by whatever
 * schedules it: a pg_cron job or an n8n Schedule workflow.  There is no
 * background worker: until a pass runs, the gate answers as always, and
 * only retention, receipt clearing and stuck-claim alerts wait.
 *
 * Each step walks one state's rows of one workflow through the index on
 * (state, workflow, updated_at, token), up to that workflow's cutoff, so
 * the cost of a pass follows what expires, not the table.  Rows another
 * transaction holds are skipped (FOR UPDATE SKIP LOCKED, which PostgreSQL
 * offers for exactly this), never waited for: the next pass takes them.
 */

/* The workflows that have rows in state, by a skip scan of the state index. */
CREATE FUNCTION idem_gate.m_workflows(s idem_gate.state)
	RETURNS SETOF pg_catalog.text
	LANGUAGE sql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
WITH RECURSIVE w(workflow) AS (
	(SELECT c.workflow FROM ONLY idem_gate.claims c
	  WHERE c.state OPERATOR(pg_catalog.=) s ORDER BY c.workflow LIMIT 1)
	UNION ALL
	SELECT (SELECT c.workflow FROM ONLY idem_gate.claims c
			 WHERE c.state OPERATOR(pg_catalog.=) s
			   AND c.workflow OPERATOR(pg_catalog.>) w.workflow
			 ORDER BY c.workflow LIMIT 1)
	  FROM w WHERE w.workflow IS NOT NULL)
SELECT w.workflow FROM w WHERE w.workflow IS NOT NULL
$$;
REVOKE ALL ON FUNCTION idem_gate.m_workflows(idem_gate.state) FROM PUBLIC;

/*
 * The cutoff of a workflow for one of the policies' columns: now minus
 * the workflow's policy, or the setting, as a duration of fixed length.
 * NULL when the duration is 0 (keep).
 */
CREATE FUNCTION idem_gate.m_policy_cutoff(workflow pg_catalog.text, policy_column pg_catalog.text,
										  setting pg_catalog.text, dflt pg_catalog.text,
										  now pg_catalog.timestamptz)
	RETURNS pg_catalog.timestamptz
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	secs pg_catalog.float8;
BEGIN
	EXECUTE pg_catalog.format('SELECT pg_catalog.date_part(''epoch'', p.%I) FROM ONLY idem_gate.policies p'
							  ' WHERE p.workflow OPERATOR(pg_catalog.=) $1', policy_column)
	   INTO secs USING workflow;
	IF secs IS NULL THEN
		secs := idem_gate.m_setting_number(setting, dflt, 's',
			CASE setting WHEN 'idem_gate.receipt_retention' THEN 0 ELSE 1 END, 2147483647);
	END IF;
	IF secs OPERATOR(pg_catalog.<=) 0 THEN
		RETURN NULL;
	END IF;
	RETURN now OPERATOR(pg_catalog.-) pg_catalog.make_interval(secs => secs);
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_policy_cutoff(pg_catalog.text, pg_catalog.text,
	pg_catalog.text, pg_catalog.text, pg_catalog.timestamptz) FROM PUBLIC;

/*
 * How far the receipt watermarks may move: before the start of every
 * transaction now open.  A completion's updated_at is the time of its
 * write, after its transaction began; a completing transaction still open,
 * which this pass cannot see, wrote its row after the horizon, and the
 * next pass, starting there, finds it once it commits.  NULL when the
 * horizon cannot be known, so that no watermark moves: a prepared
 * transaction, a backend writing without saying since when
 * (track_activities off), a backend the caller may not see
 * (pg_read_all_stats), or the caller's own snapshot under REPEATABLE READ.
 */
CREATE FUNCTION idem_gate.m_receipts_horizon()
	RETURNS pg_catalog.timestamptz
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	IF pg_catalog.current_setting('transaction_isolation') OPERATOR(pg_catalog.<>) 'read committed'
	   OR pg_catalog.current_setting('track_activities') OPERATOR(pg_catalog.<>) 'on'
	   OR EXISTS (SELECT 1 FROM pg_catalog.pg_prepared_xacts) THEN
		RETURN NULL;
	END IF;
	PERFORM pg_catalog.pg_stat_clear_snapshot();
	IF EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a
				WHERE a.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()
				  AND (a.xact_start IS NULL AND a.backend_xid IS NOT NULL
					   OR a.query OPERATOR(pg_catalog.=) '<insufficient privilege>')) THEN
		RETURN NULL;
	END IF;
	RETURN COALESCE((SELECT pg_catalog.min(a.xact_start) FROM pg_catalog.pg_stat_activity a
					  WHERE a.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()), 'infinity');
END
$$;
REVOKE ALL ON FUNCTION idem_gate.m_receipts_horizon() FROM PUBLIC;

/* idem_gate.janitor_run()'s body: one pass, in the caller's transaction. */
CREATE FUNCTION idem_gate_call.janitor_run(caller pg_catalog.regrole,
	OUT deleted pg_catalog.int8, OUT deleted_completed pg_catalog.int8,
	OUT deleted_failed pg_catalog.int8, OUT alerts pg_catalog.int8,
	OUT escalated pg_catalog.int8)
	RETURNS record
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	now pg_catalog.timestamptz := pg_catalog.clock_timestamp();
	who pg_catalog.oid := idem_gate.m_caller(caller, 'idem_gate.janitor_run()');
	review pg_catalog.bool := idem_gate.m_setting('idem_gate.stuck_action', 'alert') OPERATOR(pg_catalog.=) 'review';
	w pg_catalog.text;
	cutoff pg_catalog.timestamptz;
	mark pg_catalog.timestamptz;
	horizon pg_catalog.timestamptz;
	n pg_catalog.int8;
	s record;
	attached pg_catalog.bool;
BEGIN
	PERFORM idem_gate.m_write_guard('idem_gate.janitor_run()');
	IF idem_gate.m_setting('idem_gate.stuck_action', 'alert') OPERATOR(pg_catalog.<>) ALL (ARRAY['alert', 'review']) THEN
		RAISE EXCEPTION 'invalid value for parameter "idem_gate.stuck_action": "%"',
			idem_gate.m_setting('idem_gate.stuck_action', 'alert')
			USING ERRCODE = '22023', HINT = 'Available values: alert, review. '
				OPERATOR(pg_catalog.||) idem_gate.m_setting_hint('idem_gate.stuck_action');
	END IF;
	deleted_completed := 0;
	deleted_failed := 0;
	alerts := 0;
	escalated := 0;

	/* retention: completed claims, then failed_retryable ones */
	FOR s IN SELECT v.st::idem_gate.state AS st, v.col, v.setting, v.dflt
			   FROM (VALUES ('completed', 'retention', 'idem_gate.retention', '30d'),
							('failed_retryable', 'failed_retention', 'idem_gate.failed_retention', '7d'))
					AS v(st, col, setting, dflt) LOOP
		FOR w IN SELECT * FROM idem_gate.m_workflows(s.st) LOOP
			cutoff := idem_gate.m_policy_cutoff(w, s.col, s.setting, s.dflt, now);
			CONTINUE WHEN cutoff IS NULL;
			DELETE FROM ONLY idem_gate.claims d
			 WHERE d.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(
					SELECT c.ctid FROM ONLY idem_gate.claims c
					 WHERE c.state OPERATOR(pg_catalog.=) s.st
					   AND c.workflow OPERATOR(pg_catalog.=) w
					   AND c.updated_at OPERATOR(pg_catalog.<) cutoff
					   FOR UPDATE OF c SKIP LOCKED))
			   AND d.state OPERATOR(pg_catalog.=) s.st
			   AND d.updated_at OPERATOR(pg_catalog.<) cutoff;
			GET DIAGNOSTICS n = ROW_COUNT;
			IF s.st OPERATOR(pg_catalog.=) 'completed' THEN
				deleted_completed := deleted_completed OPERATOR(pg_catalog.+) n;
			ELSE
				deleted_failed := deleted_failed OPERATOR(pg_catalog.+) n;
			END IF;
		END LOOP;
	END LOOP;

	/*
	 * Receipts of completed claims after the receipt retention, from each
	 * workflow's watermark on, so that a pass reads only what expired
	 * since the last.
	 */
	horizon := idem_gate.m_receipts_horizon();
	FOR w IN SELECT * FROM idem_gate.m_workflows('completed') LOOP
		cutoff := idem_gate.m_policy_cutoff(w, 'receipt_retention', 'idem_gate.receipt_retention', '0', now);
		CONTINUE WHEN cutoff IS NULL;
		-- a receipt retention as long as the retention keeps receipts as
		-- long as their rows: no step, and no watermark, as in C
		CONTINUE WHEN cutoff OPERATOR(pg_catalog.<=)
			idem_gate.m_policy_cutoff(w, 'retention', 'idem_gate.retention', '30d', now);
		SELECT m.receipts_cleared_until INTO mark FROM ONLY idem_gate.janitor_watermarks m
		 WHERE m.workflow OPERATOR(pg_catalog.=) w;
		WITH cand AS (
			SELECT c.ctid AS tid, c.updated_at AS upd FROM ONLY idem_gate.claims c
			 WHERE c.state OPERATOR(pg_catalog.=) 'completed'
			   AND c.workflow OPERATOR(pg_catalog.=) w
			   AND c.updated_at OPERATOR(pg_catalog.>=) COALESCE(mark, '-infinity')
			   AND c.updated_at OPERATOR(pg_catalog.<) cutoff
			   AND c.result IS NOT NULL),
		lck AS (
			SELECT c.ctid AS tid FROM ONLY idem_gate.claims c
			 WHERE c.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT x.tid FROM cand x))
			   FOR NO KEY UPDATE OF c SKIP LOCKED),
		upd AS (
			UPDATE ONLY idem_gate.claims d SET result = NULL
			 WHERE d.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT l.tid FROM lck l))
			   AND d.state OPERATOR(pg_catalog.=) 'completed'
			   AND d.updated_at OPERATOR(pg_catalog.<) cutoff
			RETURNING 1)
		SELECT LEAST(cutoff, (SELECT pg_catalog.min(x.upd) FROM cand x
							   WHERE x.tid OPERATOR(pg_catalog.<>) ALL (ARRAY(SELECT k.tid FROM lck k))))
		  INTO mark
		  FROM (SELECT pg_catalog.count(*) FROM upd) done;
		CONTINUE WHEN horizon IS NULL;
		INSERT INTO idem_gate.janitor_watermarks AS m (workflow, receipts_cleared_until)
		VALUES (w, LEAST(mark, horizon))
		ON CONFLICT (workflow) DO UPDATE SET receipts_cleared_until = GREATEST(m.receipts_cleared_until, EXCLUDED.receipts_cleared_until);
	END LOOP;
	/*
	 * Stuck claims: processing for longer than stuck_after, announced once
	 * per grant (alerted_token), and with stuck_action = review moved to
	 * needs_review, each move in the audit trail.
	 */
	FOR w IN SELECT * FROM idem_gate.m_workflows('processing') LOOP
		cutoff := idem_gate.m_policy_cutoff(w, 'stuck_after', 'idem_gate.stuck_after', '15min', now);
		CONTINUE WHEN cutoff IS NULL;
		FOR s IN
			WITH stuck AS (
				SELECT c.ctid AS tid, c.token AS tok, c.updated_at AS upd,
					   now OPERATOR(pg_catalog.-) c.updated_at AS age
				  FROM ONLY idem_gate.claims c
				 WHERE c.state OPERATOR(pg_catalog.=) 'processing'
				   AND c.workflow OPERATOR(pg_catalog.=) w
				   AND c.updated_at OPERATOR(pg_catalog.<) cutoff
				   AND (c.alerted_token IS NULL OR c.alerted_token OPERATOR(pg_catalog.<>) c.token)
				 ORDER BY c.updated_at, c.token
				   FOR UPDATE OF c SKIP LOCKED)
			UPDATE ONLY idem_gate.claims c SET alerted_token = c.token,
				   state = CASE WHEN review THEN 'needs_review'::idem_gate.state ELSE c.state END,
				   last_error = CASE WHEN review
						THEN 'stuck in processing for ' OPERATOR(pg_catalog.||) st.age::pg_catalog.text
						ELSE c.last_error END,
				   updated_at = CASE WHEN review THEN GREATEST(now, c.updated_at) ELSE c.updated_at END
			  FROM stuck st
			 WHERE c.ctid OPERATOR(pg_catalog.=) st.tid
			   AND c.state OPERATOR(pg_catalog.=) 'processing'
			   AND c.token OPERATOR(pg_catalog.=) st.tok
			RETURNING c.workflow, c.key, c.token, c.last_error
		LOOP
			IF review THEN
				INSERT INTO idem_gate.audit (at, session_role, acting_role, action, workflow,
											 key, state_before, state_after, token, reason)
				VALUES (now, SESSION_USER, (SELECT u.rolname FROM pg_catalog.pg_roles u WHERE u.oid OPERATOR(pg_catalog.=) who),
						'escalate', s.workflow, s.key, 'processing', 'needs_review', s.token, s.last_error);
				escalated := escalated OPERATOR(pg_catalog.+) 1;
			END IF;
			alerts := alerts OPERATOR(pg_catalog.+) 1;
			PERFORM idem_gate.m_announce(s.workflow, CASE WHEN review THEN 'needs_review' ELSE 'stuck' END);
		END LOOP;
	END LOOP;

	/*
	 * The payloads of open claims after the receipt retention: after the
	 * stuck step, as in the C edition, so that a claim it just moved to
	 * needs_review keeps its evidence.
	 */
	FOR s IN SELECT st::idem_gate.state AS st FROM pg_catalog.unnest(ARRAY['processing', 'failed_retryable', 'needs_review']) st LOOP
		FOR w IN SELECT * FROM idem_gate.m_workflows(s.st) LOOP
			cutoff := idem_gate.m_policy_cutoff(w, 'receipt_retention', 'idem_gate.receipt_retention', '0', now);
			CONTINUE WHEN cutoff IS NULL;
			UPDATE ONLY idem_gate.claims d SET payload = NULL
			 WHERE d.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(
					SELECT c.ctid FROM ONLY idem_gate.claims c
					 WHERE c.state OPERATOR(pg_catalog.=) s.st
					   AND c.workflow OPERATOR(pg_catalog.=) w
					   AND c.updated_at OPERATOR(pg_catalog.<) cutoff
					   AND c.payload IS NOT NULL
					   FOR NO KEY UPDATE OF c SKIP LOCKED))
			   AND d.state OPERATOR(pg_catalog.=) s.st
			   AND d.updated_at OPERATOR(pg_catalog.<) cutoff;
		END LOOP;
	END LOOP;

	/* the audit trail's own retention: only this pass may delete from it */
	cutoff := now OPERATOR(pg_catalog.-) pg_catalog.make_interval(
		secs => idem_gate.m_setting_number('idem_gate.audit_retention', '400d', 's', 1, 2147483647));
	PERFORM pg_catalog.set_config('idem_gate.m_pruning', pg_catalog.txid_current()::pg_catalog.text, true);
	DELETE FROM ONLY idem_gate.audit a WHERE a.id OPERATOR(pg_catalog.=) ANY (ARRAY(
		SELECT x.id FROM ONLY idem_gate.audit x WHERE x.at OPERATOR(pg_catalog.<) cutoff
		   FOR UPDATE OF x SKIP LOCKED));
	PERFORM pg_catalog.set_config('idem_gate.m_pruning', '', true);

	/*
	 * The grants of roles that no longer exist: DROP ROLE does not see
	 * them, and the oid they name would go to a role created once the oid
	 * counter has gone round.  Left alone, as in C, while anything the
	 * DELETE would run is attached to the grants table: a rule, a trigger
	 * of the DBA's, code a backend may hold parsed.
	 */
	IF EXISTS (SELECT 1 FROM ONLY idem_gate.workflow_acl a
				WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
								   WHERE r.oid OPERATOR(pg_catalog.=) a.role::pg_catalog.oid))
	   AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_rewrite r
						WHERE r.ev_class OPERATOR(pg_catalog.=) 'idem_gate.workflow_acl'::pg_catalog.regclass)
	   AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger t
						WHERE t.tgrelid OPERATOR(pg_catalog.=) 'idem_gate.workflow_acl'::pg_catalog.regclass
						  AND NOT t.tgisinternal
						  AND t.tgname OPERATOR(pg_catalog.<>) 'workflow_acl_changed') THEN
		attached := false;
		BEGIN
			PERFORM idem_gate.m_refuse_cached_code(ARRAY['idem_gate.workflow_acl'::pg_catalog.regclass]);
		EXCEPTION WHEN object_not_in_prerequisite_state THEN
			attached := true;
		END;
		IF NOT attached THEN
			DELETE FROM ONLY idem_gate.workflow_acl a WHERE a.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(
				SELECT g.ctid FROM ONLY idem_gate.workflow_acl g
				 WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
									WHERE r.oid OPERATOR(pg_catalog.=) g.role::pg_catalog.oid)
				   FOR UPDATE OF g SKIP LOCKED))
			   AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
								WHERE r.oid OPERATOR(pg_catalog.=) a.role::pg_catalog.oid);
		END IF;
	END IF;

	deleted := deleted_completed OPERATOR(pg_catalog.+) deleted_failed;
END
$$;
GRANT EXECUTE ON FUNCTION idem_gate_call.janitor_run(pg_catalog.regrole) TO PUBLIC;

CREATE FUNCTION idem_gate.janitor_run(
	OUT deleted bigint, OUT deleted_completed bigint, OUT deleted_failed bigint,
	OUT alerts bigint, OUT escalated bigint)
RETURNS record
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT * FROM idem_gate_call.janitor_run(CURRENT_USER::pg_catalog.regrole)
$$;

/*
 * Schedule the janitor with pg_cron, where the service has it in this
 * database (Supabase, Neon, Cloud SQL and Azure with cron.database_name
 * set to it; on RDS, pg_cron's own database): one job, named after the
 * database, that runs idem_gate.janitor_run() as the role that calls
 * this, by default every minute.  Scheduling again replaces the job.
 * Without pg_cron, an n8n Schedule workflow calls janitor_run() instead
 * (examples/n8n/janitor-schedule.json).
 */
CREATE FUNCTION idem_gate.schedule_janitor(schedule pg_catalog.text DEFAULT '* * * * *')
	RETURNS pg_catalog.int8
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	job pg_catalog.int8;
BEGIN
	IF schedule IS NULL THEN
		RAISE EXCEPTION 'schedule must not be null'
			USING ERRCODE = '22004', HINT = 'Pass a cron schedule such as ''* * * * *'', or ''10 seconds'' with pg_cron 1.5 or later.';
	END IF;
	IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_proc p
					WHERE p.pronamespace OPERATOR(pg_catalog.=) pg_catalog.to_regnamespace('cron')
					  AND p.proname OPERATOR(pg_catalog.=) 'schedule') THEN
		RAISE EXCEPTION 'pg_cron is not installed in database "%"', pg_catalog.current_database()
			USING ERRCODE = '55000',
				  DETAIL = 'Without a schedule, the gate answers as always; only retention, receipt clearing and stuck-claim alerts wait.',
				  HINT = 'CREATE EXTENSION pg_cron where the service offers it, or run SELECT idem_gate.janitor_run() from an n8n Schedule workflow (examples/n8n/janitor-schedule.json).';
	END IF;
	EXECUTE 'SELECT cron.schedule($1, $2, $3)'
	   INTO job
	  USING 'idem_gate_janitor_' OPERATOR(pg_catalog.||) pg_catalog.current_database(),
			schedule, 'SELECT idem_gate.janitor_run()';
	RETURN job;
END
$$;
COMMENT ON FUNCTION idem_gate.schedule_janitor(pg_catalog.text) IS 'managed edition: schedule idem_gate.janitor_run() with pg_cron in this database, as the calling role';
REVOKE ALL ON FUNCTION idem_gate.schedule_janitor(pg_catalog.text) FROM PUBLIC;
