-- idem_gate: move a database from the managed edition to the C extension.
--
-- For a database that outgrew its managed service: on a server where the C
-- extension is installed (make install, or the Debian package), run as a
-- superuser, once the managed edition is at 1.3:
--
--   psql -v ON_ERROR_STOP=1 -f managed/to_extension.sql "$DATABASE_URL"
--
-- One transaction: every claim, receipt, payload and audit row moves as it
-- is, the token and audit sequences keep their position (so tokens keep
-- growing), policies, workflow grants and the janitor's watermarks move,
-- and every GRANT a DBA gave on the managed edition's functions, tables,
-- views and schema is given again on the extension's.  The gate's tables
-- are locked for the move: a claim made meanwhile waits for it, then
-- answers from the extension.  A failure changes nothing.  After it, add
-- idem_gate to shared_preload_libraries for the background janitor, and
-- remove the pg_cron job or n8n schedule that called janitor_run().
\set ON_ERROR_STOP on
BEGIN;
SET LOCAL search_path = pg_catalog, pg_temp;

DO $$
BEGIN
	IF EXISTS (SELECT 1 FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'idem_gate') THEN
		RAISE EXCEPTION 'this database holds idem_gate, the C extension, already'
			USING ERRCODE = '55000';
	END IF;
	IF pg_catalog.to_regproc('idem_gate.managed_version') IS NULL THEN
		RAISE EXCEPTION 'this database holds no managed edition of idem_gate'
			USING ERRCODE = '55000',
				  HINT = 'Run this file in the database where managed/idem_gate.sql was installed.';
	END IF;
	IF idem_gate.managed_version() OPERATOR(pg_catalog.<>) '1.3' THEN
		RAISE EXCEPTION 'the managed edition here is version %, not 1.3', idem_gate.managed_version()
			USING ERRCODE = '55000',
				  HINT = 'Update the managed edition to 1.3 first (docs/managed.md).';
	END IF;
	IF NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER) THEN
		RAISE EXCEPTION 'moving to the C extension needs a superuser'
			USING ERRCODE = '42501',
				  DETAIL = 'CREATE EXTENSION idem_gate installs C functions, which only a superuser may create.';
	END IF;
END
$$;

LOCK TABLE idem_gate.claims, idem_gate.audit, idem_gate.policies, idem_gate.workflow_acl,
	idem_gate.janitor_watermarks IN ACCESS EXCLUSIVE MODE;

/* the schema the API functions are in, and every GRANT a DBA gave, as statements */
CREATE TEMPORARY TABLE idem_gate_move (n serial, stmt text) ON COMMIT DROP;
CREATE TEMPORARY TABLE idem_gate_api (nsp name) ON COMMIT DROP;
INSERT INTO idem_gate_api
SELECT n.nspname FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace
 WHERE p.proname OPERATOR(pg_catalog.=) 'idem_claim' AND n.nspname OPERATOR(pg_catalog.<>) 'idem_gate_call' LIMIT 1;
INSERT INTO idem_gate_move (stmt)
SELECT pg_catalog.format('GRANT %s ON FUNCTION %s TO %s%s', a.privilege_type, p.oid::pg_catalog.regprocedure,
		CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(r.rolname) END,
		CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END)
  FROM pg_catalog.pg_proc p
  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace
 CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) a
  LEFT JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) a.grantee
 WHERE (n.nspname OPERATOR(pg_catalog.=) 'idem_gate' AND p.proname !~ '^m_'
		OR n.nspname OPERATOR(pg_catalog.=) (SELECT nsp FROM idem_gate_api) AND p.proname ~ '^idem_')
   AND a.grantee OPERATOR(pg_catalog.<>) p.proowner AND a.grantee OPERATOR(pg_catalog.<>) 0;
INSERT INTO idem_gate_move (stmt)
SELECT pg_catalog.format('GRANT %s ON %s TO %s%s', a.privilege_type, c.oid::pg_catalog.regclass,
		CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(r.rolname) END,
		CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END)
  FROM pg_catalog.pg_class c
 CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) a
  LEFT JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) a.grantee
 WHERE c.relnamespace OPERATOR(pg_catalog.=) 'idem_gate'::pg_catalog.regnamespace
   AND a.grantee OPERATOR(pg_catalog.<>) c.relowner;
INSERT INTO idem_gate_move (stmt)
SELECT pg_catalog.format('GRANT %s (%I) ON %s TO %s%s', a.privilege_type, att.attname, c.oid::pg_catalog.regclass,
		CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(r.rolname) END,
		CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END)
  FROM pg_catalog.pg_class c
  JOIN pg_catalog.pg_attribute att ON att.attrelid OPERATOR(pg_catalog.=) c.oid AND att.attacl IS NOT NULL
 CROSS JOIN LATERAL pg_catalog.aclexplode(att.attacl) a
  LEFT JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) a.grantee
 WHERE c.relnamespace OPERATOR(pg_catalog.=) 'idem_gate'::pg_catalog.regnamespace;
INSERT INTO idem_gate_move (stmt)
SELECT pg_catalog.format('GRANT %s ON SCHEMA idem_gate TO %s%s', a.privilege_type,
		CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(r.rolname) END,
		CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END)
  FROM pg_catalog.pg_namespace n
 CROSS JOIN LATERAL pg_catalog.aclexplode(n.nspacl) a
  LEFT JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) a.grantee
 WHERE n.nspname OPERATOR(pg_catalog.=) 'idem_gate' AND a.grantee OPERATOR(pg_catalog.<>) n.nspowner;

/* the roles restricted with idem_gate.set_workflow_acl(), as the C edition restricts them */
INSERT INTO idem_gate_move (stmt)
SELECT pg_catalog.format('ALTER ROLE %I IN DATABASE %I SET idem_gate.workflow_acl = on',
		g.rolname, pg_catalog.current_database())
  FROM idem_gate_call.workflow_acl_roles w
  JOIN pg_catalog.pg_roles g ON g.oid OPERATOR(pg_catalog.=) w.roleid;

/* the managed edition's functions go, its tables step aside */
DO $$
DECLARE
	f pg_catalog.regprocedure;
BEGIN
	FOR f IN SELECT p.oid FROM pg_catalog.pg_proc p
			  WHERE p.pronamespace OPERATOR(pg_catalog.=) (SELECT nsp FROM idem_gate_api)::pg_catalog.regnamespace
				AND p.proname ~ '^idem_' LOOP
		EXECUTE 'DROP FUNCTION ' OPERATOR(pg_catalog.||) f::pg_catalog.text;
	END LOOP;
END
$$;
DROP SCHEMA idem_gate_call CASCADE;
ALTER SCHEMA idem_gate RENAME TO idem_gate_moving;
DO $$
BEGIN
	EXECUTE pg_catalog.format('CREATE EXTENSION idem_gate VERSION ''1.3'' SCHEMA %I', (SELECT nsp FROM idem_gate_api));
END
$$;

/* the rows, as they are, and the sequences' positions */
DO $$
DECLARE
	t pg_catalog.text;
	cols pg_catalog.text;
	vals pg_catalog.text;
BEGIN
	/* the extension's own enum types are new types: their values go through text */
	FOREACH t IN ARRAY ARRAY['claims', 'policies', 'workflow_acl', 'janitor_watermarks', 'audit'] LOOP
		SELECT pg_catalog.string_agg(pg_catalog.quote_ident(a.attname), ', ' ORDER BY a.attnum),
			   pg_catalog.string_agg(CASE WHEN ty.typnamespace OPERATOR(pg_catalog.=) 'idem_gate'::pg_catalog.regnamespace
									 THEN pg_catalog.format('%I::pg_catalog.text::%s', a.attname, ty.oid::pg_catalog.regtype)
									 ELSE pg_catalog.quote_ident(a.attname) END, ', ' ORDER BY a.attnum)
		  INTO cols, vals
		  FROM pg_catalog.pg_attribute a
		  JOIN pg_catalog.pg_type ty ON ty.oid OPERATOR(pg_catalog.=) a.atttypid
		 WHERE a.attrelid OPERATOR(pg_catalog.=) pg_catalog.format('idem_gate.%I', t)::pg_catalog.regclass
		   AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped;
		EXECUTE pg_catalog.format('INSERT INTO idem_gate.%I (%s) %s SELECT %s FROM idem_gate_moving.%I',
			t, cols, CASE WHEN t OPERATOR(pg_catalog.=) 'audit' THEN 'OVERRIDING SYSTEM VALUE' ELSE '' END, vals, t);
	END LOOP;
END
$$;
SELECT pg_catalog.setval('idem_gate.token_seq', s.last_value, s.is_called) FROM idem_gate_moving.token_seq s;
SELECT pg_catalog.setval('idem_gate.audit_id_seq', s.last_value, s.is_called) FROM idem_gate_moving.audit_id_seq s;
DROP SCHEMA idem_gate_moving CASCADE;

/* the DBA's grants, again */
DO $$
DECLARE
	s pg_catalog.text;
BEGIN
	FOR s IN SELECT m.stmt FROM idem_gate_move m ORDER BY m.n LOOP
		EXECUTE s;
	END LOOP;
END
$$;
COMMIT;
