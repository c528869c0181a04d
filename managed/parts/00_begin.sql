/*
 * idem_gate managed edition: before anything is created.
 *
 * The file installs into an empty database, as a role that is not a
 * superuser and may not use C, and refuses, naming what is missing or
 * already there, anything else: a database that holds either edition, or
 * a role that cannot create schemas in it or functions in the schema the
 * API goes to.
 */
SET LOCAL check_function_bodies = off;
SET LOCAL search_path = pg_catalog, pg_temp;
SET LOCAL client_min_messages = warning;

DO $$
BEGIN
	IF EXISTS (SELECT 1 FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'idem_gate') THEN
		RAISE EXCEPTION 'this database already holds idem_gate, the C extension'
			USING ERRCODE = '42710',
				  DETAIL = 'The managed edition and the C extension keep their claims in the same tables; one database holds one of them.',
				  HINT = 'Use the C extension here, or install the managed edition into another database.';
	END IF;
	IF EXISTS (SELECT 1 FROM pg_catalog.pg_namespace n
				WHERE n.nspname OPERATOR(pg_catalog.=) ANY (ARRAY['idem_gate', 'idem_gate_call'])) THEN
		RAISE EXCEPTION 'this database already holds a schema idem_gate'
			USING ERRCODE = '42P06',
				  DETAIL = 'The managed edition of idem_gate is installed here already, or another schema has its name.',
				  HINT = 'To move to a newer managed version, run its update file (docs/managed.md); to start over, DROP SCHEMA idem_gate, idem_gate_call CASCADE first.';
	END IF;
	IF NOT pg_catalog.has_database_privilege(pg_catalog.current_database(), 'CREATE') THEN
		RAISE EXCEPTION 'role "%" may not create schemas in database "%"', CURRENT_USER, pg_catalog.current_database()
			USING ERRCODE = '42501',
				  HINT = 'Install as the database''s owner, or GRANT CREATE ON DATABASE to the installing role.';
	END IF;
	IF NOT pg_catalog.has_schema_privilege('@extschema@', 'CREATE') THEN
		RAISE EXCEPTION 'role "%" may not create functions in schema "%"', CURRENT_USER, '@extschema@'
			USING ERRCODE = '42501',
				  HINT = 'The API functions (idem_claim, ...) go into this schema: GRANT CREATE ON SCHEMA to the installing role.';
	END IF;
END
$$;

CREATE SCHEMA idem_gate_call;
COMMENT ON SCHEMA idem_gate_call IS 'idem_gate managed edition: the bodies of the API functions, which run as the owner';
GRANT USAGE ON SCHEMA idem_gate_call TO PUBLIC;
