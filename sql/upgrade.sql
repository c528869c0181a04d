--
-- Releases are frozen and upgradable: CREATE EXTENSION ... VERSION '1.0'
-- still installs 1.0, a 1.0 catalog keeps working on the 1.1 library, and
-- ALTER EXTENSION UPDATE keeps every row, every GRANT and every 1.0-style
-- call, and gives the same catalog as a fresh 1.1 install.
--
SELECT current_database() AS regress_db \gset
CREATE ROLE regress_up_n8n;
CREATE ROLE regress_up_ops;

-- the catalog of the extension as text: every member object with what
-- defines it (signatures, code, volatility, privileges, columns, defaults,
-- constraints, indexes, triggers, views, enum labels, what pg_dump keeps of
-- a table)
\set catalog_query 'SELECT string_agg(d, E''\n'' ORDER BY d) FROM (SELECT pg_describe_object(dep.classid, dep.objid, 0) || coalesce('' | '' || (SELECT pg_get_function_arguments(p.oid) || '' -> '' || pg_get_function_result(p.oid) || '' '' || p.prosrc || '' '' || coalesce(p.probin, '''') || '' strict='' || p.proisstrict || '' volatile='' || p.provolatile::text || '' secdef='' || p.prosecdef || '' acl='' || coalesce(p.proacl, acldefault(''f'', p.proowner))::text || '' config='' || coalesce(p.proconfig::text, '''') FROM pg_proc p WHERE dep.classid = ''pg_proc''::regclass AND p.oid = dep.objid), '''') || coalesce('' | '' || (SELECT c.relkind::text || '' acl='' || coalesce(c.relacl, acldefault(''r'', c.relowner))::text || '' cols='' || coalesce((SELECT string_agg(a.attname || '' '' || format_type(a.atttypid, a.atttypmod) || coalesce('' collate '' || nullif(a.attcollation, 0)::regcollation::text, '''') || '' '' || a.attnotnull || '' '' || coalesce(pg_get_expr(ad.adbin, ad.adrelid), ''''), '', '' ORDER BY a.attnum) FROM pg_attribute a LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped), '''') || '' cons='' || coalesce((SELECT string_agg(k.conname || '' '' || pg_get_constraintdef(k.oid), '', '' ORDER BY k.conname) FROM pg_constraint k WHERE k.conrelid = c.oid), '''') || '' idx='' || coalesce((SELECT string_agg(pg_get_indexdef(i.indexrelid), '', '' ORDER BY 1) FROM pg_index i WHERE i.indrelid = c.oid), '''') || '' trg='' || coalesce((SELECT string_agg(pg_get_triggerdef(t.oid), '', '' ORDER BY 1) FROM pg_trigger t WHERE t.tgrelid = c.oid AND NOT t.tgisinternal), '''') || '' view='' || coalesce(pg_get_viewdef(c.oid), '''') || '' opts='' || coalesce(c.reloptions::text, '''') || '' dump='' || coalesce((SELECT x2.extcondition[array_position(x2.extconfig, c.oid)] FROM pg_extension x2 WHERE x2.extname = ''idem_gate''), ''-'') FROM pg_class c WHERE dep.classid = ''pg_class''::regclass AND c.oid = dep.objid), '''') || coalesce('' | '' || (SELECT string_agg(e.enumlabel, '','' ORDER BY e.enumsortorder) FROM pg_enum e WHERE dep.classid = ''pg_type''::regclass AND e.enumtypid = dep.objid), '''') AS d FROM pg_depend dep JOIN pg_extension x ON x.oid = dep.refobjid WHERE x.extname = ''idem_gate'' AND dep.deptype = ''e'') s'

------------------------------------------------------------------------
-- a 1.0 database, filled
------------------------------------------------------------------------
CREATE DATABASE regress_up_10;
\c regress_up_10
SET client_min_messages = warning;
CREATE EXTENSION idem_gate VERSION '1.0';
RESET client_min_messages;
SELECT extversion FROM pg_extension WHERE extname = 'idem_gate';
GRANT USAGE ON SCHEMA idem_gate TO regress_up_n8n, regress_up_ops;
GRANT EXECUTE ON FUNCTION idem_claim_ex(text, text, interval, text, text),
	idem_complete(text, text, bigint, jsonb) TO regress_up_n8n;
GRANT EXECUTE ON FUNCTION idem_resolve(text, text, text, jsonb) TO regress_up_ops;
GRANT SELECT ON idem_gate.stats TO regress_up_ops;
GRANT EXECUTE ON FUNCTION idem_gate.stats_counters() TO regress_up_ops;

-- claims in every state, made on the 1.1 library: a 1.0 catalog keeps
-- 1.0's rules (no token is required where none is recorded)
SELECT outcome FROM idem_claim_ex('up_processing', 'wf', NULL, 'fp-1', 'run-1');
SELECT outcome FROM idem_claim_ex('up_completed', 'wf');
SELECT idem_complete('up_completed', 'wf', NULL, '{"receipt": 1}');
SELECT idem_claim('up_failed', 'wf');
SELECT idem_fail('up_failed', 'wf', NULL, 'before', true);
SELECT idem_claim('up_review', 'wf');
SELECT idem_fail('up_review', 'wf', NULL, 'after', false);
SELECT idem_claim('up_resolved', 'wf');
SELECT idem_resolve('up_resolved', 'wf', 'completed', '{"by": "operator"}');
INSERT INTO idem_gate.policies (workflow, retention, stuck_after) VALUES ('wf', '40 days', '1 hour');
SELECT available IS NOT NULL AS stats_view_works FROM idem_gate.stats;
SELECT deleted, alerts FROM idem_gate.janitor_run();
SELECT idem_hash('{"b": 1, "a": 2}'::jsonb) = idem_hash('{"a":2,"b":1}'::json) AS hash_works;
SELECT key, state, attempt, result FROM idem_gate.claims ORDER BY key;
SELECT max(token) AS max_token_10 FROM idem_gate.claims \gset

------------------------------------------------------------------------
-- ALTER EXTENSION UPDATE
------------------------------------------------------------------------
ALTER EXTENSION idem_gate UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'idem_gate';
-- every row kept, rows claimed under 1.0 keep 1.0's token rule
SELECT key, state, attempt, result, token_issued FROM idem_gate.claims ORDER BY key;
SELECT idem_complete('up_processing', 'wf', NULL, '{"receipt": 2}');
SELECT * FROM idem_gate.policies;
-- every GRANT kept, the 1.0 signature's included
SELECT r.rolname, p.oid::regprocedure AS function
  FROM pg_proc p, aclexplode(p.proacl) a, pg_roles r
 WHERE r.oid = a.grantee AND r.rolname LIKE 'regress_up_%' ORDER BY 1, p.oid::regprocedure::text;
SELECT has_table_privilege('regress_up_ops', 'idem_gate.stats', 'SELECT') AS ops_reads_stats;
SET ROLE regress_up_ops;
SELECT available IS NOT NULL AS ops_stats_works FROM idem_gate.stats;
SELECT idem_resolve('up_review', 'wf', 'retry');
RESET ROLE;
SET ROLE regress_up_n8n;
SELECT outcome, token > :max_token_10 AS token_grew FROM idem_claim_ex('up_new', 'wf');
RESET ROLE;
-- 1.0-style calls
SELECT idem_claim('up_failed', 'wf');
SELECT outcome FROM idem_claim_ex('up_completed', 'wf');
SELECT * FROM idem_gate.janitor_run();
SELECT action, key, state_before, state_after, acting_role FROM idem_gate.audit ORDER BY id;
-- the catalog, without the GRANTs this test gave
REVOKE ALL ON FUNCTION idem_claim_ex(text, text, interval, text, text),
	idem_complete(text, text, bigint, jsonb), idem_resolve(text, text, text, jsonb, text),
	idem_gate.stats_counters() FROM regress_up_n8n, regress_up_ops;
REVOKE ALL ON idem_gate.stats FROM regress_up_ops;
-- keys and workflow names now compare byte for byte, whatever the
-- database's locale
SELECT attrelid::regclass AS "table", attname, attcollation::regcollation
  FROM pg_attribute
 WHERE attrelid IN ('idem_gate.claims'::regclass, 'idem_gate.audit'::regclass)
   AND attname IN ('key', 'workflow') ORDER BY 1, 2;
:catalog_query \gset updated_
\c :regress_db

------------------------------------------------------------------------
-- a filled 1.1 database, updated to 1.2
------------------------------------------------------------------------
CREATE DATABASE regress_up_11f;
\c regress_up_11f
CREATE ROLE regress_up2_mon;
CREATE ROLE regress_up2_admin;
CREATE ROLE regress_up2_move;
SET client_min_messages = warning;
CREATE EXTENSION idem_gate VERSION '1.1';
RESET client_min_messages;
SELECT extversion FROM pg_extension WHERE extname = 'idem_gate';
GRANT USAGE ON SCHEMA idem_gate TO regress_up_n8n, regress_up_ops, regress_up2_mon, regress_up2_admin, regress_up2_move;
GRANT EXECUTE ON FUNCTION idem_claim_ex(text, text, interval, text, text),
	idem_claim_many(text[], text, interval, text[], text),
	idem_complete(text, text, bigint, jsonb), idem_status(text, text) TO regress_up_n8n;
GRANT SELECT (workflow, key, token, state, execution_id) ON idem_gate.claims TO regress_up_n8n;
GRANT EXECUTE ON FUNCTION idem_resolve(text, text, text, jsonb, text),
	idem_release(text, text, text), idem_gate.janitor_run() TO regress_up_ops;
GRANT SELECT ON idem_gate.audit TO regress_up_ops;
GRANT SELECT ON idem_gate.stats, idem_gate.workflow_stats TO regress_up2_mon;
GRANT EXECUTE ON FUNCTION idem_gate.stats_counters() TO regress_up2_mon;
GRANT EXECUTE ON FUNCTION idem_gate.grant_workflow(name, text),
	idem_gate.revoke_workflow(name, text) TO regress_up2_admin;
GRANT EXECUTE ON FUNCTION idem_gate.sync_token_seq() TO regress_up2_move;
SELECT idem_gate.grant_workflow('regress_up_n8n', 'orders_%');
SELECT idem_gate.grant_workflow('regress_up2_admin', 'orders%');
SELECT idem_gate.grant_workflow('regress_up_ops', '%');
SELECT outcome FROM idem_claim_ex('u2_processing', 'orders_eu', NULL, 'fp-1', 'run-1');
SELECT outcome FROM idem_claim_ex('u2_completed', 'orders_eu');
SELECT idem_complete('u2_completed', 'orders_eu', (SELECT token FROM idem_gate.claims WHERE key = 'u2_completed'), '{"receipt": 1}');
SELECT idem_claim('u2_review', 'payroll');
SELECT idem_fail('u2_review', 'payroll', NULL, 'after', false);
SELECT idem_claim('u2_released', 'ordersXeu');
SELECT idem_release('u2_released', 'ordersXeu', 'before the update');
SELECT key, state FROM idem_gate.claims ORDER BY key;
SELECT max(token) AS max_token_11 FROM idem_gate.claims \gset
-- until the update, the 1.2 library reads 1.1's grants by 1.1's rule:
-- LIKE, where _ is any one character, so 'orders_%' covers ordersXeu
SET idem_gate.workflow_acl = on;
SET ROLE regress_up_n8n;
SELECT ord, outcome FROM idem_claim_many(ARRAY['u2_like'], 'ordersXeu');
RESET ROLE;
RESET idem_gate.workflow_acl;
ALTER EXTENSION idem_gate UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'idem_gate';
-- every row kept
SELECT key, workflow, state, attempt, result FROM idem_gate.claims ORDER BY key;
SELECT action, key, state_before, state_after, reason FROM idem_gate.audit ORDER BY id;
-- every GRANT kept, on the objects the update replaced too, and as the
-- DBA's own (not the extension's initial privileges), so pg_dump keeps them
SELECT r.rolname, coalesce(p.oid::regprocedure::text, c.oid::regclass::text) AS object, a.privilege_type
  FROM pg_roles r
  JOIN LATERAL (SELECT p.oid, a FROM pg_proc p, aclexplode(p.proacl) a WHERE a.grantee = r.oid
				UNION ALL SELECT c.oid, a FROM pg_class c, aclexplode(c.relacl) a WHERE a.grantee = r.oid) x(oid, a) ON true
  LEFT JOIN pg_proc p ON p.oid = x.oid
  LEFT JOIN pg_class c ON c.oid = x.oid
  CROSS JOIN LATERAL (SELECT (x.a).privilege_type) a
 WHERE r.rolname LIKE 'regress_up%' ORDER BY 1, 2, 3;
SELECT count(*) AS dba_grants_taken_for_the_extensions
  FROM pg_init_privs i, aclexplode(i.initprivs) a, pg_roles r
 WHERE r.oid = a.grantee AND r.rolname LIKE 'regress_up%';
-- calls written for 1.1 keep working, as the roles that had them
SET ROLE regress_up_n8n;
SELECT outcome, token > :max_token_11 AS token_grew FROM idem_claim_ex('u2_new', 'orders_eu', NULL, NULL, 'run-2');
SELECT ord, outcome FROM idem_claim_many(ARRAY['u2_new', 'u2_b'], 'orders_eu');
SELECT state FROM idem_status('u2_completed', 'orders_eu');
RESET ROLE;
SET ROLE regress_up_ops;
SELECT idem_resolve('u2_review', 'payroll', 'retry', NULL, 'checked');
SELECT idem_release('u2_new', 'orders_eu', 'operator');
SELECT deleted FROM idem_gate.janitor_run();
RESET ROLE;
SET ROLE regress_up2_mon;
SELECT available IS NOT NULL AS mon_reads_stats FROM idem_gate.stats;
SELECT count(*) > 0 AS mon_reads_workflow_stats FROM idem_gate.workflow_stats;
RESET ROLE;
-- the grants are read by the 1.2 rule: _ is literal, and reads are filtered
SET idem_gate.workflow_acl = on;
SET ROLE regress_up_n8n;
SELECT DISTINCT workflow FROM idem_gate.claims ORDER BY 1;
RESET ROLE;
-- the administrator given the two functions under 1.1 can use them now,
-- for what its own grants cover
SET ROLE regress_up2_admin;
SELECT idem_gate.grant_workflow('regress_up_n8n', 'orders_us%');
RESET ROLE;
-- from the update on (in this session too), _ is a literal underscore
SET ROLE regress_up_n8n;
SELECT ord, outcome FROM idem_claim_many(ARRAY['u2_like'], 'ordersXeu');
RESET ROLE;
RESET idem_gate.workflow_acl;
-- after a switch-over the next token is past the released claim's too
SELECT setval('idem_gate.token_seq', 1);
SELECT idem_gate.sync_token_seq() > (SELECT max(token) FROM idem_gate.audit) AS sync_past_the_released;
-- the catalog, without the GRANTs this test gave
REVOKE ALL ON FUNCTION idem_claim_ex(text, text, interval, text, text),
	idem_claim_many(text[], text, interval, text[], text),
	idem_complete(text, text, bigint, jsonb), idem_status(text, text),
	idem_resolve(text, text, text, jsonb, text), idem_release(text, text, text),
	idem_gate.janitor_run(), idem_gate.stats_counters(),
	idem_gate.grant_workflow(name, text), idem_gate.revoke_workflow(name, text),
	idem_gate.sync_token_seq()
	FROM regress_up_n8n, regress_up_ops, regress_up2_mon, regress_up2_admin, regress_up2_move;
REVOKE ALL ON idem_gate.claims, idem_gate.audit, idem_gate.stats, idem_gate.workflow_stats
	FROM regress_up_n8n, regress_up_ops, regress_up2_mon;
REVOKE ALL ON SCHEMA idem_gate FROM regress_up_n8n, regress_up_ops, regress_up2_mon, regress_up2_admin, regress_up2_move;
DELETE FROM idem_gate.workflow_acl;
:catalog_query \gset updated11_
\c :regress_db

------------------------------------------------------------------------
-- a 1.2 database, filled, updated to 1.3: rows, payloads, the audit trail,
-- a DBA's grants on a view and on distribute() are kept, every view
-- becomes a security barrier, and the members of a restricted role are
-- restricted
------------------------------------------------------------------------
CREATE DATABASE regress_up_12;
\c regress_up_12
SET client_min_messages = warning;
CREATE EXTENSION idem_gate VERSION '1.2';
RESET client_min_messages;
CREATE ROLE regress_up3_inbox;
CREATE ROLE regress_up3_alice IN ROLE regress_up3_inbox;
CREATE ROLE regress_up3_admin;
GRANT USAGE ON SCHEMA idem_gate TO regress_up3_inbox;
GRANT SELECT ON idem_gate.inbox TO regress_up3_inbox;
GRANT EXECUTE ON FUNCTION idem_gate.distribute(integer) TO regress_up3_admin;
ALTER ROLE regress_up3_inbox SET idem_gate.workflow_acl = on;
SELECT idem_gate.grant_workflow('regress_up3_inbox', 'orders');
SELECT idem_fail(k, w, (SELECT token FROM idem_claim_ex(k, w, NULL, NULL, 'run-1', p)), 'timeout', false)
  FROM (VALUES ('o-1', 'orders', '{"order": 1}'::jsonb), ('p-1', 'payroll', '{"iban": "DE89"}')) v(k, w, p)
 ORDER BY k;
SELECT idem_complete('o-2', 'orders', (SELECT token FROM idem_claim_ex('o-2', 'orders')), '{"charge": "ch_2"}');
SELECT idem_resolve('o-1', 'orders', 'retry', NULL, 'sender fixed it', 'alice');
SELECT extversion FROM pg_extension WHERE extname = 'idem_gate';
SET ROLE regress_up3_alice;
-- the library restricts the member already, on the 1.2 catalog
SELECT workflow, key FROM idem_gate.inbox ORDER BY 1, 2;
RESET ROLE;
-- the update replaces the inbox view: a DBA's view over it is named, and
-- nothing changes until it is gone
CREATE VIEW public.regress_my_inbox AS SELECT workflow, key FROM idem_gate.inbox;
-- (where in the script it stopped: PostgreSQL 18 quotes the whole step)
\set SHOW_CONTEXT never
ALTER EXTENSION idem_gate UPDATE;
\set SHOW_CONTEXT errors
SELECT extversion FROM pg_extension WHERE extname = 'idem_gate';
DROP VIEW public.regress_my_inbox;
ALTER EXTENSION idem_gate UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'idem_gate';
-- every row kept
SELECT workflow, key, state, attempt, result, payload FROM idem_gate.claims ORDER BY key;
SELECT action, workflow, key, state_before, state_after, actor, reason FROM idem_gate.audit ORDER BY id;
-- the DBA's grants kept, as the DBA's (not the extension's initial privileges)
SELECT has_table_privilege('regress_up3_inbox', 'idem_gate.inbox', 'SELECT') AS inbox_grant,
	   has_function_privilege('regress_up3_admin', 'idem_gate.distribute(integer)', 'EXECUTE') AS distribute_grant,
	   has_function_privilege('regress_up3_inbox', 'idem_gate.distribute(integer)', 'EXECUTE') AS not_granted;
SELECT count(*) AS in_initial_privileges FROM pg_init_privs i
 WHERE i.objoid IN ('idem_gate.distribute(integer)'::regprocedure, 'idem_gate.inbox'::regclass)
   AND i.initprivs::text ~ 'regress_up3_(admin|inbox)';
-- every view is a security barrier, and the member is restricted
SELECT relname, reloptions FROM pg_class
 WHERE relnamespace = 'idem_gate'::regnamespace AND relkind = 'v' ORDER BY 1;
SET ROLE regress_up3_alice;
SELECT workflow, key FROM idem_gate.inbox ORDER BY 1, 2;
RESET ROLE;
REVOKE ALL ON idem_gate.inbox FROM regress_up3_inbox;
REVOKE ALL ON FUNCTION idem_gate.distribute(integer) FROM regress_up3_admin;
REVOKE ALL ON SCHEMA idem_gate FROM regress_up3_inbox;
DELETE FROM idem_gate.workflow_acl;
:catalog_query \gset updated12_
\c :regress_db
DROP DATABASE regress_up_12;
DROP ROLE regress_up3_alice, regress_up3_inbox, regress_up3_admin;

------------------------------------------------------------------------
-- a fresh install has the same catalog
------------------------------------------------------------------------
CREATE DATABASE regress_up_11;
\c regress_up_11
SET client_min_messages = warning;
CREATE EXTENSION idem_gate;
RESET client_min_messages;
SELECT extversion FROM pg_extension WHERE extname = 'idem_gate';
:catalog_query \gset fresh_
SELECT :'fresh_string_agg' = :'updated_string_agg' AS same_catalog;
SELECT :'fresh_string_agg' = :'updated11_string_agg' AS same_catalog_from_1_1;
SELECT :'fresh_string_agg' = :'updated12_string_agg' AS same_catalog_from_1_2;
SELECT length(:'fresh_string_agg') > 10000 AS catalog_described;
-- what differs, if anything
SELECT l AS only_in_fresh FROM regexp_split_to_table(:'fresh_string_agg', E'\n') l
EXCEPT SELECT regexp_split_to_table(:'updated_string_agg', E'\n');
SELECT l AS only_in_updated FROM regexp_split_to_table(:'updated_string_agg', E'\n') l
EXCEPT SELECT regexp_split_to_table(:'fresh_string_agg', E'\n');
\c :regress_db
SELECT l AS only_in_fresh_not_from_1_1 FROM regexp_split_to_table(:'fresh_string_agg', E'\n') l
EXCEPT SELECT regexp_split_to_table(:'updated11_string_agg', E'\n');
SELECT l AS only_in_updated_from_1_1 FROM regexp_split_to_table(:'updated11_string_agg', E'\n') l
EXCEPT SELECT regexp_split_to_table(:'fresh_string_agg', E'\n');
SELECT l AS only_in_fresh_not_from_1_2 FROM regexp_split_to_table(:'fresh_string_agg', E'\n') l
EXCEPT SELECT regexp_split_to_table(:'updated12_string_agg', E'\n');
SELECT l AS only_in_updated_from_1_2 FROM regexp_split_to_table(:'updated12_string_agg', E'\n') l
EXCEPT SELECT regexp_split_to_table(:'fresh_string_agg', E'\n');
\c :regress_db

------------------------------------------------------------------------
-- a DBA's own row security under 1.1 keeps deciding after the update:
-- the extension's policy is restrictive where permissive ones exist, so
-- that nobody sees more than before
------------------------------------------------------------------------
CREATE DATABASE regress_up_rls;
\c regress_up_rls
SET client_min_messages = warning;
CREATE EXTENSION idem_gate VERSION '1.1';
RESET client_min_messages;
CREATE ROLE regress_up_report;
GRANT USAGE ON SCHEMA idem_gate TO regress_up_report;
GRANT SELECT ON idem_gate.claims, idem_gate.audit TO regress_up_report;
ALTER TABLE idem_gate.claims ENABLE ROW LEVEL SECURITY;
CREATE POLICY report_orders ON idem_gate.claims FOR SELECT TO regress_up_report
	USING (workflow = 'orders');
SELECT idem_claim(k, w) FROM (VALUES ('o-1', 'orders'), ('p-1', 'payroll'), ('p-2', 'payroll')) v(k, w);
SELECT idem_release('p-1', 'payroll', 'a released payroll claim, for the audit trail');
SET ROLE regress_up_report;
SELECT workflow, key FROM idem_gate.claims ORDER BY 1, 2;
SELECT count(*) AS audit_rows_seen FROM idem_gate.audit;
RESET ROLE;
ALTER EXTENSION idem_gate UPDATE TO '1.2';
SET ROLE regress_up_report;
-- the DBA's policy still decides: orders only, as under 1.1
SELECT workflow, key FROM idem_gate.claims ORDER BY 1, 2;
-- the audit trail had no row security: now per-workflow access, off, shows all
SELECT count(*) AS audit_rows_seen FROM idem_gate.audit;
RESET ROLE;
SELECT c.relname, p.polname, p.polpermissive
  FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid
 WHERE c.relnamespace = 'idem_gate'::regnamespace ORDER BY 1, 2;
-- with per-workflow access on, the role's grants narrow it further
SET idem_gate.workflow_acl = on;
SELECT idem_gate.grant_workflow('regress_up_report', 'payroll');
SET ROLE regress_up_report;
SELECT workflow, key FROM idem_gate.claims ORDER BY 1, 2;
RESET ROLE;
SELECT idem_gate.grant_workflow('regress_up_report', 'orders');
SET ROLE regress_up_report;
SELECT workflow, key FROM idem_gate.claims ORDER BY 1, 2;
RESET ROLE;
RESET idem_gate.workflow_acl;
\c :regress_db
DROP DATABASE regress_up_rls;
DROP ROLE regress_up_report;
DROP DATABASE regress_up_10;
DROP DATABASE regress_up_11;
DROP DATABASE regress_up_11f;
DROP ROLE regress_up_n8n, regress_up_ops, regress_up2_mon, regress_up2_admin, regress_up2_move;
