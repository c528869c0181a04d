
/*
 * Citus: distribute() also delegates the 1.2 overloads and history() to
 * the node of their key, and its per-shard workflow_stats shows a role
 * only the workflows it may see.  A cluster distributed under 1.1 runs
 * idem_gate.distribute() once more after the update (it does only what is
 * not done yet).  The GRANTs a DBA gave on distribute() are carried over.
 */
DO $do$
DECLARE
	g pg_catalog.text[];
BEGIN
	SELECT idem_gate.upgrade_grants(p.proacl, p.proowner, 'FUNCTION idem_gate.distribute(integer)')
	  INTO g
	  FROM pg_catalog.pg_proc p
	 WHERE p.oid OPERATOR(pg_catalog.=) 'idem_gate.distribute(integer)'::pg_catalog.regprocedure;
	DROP FUNCTION idem_gate.distribute(integer);
CREATE FUNCTION idem_gate.distribute(shard_count integer DEFAULT 32)
RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET client_min_messages = warning	-- Citus's notices of copying rows are handled here
AS $$
DECLARE
	citus_version text;
	is_coordinator boolean;
	workers bigint;
	fn text;
	steps text[] := '{}';
	had_rows boolean := false;
BEGIN
	IF shard_count IS NULL THEN
		RAISE EXCEPTION 'shard_count must not be null'
			USING ERRCODE = '22004',
				  HINT = 'Call idem_gate.distribute() for 32 shards, or pass a positive count.';
	END IF;
	IF shard_count OPERATOR(pg_catalog.<=) 0 THEN
		RAISE EXCEPTION 'shard_count must be positive, not %', shard_count
			USING ERRCODE = '22023',
				  HINT = 'Pass a positive count of shards, such as 32 (several per worker node, so that the rebalancer can spread them).';
	END IF;

	SELECT e.extversion INTO citus_version
	  FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'citus';
	IF citus_version IS NULL THEN
		RAISE EXCEPTION 'idem_gate.distribute() needs the citus extension in this database'
			USING ERRCODE = '55000',
				  DETAIL = 'Without Citus there is nothing to distribute the gate''s tables over.',
				  HINT = 'Preload Citus first (shared_preload_libraries = ''citus,idem_gate'') on every node, run CREATE EXTENSION citus on the coordinator, add the worker nodes, then call idem_gate.distribute() there.';
	END IF;

	EXECUTE 'SELECT pg_catalog.citus_is_coordinator()' INTO is_coordinator;
	IF NOT is_coordinator THEN
		RAISE EXCEPTION 'idem_gate.distribute() must be called on the Citus coordinator'
			USING ERRCODE = '55000',
				  DETAIL = 'This node is not the coordinator of its cluster.',
				  HINT = 'Connect to the coordinator (the node where citus_set_coordinator_host() was called) and call idem_gate.distribute() there.';
	END IF;

	EXECUTE 'SELECT pg_catalog.count(*) FROM pg_catalog.pg_dist_node n'
		' WHERE n.noderole OPERATOR(pg_catalog.=) ''primary'' AND n.isactive'
		' AND n.groupid OPERATOR(pg_catalog.<>) 0' INTO workers;

	IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition p
				   WHERE p.logicalrelid OPERATOR(pg_catalog.=) 'idem_gate.claims'::pg_catalog.regclass) THEN
		had_rows := EXISTS (SELECT 1 FROM ONLY idem_gate.claims)
			OR EXISTS (SELECT 1 FROM ONLY idem_gate.audit);
		IF had_rows AND workers OPERATOR(pg_catalog.=) 0 THEN
			RAISE EXCEPTION 'idem_gate.claims already holds rows and this coordinator has no worker nodes'
				USING ERRCODE = '55000',
					  DETAIL = 'The rows would stay on the coordinator, which then carries all the load that distributing should spread.',
					  HINT = 'Add the worker nodes first with citus_add_node(), then call idem_gate.distribute(); it moves the rows into their shards.';
		END IF;

		/* the rows of existing tables are copied into the shards, then removed */
		PERFORM pg_catalog.set_config('citus.multi_shard_modify_mode', 'sequential', true);
		PERFORM pg_catalog.create_distributed_table('idem_gate.claims', 'key',
			shard_count := shard_count, colocate_with := 'none');
		steps := steps OPERATOR(pg_catalog.||) 'claims distributed by key'::text;
	END IF;

	IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition p
				   WHERE p.logicalrelid OPERATOR(pg_catalog.=) 'idem_gate.audit'::pg_catalog.regclass) THEN
		/*
		 * A distributed table's primary key must hold its distribution
		 * column; ids stay unique by themselves.  The append-only guard
		 * runs on each shard, on the node that holds it.
		 */
		IF EXISTS (SELECT 1 FROM pg_catalog.pg_constraint c
				   WHERE c.conrelid OPERATOR(pg_catalog.=) 'idem_gate.audit'::pg_catalog.regclass
					 AND c.conname OPERATOR(pg_catalog.=) 'audit_pkey'
					 AND c.conkey OPERATOR(pg_catalog.=) '{1}'::pg_catalog.int2[]) THEN
			ALTER TABLE idem_gate.audit DROP CONSTRAINT audit_pkey,
				ADD CONSTRAINT audit_pkey PRIMARY KEY (key, id);
		END IF;
		PERFORM pg_catalog.set_config('citus.enable_unsafe_triggers', 'on', true);
		PERFORM pg_catalog.create_distributed_table('idem_gate.audit', 'key',
			colocate_with := 'idem_gate.claims');
		steps := steps OPERATOR(pg_catalog.||) 'audit co-located with claims'::text;
	END IF;

	IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition p
				   WHERE p.logicalrelid OPERATOR(pg_catalog.=) 'idem_gate.policies'::pg_catalog.regclass) THEN
		PERFORM pg_catalog.create_reference_table('idem_gate.policies');
		steps := steps OPERATOR(pg_catalog.||) 'policies a reference table'::text;
	END IF;

	IF had_rows THEN
		PERFORM pg_catalog.truncate_local_data_after_distributing_table('idem_gate.claims');
		/* the audit's TRUNCATE guard is an ordinary (origin) trigger */
		PERFORM pg_catalog.set_config('session_replication_role', 'replica', true);
		PERFORM pg_catalog.truncate_local_data_after_distributing_table('idem_gate.audit');
		PERFORM pg_catalog.set_config('session_replication_role', 'origin', true);
	END IF;

	/* every single-key API function runs on the node of its key */
	FOREACH fn IN ARRAY ARRAY[
		'@extschema@.idem_claim(text, text, interval)',
		'@extschema@.idem_claim_ex(text, text, interval, text, text)',
		'@extschema@.idem_heartbeat(text, text, bigint)',
		'@extschema@.idem_complete(text, text, bigint, jsonb)',
		'@extschema@.idem_fail(text, text, bigint, text, boolean)',
		'@extschema@.idem_resolve(text, text, text, jsonb, text)',
		'@extschema@.idem_release(text, text, text)',
		'@extschema@.idem_status(text, text)',
		'@extschema@.idem_claim_ex(text, text, interval, text, text, jsonb)',
		'@extschema@.idem_resolve(text, text, text, jsonb, text, text)',
		'@extschema@.idem_release(text, text, text, text)',
		'idem_gate.history(text, text)']
	LOOP
		IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_object o
					   WHERE o.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
						 AND o.objid OPERATOR(pg_catalog.=) fn::pg_catalog.regprocedure
						 AND o.distribution_argument_index OPERATOR(pg_catalog.=) 0) THEN
			PERFORM pg_catalog.create_distributed_function(fn::pg_catalog.regprocedure, '$1',
				colocate_with := 'idem_gate.claims');
			steps := steps OPERATOR(pg_catalog.||) (fn::pg_catalog.regprocedure::pg_catalog.text
				OPERATOR(pg_catalog.||) ' delegated');
		END IF;
	END LOOP;

	/* a batch's shard group runs on the node of its keys' shard */
	IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_object o
				   WHERE o.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
					 AND o.objid OPERATOR(pg_catalog.=) 'idem_gate.claim_many_group(text[], text, interval, text[], text, text, integer[], name)'::pg_catalog.regprocedure
					 AND o.distribution_argument_index OPERATOR(pg_catalog.=) 5) THEN
		PERFORM pg_catalog.create_distributed_function(
			'idem_gate.claim_many_group(text[], text, interval, text[], text, text, integer[], name)'::pg_catalog.regprocedure,
			'anchor', colocate_with := 'idem_gate.claims');
		steps := steps OPERATOR(pg_catalog.||) 'idem_gate.claim_many_group delegated by shard group'::text;
	END IF;

	/*
	 * idem_gate.workflow_stats walks the workflows with a recursive query,
	 * which Citus cannot distribute.  On Citus its figures come from one
	 * GROUP BY that every shard runs in parallel (the completed rows are
	 * then counted, not estimated); same columns, same grants.
	 */
	IF pg_catalog.pg_get_viewdef('idem_gate.workflow_stats'::pg_catalog.regclass)
		OPERATOR(pg_catalog.~~) '%RECURSIVE%' THEN
		CREATE OR REPLACE VIEW idem_gate.workflow_stats AS
		SELECT c.workflow,
			pg_catalog.count(*) FILTER (WHERE c.state OPERATOR(pg_catalog.=) 'processing'::idem_gate.state) AS rows_processing,
			pg_catalog.count(*) FILTER (WHERE c.state OPERATOR(pg_catalog.=) 'failed_retryable'::idem_gate.state) AS rows_failed_retryable,
			pg_catalog.count(*) FILTER (WHERE c.state OPERATOR(pg_catalog.=) 'needs_review'::idem_gate.state) AS rows_needs_review,
			pg_catalog.count(*) FILTER (WHERE c.state OPERATOR(pg_catalog.=) 'completed'::idem_gate.state) AS rows_completed_estimate,
			pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.min(c.updated_at)
				FILTER (WHERE c.state OPERATOR(pg_catalog.=) 'processing'::idem_gate.state) AS oldest_processing_age,
			pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.min(c.updated_at)
				FILTER (WHERE c.state OPERATOR(pg_catalog.=) 'needs_review'::idem_gate.state) AS oldest_needs_review_age
		FROM ONLY idem_gate.claims c
		WHERE idem_gate.workflow_visible(c.workflow)
		GROUP BY c.workflow;
		steps := steps OPERATOR(pg_catalog.||) 'workflow_stats counted per shard'::text;
	END IF;

	/*
	 * idem_gate.stats on the coordinator: the counters of every node and
	 * the completed rows of every shard (idem_gate.cluster_counters());
	 * same columns, same grants.
	 */
	IF pg_catalog.pg_get_viewdef('idem_gate.stats'::pg_catalog.regclass)
		OPERATOR(pg_catalog.!~~) '%cluster_counters%' THEN
		CREATE OR REPLACE VIEW idem_gate.stats AS
		SELECT s.available,
			s.claims_new,
			s.claims_in_flight,
			s.claims_completed,
			s.claims_stale_taken,
			s.claims_needs_review,
			s.completions,
			s.fails_retryable,
			s.fails_needs_review,
			s.resolves,
			s.deleted_completed,
			s.deleted_failed,
			s.alerts,
			s.escalations,
			s.janitor_passes,
			s.releases,
			s.receipts_cleared,
			s.fingerprint_mismatches,
			s.sql_fallbacks,
			s.last_pass_at,
			s.last_pass_ms,
			s.reset_at,
			g.rows_processing, g.rows_failed_retryable, g.rows_needs_review,
			GREATEST(0, s.rows_estimate
					 OPERATOR(pg_catalog.-) g.rows_processing
					 OPERATOR(pg_catalog.-) g.rows_failed_retryable
					 OPERATOR(pg_catalog.-) g.rows_needs_review) AS rows_completed_estimate,
			pg_catalog.now() OPERATOR(pg_catalog.-) g.oldest_processing_at AS oldest_processing_age
		FROM idem_gate.cluster_counters() s, idem_gate.stats_gauges g;
		steps := steps OPERATOR(pg_catalog.||) 'stats summed over the nodes'::text;
	END IF;

	IF pg_catalog.cardinality(steps) OPERATOR(pg_catalog.=) 0 THEN
		RETURN 'already distributed';
	END IF;
	RETURN pg_catalog.array_to_string(steps, '; ');
END
$$;
	REVOKE ALL ON FUNCTION idem_gate.distribute(integer) FROM PUBLIC;
	PERFORM idem_gate.outside_extension(g);
END
$do$;
COMMENT ON FUNCTION idem_gate.distribute(integer) IS 'on a Citus coordinator: distribute the gate by key and run every single-key API call on the node of its key';
