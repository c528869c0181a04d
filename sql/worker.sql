--
-- The background janitor of this server (idem_gate is preloaded): the
-- launcher starts passes, counted in idem_gate.stats, and visits the
-- databases without the extension quietly.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idem_gate;
RESET client_min_messages;

-- wk_passed(before): true once the stats count more passes than before
-- (waits up to a minute)
CREATE FUNCTION wk_passed(before bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1..1200 LOOP
		IF (SELECT janitor_passes FROM idem_gate.stats) > before THEN
			RETURN true;
		END IF;
		PERFORM pg_sleep(0.05);
	END LOOP;
	RETURN false;
END $$;

-- wk_passes_after_reload(seconds): reload the configuration, give the
-- launcher a second to read it, then count the passes of the next seconds
CREATE FUNCTION wk_passes_after_reload(seconds float8) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	before bigint;
BEGIN
	PERFORM pg_reload_conf();
	PERFORM pg_sleep(1);
	SELECT janitor_passes INTO before FROM idem_gate.stats;
	PERFORM pg_sleep(seconds);
	RETURN (SELECT janitor_passes FROM idem_gate.stats) - before;
END $$;

-- wk_log(): the server log, next to the data directory
CREATE FUNCTION wk_log() RETURNS text
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

-- the settings: defaults, bounds, units, who may change them
SELECT name, boot_val, min_val, max_val, unit, context
  FROM pg_settings WHERE name LIKE 'idem_gate.%' ORDER BY name;
-- every setting but idem_gate.database (a list) takes one value: SET with
-- two is refused by name, before any check of who may set it
DO $$
DECLARE
	s record;
BEGIN
	FOR s IN SELECT name, setting FROM pg_settings
			  WHERE name LIKE 'idem_gate.%' ORDER BY name LOOP
		BEGIN
			EXECUTE format('SET %s = %L, %L', s.name, s.setting, s.setting);
			RAISE NOTICE '%: a list was accepted', s.name;
		EXCEPTION WHEN OTHERS THEN
			RAISE NOTICE '%: %', SQLSTATE, SQLERRM;
		END;
	END LOOP;
END $$;

-- with a naptime of 1 s, the next background pass comes at once; it
-- removes the grants a dropped role left, and says so in the log
CREATE ROLE regress_wk_gone;
SELECT idem_gate.grant_workflow('regress_wk_gone', 'wk_%') AS granted;
DROP ROLE regress_wk_gone;
SELECT janitor_passes AS passes FROM idem_gate.stats \gset
ALTER SYSTEM SET idem_gate.naptime = 1;
SELECT pg_reload_conf();
SELECT wk_passed(:passes) AS background_pass;
SELECT count(*) AS grants_left FROM idem_gate.workflow_acl WHERE pattern = 'wk_%';
SELECT wk_log() ~ 'removed [0-9]+ workflow grants? of (a role|roles) that no longer exists?' AS logged;
SELECT last_pass_at BETWEEN now() - interval '1 minute' AND clock_timestamp() AS last_pass_at,
	last_pass_ms >= 0 AS last_pass_ms
  FROM idem_gate.stats;
-- a pass that fails (here a DBA's trigger refuses the janitor's delete)
-- is an ERROR in the log with the trigger's words, never taken for a
-- read-only server
CREATE TABLE wk_log_start AS SELECT length(wk_log()) AS at;
INSERT INTO idem_gate.claims (workflow, key, state, attempt, token, created_at, claimed_at,
	updated_at, completed_at)
SELECT 'wk_err', 'old', 'completed', 1, nextval('idem_gate.token_seq'), t, t, t, t
  FROM (SELECT now() - interval '400 days' AS t) a;
CREATE FUNCTION wk_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'wk_refuse: no deletes of workflow %', OLD.workflow;
END $$;
CREATE TRIGGER wk_refuse BEFORE DELETE ON idem_gate.claims
	FOR EACH ROW WHEN (OLD.workflow = 'wk_err') EXECUTE FUNCTION wk_refuse();
DO $$
BEGIN
	FOR i IN 1..1200 LOOP
		EXIT WHEN substr(wk_log(), (SELECT at FROM wk_log_start) + 1) LIKE '%wk_refuse: no deletes of workflow wk_err%';
		PERFORM pg_sleep(0.05);
	END LOOP;
END $$;
SELECT substr(wk_log(), (SELECT at FROM wk_log_start) + 1) ~ 'ERROR:  wk_refuse: no deletes of workflow wk_err' AS failed_pass_logged,
	substr(wk_log(), (SELECT at FROM wk_log_start) + 1) ~ 'is read-only' AS taken_for_read_only;
DROP TRIGGER wk_refuse ON idem_gate.claims;
DROP FUNCTION wk_refuse();
DELETE FROM idem_gate.claims WHERE workflow = 'wk_err';
DROP TABLE wk_log_start;
-- a list in idem_gate.database limits the janitor to those databases:
-- with only postgres listed (which has no idem_gate), this one gets no pass
-- even with a naptime of 1 s
ALTER SYSTEM SET idem_gate.database = 'postgres';
SELECT wk_passes_after_reload(2.5) AS passes_here_while_unlisted;
ALTER SYSTEM RESET idem_gate.database;
-- and with a naptime of an hour, a database just served is not served
-- again: at most the pass under way when the setting arrived ends
ALTER SYSTEM SET idem_gate.naptime = '1h';
SELECT wk_passes_after_reload(2) <= 1 AS no_pass_before_the_naptime;
ALTER SYSTEM RESET idem_gate.naptime;
SELECT pg_reload_conf();

-- the database postgres, which never had idem_gate, was visited at the
-- server's start and is named in no log line
SELECT count(*) AS lines_about_postgres
  FROM regexp_matches(wk_log(), 'database "postgres"', 'g');

DROP FUNCTION wk_passed(bigint);
DROP FUNCTION wk_passes_after_reload(float8);
DROP FUNCTION wk_log();
