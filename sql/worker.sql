--
-- The background workers, seen from SQL: the launcher finds
-- idem_gate.database and the janitor's role in the shared catalogs and
-- starts the janitor there.
--
SHOW idem_gate.database;
SHOW idem_gate.worker_role;

-- the server log of pg_regress's temporary instance (data/ sits next to
-- log/, or one level below the output directory that holds log/)
CREATE FUNCTION pg_temp.worker_log() RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	f text;
BEGIN
	FOREACH f IN ARRAY ARRAY['../log/postmaster.log', '../../log/postmaster.log'] LOOP
		IF (pg_stat_file(f, true)).size IS NOT NULL THEN
			RETURN pg_read_file(f);
		END IF;
	END LOOP;
	RAISE EXCEPTION 'no server log found next to the data directory';
END $$;

-- wait (up to 30 s) for the janitor to have started and looked for the
-- extension in its database
DO $$
BEGIN
	FOR i IN 1..300 LOOP
		PERFORM pg_stat_clear_snapshot();
		EXIT WHEN EXISTS (SELECT FROM pg_stat_activity
						   WHERE backend_type = 'idem_gate janitor')
			  AND pg_temp.worker_log() LIKE '%idem_gate janitor: extension idem_gate is not installed%';
		PERFORM pg_sleep(0.1);
	END LOOP;
END $$;

-- the janitor is connected to idem_gate.database as the bootstrap superuser
-- (worker_role is empty); the launcher to no database
SELECT backend_type, datname, usesysid = 10 AS bootstrap_superuser
  FROM pg_stat_activity
 WHERE backend_type IN ('idem_gate launcher', 'idem_gate janitor')
 ORDER BY backend_type;

-- idem_gate is not installed in the janitor's database here: the janitor
-- says so in the log (once per janitor process) and idles; the launcher
-- found the database and the role, so it reported neither missing
SELECT count(*) > 0 AS idling_reported
  FROM regexp_matches(pg_temp.worker_log(),
	'LOG:  idem_gate janitor: extension idem_gate is not installed in database "postgres"; idling', 'g');
SELECT count(*) AS missing_reported
  FROM regexp_matches(pg_temp.worker_log(), 'idem_gate: (database|role) "[^"]*" does not exist', 'g');
