--
-- The background workers, seen from SQL: the launcher finds
-- idem_gate.database and the janitor's role in the shared catalogs and
-- starts the janitor there.
--
SHOW idem_gate.database;
SHOW idem_gate.worker_role;

-- wait (up to 30 s) for the janitor to have started
DO $$
BEGIN
	FOR i IN 1..300 LOOP
		PERFORM pg_stat_clear_snapshot();
		EXIT WHEN EXISTS (SELECT FROM pg_stat_activity
						   WHERE backend_type = 'idem_gate janitor');
		PERFORM pg_sleep(0.1);
	END LOOP;
END $$;

-- the janitor is connected to idem_gate.database as the bootstrap superuser
-- (worker_role is empty); the launcher to no database
SELECT backend_type, datname, usesysid = 10 AS bootstrap_superuser
  FROM pg_stat_activity
 WHERE backend_type IN ('idem_gate launcher', 'idem_gate janitor')
 ORDER BY backend_type;
