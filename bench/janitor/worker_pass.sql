-- One worker pass on demand, started and watched from this one session,
-- which sleeps between looks.  A janitor connects only for the length of a
-- pass and is forked with the postmaster's settings, so the pass is asked
-- of the launcher, and what it deletes is set where a janitor reads it at
-- the start of each pass, not in a setting:
--   * a policy row gives workflow 'wf' a retention of 1 day;
--   * ALTER SYSTEM sets idem_gate.naptime = 1s and only the launcher is
--     told to reload (SIGHUP to its pid), so it starts a pass at once;
--   * as soon as the janitor shows active, naptime goes back to 1h and the
--     launcher is told again, so exactly one pass runs;
--   * once the pass is counted, the policy row goes.
-- pg_reload_conf() would make every backend reload, and a new connection
-- for every look (as this benchmark first did) raises the concurrent
-- claims' p99 by itself, with no pass running (measured 2.4x for the
-- looks, 1.8x for three reloads).
-- Prints "passes deleted ms start_epoch end_epoch".
\set ON_ERROR_STOP on
\o /dev/null
SELECT janitor_passes AS p0, deleted_completed AS d0 FROM idem_gate.stats_counters() \gset
SELECT pid AS launcher FROM pg_catalog.pg_stat_activity
 WHERE backend_type = 'idem_gate launcher' \gset
-- \! does not expand psql variables; the environment reaches it
\setenv IDEM_LAUNCHER_PID :launcher
SELECT pg_catalog.set_config('bench.p0', :'p0', false);
INSERT INTO idem_gate.policies (workflow, retention) VALUES ('wf', '1 day');
ALTER SYSTEM SET idem_gate.naptime = '1s';
\! kill -HUP $IDEM_LAUNCHER_PID
-- the counters move at the end of a pass: its start shows in pg_stat_activity,
-- which a transaction sees as of its first look, hence a COMMIT per look
DO $$
DECLARE
	deadline timestamptz := pg_catalog.clock_timestamp() + interval '2 minutes';
BEGIN
	LOOP
		IF pg_catalog.clock_timestamp() > deadline THEN
			RAISE EXCEPTION 'the janitor did not start a pass within 2 minutes';
		END IF;
		EXIT WHEN EXISTS (SELECT FROM pg_catalog.pg_stat_activity
						   WHERE backend_type = 'idem_gate janitor' AND state = 'active')
			OR (SELECT janitor_passes FROM idem_gate.stats_counters())
				> pg_catalog.current_setting('bench.p0')::bigint;
		COMMIT;
		PERFORM pg_catalog.pg_sleep(0.01);
	END LOOP;
END $$;
ALTER SYSTEM SET idem_gate.naptime = '1h';
\! kill -HUP $IDEM_LAUNCHER_PID
DO $$
BEGIN
	WHILE (SELECT janitor_passes FROM idem_gate.stats_counters())
			= pg_catalog.current_setting('bench.p0')::bigint LOOP
		PERFORM pg_catalog.pg_sleep(0.05);
	END LOOP;
END $$;
DELETE FROM idem_gate.policies WHERE workflow = 'wf';
\o
SELECT janitor_passes - :p0, deleted_completed - :d0, last_pass_ms,
	   extract(epoch FROM last_pass_at) - last_pass_ms / 1000,
	   extract(epoch FROM last_pass_at)
  FROM idem_gate.stats_counters();
