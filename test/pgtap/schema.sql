-- The schema contract of idem_gate: types and labels, the claims table,
-- keys, constraints, indexes, function signatures and privileges.
BEGIN;
SELECT plan(185);
-- the managed edition (managed/idem_gate.sql) is no extension: what it
-- does not have (docs/managed.md) is skipped there, with why
SELECT NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'idem_gate') AS managed_edition \gset

-- schema and types
SELECT has_schema('idem_gate');
SELECT has_enum('idem_gate', 'state', 'idem_gate.state exists');
SELECT enum_has_labels('idem_gate', 'state',
	ARRAY['processing', 'completed', 'failed_retryable', 'needs_review']);
SELECT has_enum('idem_gate', 'outcome', 'idem_gate.outcome exists');
SELECT enum_has_labels('idem_gate', 'outcome',
	ARRAY['new', 'in_flight', 'completed', 'stale_taken', 'needs_review']);
SELECT has_sequence('idem_gate', 'token_seq', 'the fencing-token sequence exists');

-- the claims table
SELECT has_table('idem_gate', 'claims', 'idem_gate.claims exists');
SELECT columns_are('idem_gate', 'claims', ARRAY[
	'workflow', 'key', 'state', 'attempt', 'token', 'execution_id',
	'fingerprint', 'result', 'last_error', 'created_at', 'claimed_at',
	'updated_at', 'completed_at', 'alerted_token', 'token_issued', 'payload',
	'payload_dropped_bytes']);
SELECT col_type_is('idem_gate', 'claims', 'payload', 'jsonb', 'payload is jsonb');
SELECT col_type_is('idem_gate', 'claims', 'payload_dropped_bytes', 'integer', 'payload_dropped_bytes is integer');
SELECT col_type_is('idem_gate', 'claims', 'workflow', 'text', 'workflow is text');
SELECT col_type_is('idem_gate', 'claims', 'key', 'text', 'key is text');
SELECT col_type_is('idem_gate', 'claims', 'state', 'idem_gate', 'state', 'state is idem_gate.state');
SELECT col_type_is('idem_gate', 'claims', 'attempt', 'integer', 'attempt is integer');
SELECT col_type_is('idem_gate', 'claims', 'token', 'bigint', 'token is bigint');
SELECT col_type_is('idem_gate', 'claims', 'execution_id', 'text', 'execution_id is text');
SELECT col_type_is('idem_gate', 'claims', 'fingerprint', 'text', 'fingerprint is text');
SELECT col_type_is('idem_gate', 'claims', 'result', 'jsonb', 'result is jsonb');
SELECT col_type_is('idem_gate', 'claims', 'last_error', 'text', 'last_error is text');
SELECT col_type_is('idem_gate', 'claims', 'created_at', 'timestamp with time zone', 'created_at is timestamptz');
SELECT col_type_is('idem_gate', 'claims', 'claimed_at', 'timestamp with time zone', 'claimed_at is timestamptz');
SELECT col_type_is('idem_gate', 'claims', 'updated_at', 'timestamp with time zone', 'updated_at is timestamptz');
SELECT col_type_is('idem_gate', 'claims', 'completed_at', 'timestamp with time zone', 'completed_at is timestamptz');
SELECT col_not_null('idem_gate', 'claims', c, c || ' is NOT NULL')
  FROM unnest(ARRAY['workflow', 'key', 'state', 'attempt', 'token',
	'created_at', 'claimed_at', 'updated_at', 'token_issued']) c;
SELECT col_type_is('idem_gate', 'claims', 'token_issued', 'boolean', 'token_issued is boolean');
SELECT col_default_is('idem_gate', 'claims', 'token_issued', 'false', 'rows claimed under 1.0 keep the 1.0 token rule');
SELECT col_is_null('idem_gate', 'claims', c, c || ' is nullable')
  FROM unnest(ARRAY['execution_id', 'fingerprint', 'result', 'last_error', 'completed_at',
	'payload', 'payload_dropped_bytes']) c;
SELECT col_is_pk('idem_gate', 'claims', ARRAY['workflow', 'key'], 'the primary key is (workflow, key)');
SELECT has_index('idem_gate', 'claims', 'claims_state_workflow_updated_at',
	ARRAY['state', 'workflow', 'updated_at', 'token'],
	'the janitor and the alerter walk rows by (state, workflow, updated_at, token)');
SELECT hasnt_index('idem_gate', 'claims', 'claims_state_updated_at',
	'1.0''s (state, updated_at) index is replaced');
SELECT has_index('idem_gate', 'claims', 'claims_inbox_since',
	ARRAY['state', 'updated_at', 'workflow', 'key', 'attempt'],
	'the inbox lists needs_review and failing claims by (state, updated_at, workflow, key), with their attempt');
SELECT is(pg_get_expr(i.indpred, i.indrelid), '(state = ANY (ARRAY[''needs_review''::idem_gate.state, ''failed_retryable''::idem_gate.state]))',
	'... holding only needs_review and failed_retryable claims, so that a completion never writes it')
  FROM pg_index i WHERE i.indexrelid = 'idem_gate.claims_inbox_since'::regclass;
SELECT indexes_are('idem_gate', 'claims', ARRAY['claims_pkey', 'claims_state_workflow_updated_at', 'claims_inbox_since'],
	'three indexes on idem_gate.claims');
SELECT bag_eq($$
	SELECT conname::text FROM pg_constraint
	 WHERE conrelid = 'idem_gate.claims'::regclass AND contype = 'c' $$,
	ARRAY['claims_workflow_not_empty', 'claims_key_not_empty',
		  'claims_attempt_positive', 'claims_token_positive',
		  'claims_completed_at_iff_completed', 'claims_completed_at_is_last_change',
		  'claims_result_only_when_completed', 'claims_timestamps_ordered',
		  'claims_payload_only_while_open'],
	'the CHECK constraints');

-- the CHECK constraints refuse rows inconsistent with their state
SELECT throws_ok($$INSERT INTO idem_gate.claims (workflow, key, state, attempt, token, created_at, claimed_at, updated_at, completed_at)
	VALUES ('w', 'k', 'processing', 1, 1, now(), now(), now(), now())$$,
	'23514', NULL, 'a processing row cannot have completed_at');
SELECT throws_ok($$INSERT INTO idem_gate.claims (workflow, key, state, attempt, token, created_at, claimed_at, updated_at)
	VALUES ('w', 'k', 'completed', 1, 1, now(), now(), now())$$,
	'23514', NULL, 'a completed row needs completed_at');
SELECT throws_ok($$INSERT INTO idem_gate.claims (workflow, key, state, attempt, token, result, created_at, claimed_at, updated_at)
	VALUES ('w', 'k', 'needs_review', 1, 1, '{}', now(), now(), now())$$,
	'23514', NULL, 'only a completed row has a receipt');
SELECT throws_ok($$INSERT INTO idem_gate.claims (workflow, key, state, attempt, token, created_at, claimed_at, updated_at)
	VALUES ('w', 'k', 'processing', 0, 1, now(), now(), now())$$,
	'23514', NULL, 'attempt starts at 1');
SELECT throws_ok($$INSERT INTO idem_gate.claims (workflow, key, state, attempt, token, created_at, claimed_at, updated_at)
	VALUES ('w', 'k', 'processing', 1, 0, now(), now(), now())$$,
	'23514', NULL, 'tokens are positive');
SELECT throws_ok($$INSERT INTO idem_gate.claims (workflow, key, state, attempt, token, created_at, claimed_at, updated_at)
	VALUES ('', 'k', 'processing', 1, 1, now(), now(), now())$$,
	'23514', NULL, 'workflow is not empty');
SELECT throws_ok($$INSERT INTO idem_gate.claims (workflow, key, state, attempt, token, created_at, claimed_at, updated_at)
	VALUES ('w', 'k', 'processing', 1, 1, now(), now(), now() - interval '1 second')$$,
	'23514', NULL, 'updated_at is not before claimed_at');
SELECT throws_ok($$INSERT INTO idem_gate.claims (workflow, key, state, attempt, token, created_at, claimed_at, updated_at, completed_at)
	VALUES ('w', 'k', 'completed', 1, 1, now(), now(), now() + interval '1 second', now())$$,
	'23514', NULL, 'a completed row changes no more after completion');

-- the API functions: signatures and results
SELECT has_function('public', 'idem_claim', ARRAY['text', 'text', 'interval']);
SELECT function_returns('public', 'idem_claim', ARRAY['text', 'text', 'interval'], 'idem_gate.outcome');
SELECT has_function('public', 'idem_claim_ex', ARRAY['text', 'text', 'interval', 'text', 'text']);
SELECT function_returns('public', 'idem_claim_ex', ARRAY['text', 'text', 'interval', 'text', 'text'], 'record');
SELECT is(
	(SELECT proretset FROM pg_proc WHERE oid = 'public.idem_claim_ex(text,text,interval,text,text)'::regprocedure),
	false, 'idem_claim_ex returns exactly one row');
SELECT isnt_strict('public', 'idem_claim_ex', ARRAY['text', 'text', 'interval', 'text', 'text'],
	'NULL arguments reach idem_claim_ex, which refuses them with 22004');
SELECT has_function('public', 'idem_heartbeat', ARRAY['text', 'text', 'bigint']);
SELECT function_returns('public', 'idem_heartbeat', ARRAY['text', 'text', 'bigint'], 'boolean');
SELECT has_function('public', 'idem_complete', ARRAY['text', 'text', 'bigint', 'jsonb']);
SELECT function_returns('public', 'idem_complete', ARRAY['text', 'text', 'bigint', 'jsonb'], 'boolean');
SELECT has_function('public', 'idem_fail', ARRAY['text', 'text', 'bigint', 'text', 'boolean']);
SELECT function_returns('public', 'idem_fail', ARRAY['text', 'text', 'bigint', 'text', 'boolean'], 'idem_gate.state');
SELECT has_function('public', 'idem_resolve', ARRAY['text', 'text', 'text', 'jsonb', 'text']);
SELECT function_returns('public', 'idem_resolve', ARRAY['text', 'text', 'text', 'jsonb', 'text'], 'idem_gate.state');
SELECT hasnt_function('public', 'idem_resolve', ARRAY['text', 'text', 'text', 'jsonb'],
	'1.0''s idem_resolve is replaced, not overloaded');
SELECT has_function('public', 'idem_claim_many', ARRAY['text[]', 'text', 'interval', 'text[]', 'text']);
SELECT is(
	(SELECT pg_get_function_arguments('public.idem_claim_many(text[],text,interval,text[],text)'::regprocedure)),
	'keys text[], workflow text, stale_interval interval DEFAULT NULL::interval, fingerprints text[] DEFAULT NULL::text[], execution_id text DEFAULT NULL::text',
	'idem_claim_many arguments and defaults');
SELECT is(
	(SELECT pg_get_function_result('public.idem_claim_many(text[],text,interval,text[],text)'::regprocedure)),
	'TABLE(ord integer, key text, outcome idem_gate.outcome, token bigint, attempt integer, state idem_gate.state, result jsonb, claimed_at timestamp with time zone)',
	'idem_claim_many result columns');
\if :managed_edition
SELECT skip('Citus is a C extension: the managed edition has neither cluster_counters() nor claim_many_group()', 2);
\else
SELECT has_function('idem_gate', 'cluster_counters', ARRAY[]::text[]);
SELECT has_function('idem_gate', 'claim_many_group', ARRAY['text[]', 'text', 'interval', 'text[]', 'text', 'text', 'integer[]', 'name']);
\endif
SELECT has_function('public', 'idem_release', ARRAY['text', 'text', 'text']);
SELECT function_returns('public', 'idem_release', ARRAY['text', 'text', 'text'], 'boolean');
SELECT has_function('public', 'idem_status', ARRAY['text', 'text']);
SELECT function_returns('public', 'idem_status', ARRAY['text', 'text'], 'setof idem_gate.claims');
SELECT is(
	(SELECT pg_get_function_arguments('public.idem_claim_ex(text,text,interval,text,text)'::regprocedure)),
	'key text, workflow text, stale_interval interval DEFAULT NULL::interval, fingerprint text DEFAULT NULL::text, execution_id text DEFAULT NULL::text, OUT outcome idem_gate.outcome, OUT token bigint, OUT attempt integer, OUT state idem_gate.state, OUT result jsonb, OUT claimed_at timestamp with time zone',
	'idem_claim_ex arguments, defaults and flat result columns');
SELECT is(
	(SELECT pg_get_function_arguments('public.idem_fail(text,text,bigint,text,boolean)'::regprocedure)),
	'key text, workflow text, token bigint DEFAULT NULL::bigint, error text DEFAULT NULL::text, retryable boolean DEFAULT false',
	'idem_fail argument names and defaults');
SELECT volatility_is('public', 'idem_claim', ARRAY['text', 'text', 'interval'], 'volatile');
SELECT has_function('idem_gate', 'stats_reset', ARRAY[]::text[]);
SELECT has_view('idem_gate', 'stats', 'the stats view exists');
SELECT has_view('idem_gate', 'stats_gauges', 'the live gauges of the stats view exist');
SELECT has_table('idem_gate', 'policies', 'idem_gate.policies exists');
SELECT col_is_pk('idem_gate', 'policies', 'workflow', 'one policy per workflow');
SELECT col_type_is('idem_gate', 'policies', c, 'interval', c || ' is an interval')
  FROM unnest(ARRAY['retention', 'failed_retention', 'stuck_after', 'receipt_retention']) c;
SELECT has_view('idem_gate', 'workflow_stats', 'the per-workflow figures exist');
SELECT columns_are('idem_gate', 'workflow_stats', ARRAY['workflow', 'rows_processing',
	'rows_failed_retryable', 'rows_needs_review', 'rows_completed_estimate',
	'oldest_processing_age', 'oldest_needs_review_age']);
SELECT has_table('idem_gate', 'audit', 'the audit trail exists');
SELECT columns_are('idem_gate', 'audit', ARRAY['id', 'at', 'session_role', 'acting_role',
	'action', 'workflow', 'key', 'state_before', 'state_after', 'token', 'reason', 'actor']);
SELECT has_trigger('idem_gate', 'audit', 'audit_append_only', 'audit rows cannot be changed');
SELECT has_trigger('idem_gate', 'audit', 'audit_no_truncate', 'the audit trail cannot be truncated');
SELECT has_table('idem_gate', 'janitor_watermarks', 'the janitor''s receipt progress exists');
SELECT has_table('idem_gate', 'workflow_acl', 'the per-workflow grants exist');
SELECT col_is_pk('idem_gate', 'workflow_acl', ARRAY['role', 'pattern'], 'one grant per role and pattern');
SELECT col_type_is('idem_gate', 'workflow_acl', 'role', 'regrole', 'grants name roles (dumped by name)');
SELECT has_function('idem_gate', 'grant_workflow', ARRAY['name', 'text']);
SELECT has_function('idem_gate', 'revoke_workflow', ARRAY['name', 'text']);
SELECT has_function('idem_gate', 'sync_token_seq', ARRAY[]::text[]);
SELECT function_returns('idem_gate', 'sync_token_seq', ARRAY[]::text[], 'bigint');
SELECT is((SELECT count(*)::int FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
	WHERE n.nspname = 'idem_gate' AND p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'plpgsql')
	  AND NOT ('search_path=pg_catalog, pg_temp' = ANY (coalesce(p.proconfig, '{}')))), 0,
	'every PL/pgSQL function of the extension pins its search_path');
\if :managed_edition
SELECT skip('the managed edition is no extension: its tables are plain tables, dumped with the database', 1);
\else
SELECT set_eq($$SELECT c.relname::text FROM pg_extension e, unnest(e.extconfig) t(oid)
	JOIN pg_class c ON c.oid = t.oid WHERE e.extname = 'idem_gate'$$,
	ARRAY['claims', 'policies', 'token_seq', 'audit', 'audit_id_seq', 'workflow_acl'],
	'pg_dump keeps the tables holding user state and the sequences');
\endif
SELECT has_function('idem_gate', 'janitor_run', ARRAY[]::text[]);
SELECT is(pg_get_function_result('idem_gate.janitor_run()'::regprocedure),
	'record', 'janitor_run returns one row');
SELECT is(has_function_privilege('public', 'idem_gate.janitor_run()', 'EXECUTE'), false,
	'janitor_run is not executable by PUBLIC');
SELECT is(has_table_privilege('public', 'idem_gate.policies', 'INSERT'), false,
	'PUBLIC cannot write policies');

-- privileges: the gate is not public, the table is written only through it
SELECT CASE WHEN :'managed_edition' AND to_regprocedure(f) IS NULL
		THEN skip(f || ' is the C edition''s only (Citus)', 1)
		ELSE is(has_function_privilege('public', f, 'EXECUTE'), false, f || ' is not executable by PUBLIC') END
  FROM unnest(ARRAY[
	'public.idem_claim(text,text,interval)',
	'public.idem_claim_ex(text,text,interval,text,text)',
	'public.idem_heartbeat(text,text,bigint)',
	'public.idem_complete(text,text,bigint,jsonb)',
	'public.idem_fail(text,text,bigint,text,boolean)',
	'public.idem_resolve(text,text,text,jsonb,text)',
	'public.idem_claim_many(text[],text,interval,text[],text)',
	'public.idem_release(text,text,text)',
	'public.idem_status(text,text)',
	'idem_gate.stats_reset()',
	'idem_gate.stats_counters()',
	'idem_gate.audit_guard()',
	'idem_gate.grant_workflow(name,text)',
	'idem_gate.revoke_workflow(name,text)',
	'idem_gate.workflow_acl_changed()',
	'idem_gate.sync_token_seq()',
	'idem_gate.claim_many_group(text[],text,interval,text[],text,text,integer[],name)',
	'idem_gate.cluster_counters()',
	'public.idem_claim_ex(text,text,interval,text,text,jsonb)',
	'public.idem_claim_many(text[],text,interval,text[],text,jsonb[])',
	'public.idem_resolve(text,text,text,jsonb,text,text)',
	'public.idem_release(text,text,text,text)',
	'idem_gate.history(text,text)',
	'idem_gate.distribute(integer)']) f;
SELECT is(has_table_privilege('public', t, p), false, 'PUBLIC has no ' || p || ' on ' || t)
  FROM unnest(ARRAY['idem_gate.audit', 'idem_gate.janitor_watermarks', 'idem_gate.workflow_stats',
	'idem_gate.workflow_acl', 'idem_gate.stats_gauges', 'idem_gate.inbox', 'idem_gate.stats']) t,
	   unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE']) p;
SELECT is(has_table_privilege('public', 'idem_gate.claims', p), false, 'PUBLIC has no ' || p || ' on idem_gate.claims')
  FROM unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE']) p;
SELECT is(has_sequence_privilege('public', 'idem_gate.token_seq', 'USAGE'), false,
	'PUBLIC cannot draw tokens');


-- 1.2: the human loop, per-workflow reads
SELECT has_view('idem_gate', 'inbox', 'the inbox exists');
SELECT columns_are('idem_gate', 'inbox', ARRAY['workflow', 'key', 'reason', 'since', 'state',
	'attempt', 'execution_id', 'last_error', 'payload', 'payload_dropped_bytes', 'fingerprint',
	'claimed_at', 'updated_at'], 'the inbox shows no token');
SELECT function_returns('idem_gate', 'history', ARRAY['text', 'text'], 'setof record',
	'history() returns a set of audit rows');
SELECT has_function('public', 'idem_claim_ex', ARRAY['text', 'text', 'interval', 'text', 'text', 'jsonb'],
	'idem_claim_ex takes a payload');
SELECT has_function('public', 'idem_claim_ex', ARRAY['text', 'text', 'interval', 'text', 'text'],
	'the 1.1 idem_claim_ex stays');
SELECT has_function('public', 'idem_resolve', ARRAY['text', 'text', 'text', 'jsonb', 'text', 'text'],
	'idem_resolve takes an actor');
SELECT has_function('public', 'idem_release', ARRAY['text', 'text', 'text', 'text'],
	'idem_release takes an actor');
SELECT is(has_function_privilege('public', 'idem_gate.workflow_visible(text)', 'EXECUTE'), true,
	'workflow_visible() is executable by everyone, as row security needs');
SELECT is((SELECT relrowsecurity FROM pg_class WHERE oid = t::regclass), true,
	t || ' has row security, for per-workflow reads')
  FROM unnest(ARRAY['idem_gate.claims', 'idem_gate.audit']) t;
SELECT policies_are('idem_gate', 'claims', ARRAY['claims_by_workflow']);
SELECT policies_are('idem_gate', 'audit', ARRAY['audit_by_workflow']);
SELECT is((SELECT prosecdef FROM pg_proc WHERE oid = 'idem_gate.grant_workflow(name,text)'::regprocedure),
	false, 'grant_workflow() acts as the owner by itself, not as SECURITY DEFINER');
SELECT hasnt_function('idem_gate', 'outside_extension', ARRAY['text[]'],
	'the update''s helpers are gone');
SELECT hasnt_function('idem_gate', 'upgrade_grants', ARRAY['aclitem[]', 'oid', 'text'],
	'the update''s helpers are gone (2)');

SELECT * FROM finish();
ROLLBACK;
