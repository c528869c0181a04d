
/*
 * Scale-out on Citus.  idem_gate.distribute() makes idem_gate.claims a
 * table distributed by key, the audit trail a table co-located with it
 * (so that an operator's resolve or release writes its audit row on the
 * node of the key), the policies a reference table (every node's janitor
 * reads them), and registers each single-key API function as a
 * distributed function on its key argument: a call through the
 * coordinator then runs in one hop on the node holding the key's shard,
 * where the gate's reads and writes go through SQL to the local shard.
 * idem_gate.workflow_acl and idem_gate.janitor_watermarks stay tables of
 * each node.  Citus itself is not a dependency: the function looks for it
 * when called, and every step is skipped when already done, so calling it
 * twice is harmless.
 */
/*
 * idem_gate.stats on a Citus coordinator (distribute() points the view at
 * it): the counters of every node summed (the last pass and its duration
 * the latest, the reset the earliest; available only if every node
 * answered with idem_gate preloaded), and the completed-rows estimate from
 * the statistics of every shard, where the coordinator's own table is an
 * empty shell.  It runs as the extension's owner, so that a role granted
 * the view needs no rights on the nodes' counters.
 */
CREATE FUNCTION idem_gate.cluster_counters(
	OUT available boolean,
	OUT claims_new bigint,
	OUT claims_in_flight bigint,
	OUT claims_completed bigint,
	OUT claims_stale_taken bigint,
	OUT claims_needs_review bigint,
	OUT completions bigint,
	OUT fails_retryable bigint,
	OUT fails_needs_review bigint,
	OUT resolves bigint,
	OUT deleted_completed bigint,
	OUT deleted_failed bigint,
	OUT alerts bigint,
	OUT escalations bigint,
	OUT janitor_passes bigint,
	OUT releases bigint,
	OUT receipts_cleared bigint,
	OUT fingerprint_mismatches bigint,
	OUT sql_fallbacks bigint,
	OUT last_pass_at timestamptz,
	OUT last_pass_ms double precision,
	OUT reset_at timestamptz,
	OUT rows_estimate bigint)
RETURNS record
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	nodes bigint;
	answered bigint;
BEGIN
	SELECT pg_catalog.count(*), pg_catalog.count(*) FILTER (WHERE r.success),
		   pg_catalog.bool_and(c.available),
		   pg_catalog.sum(c.claims_new)::bigint,
		   pg_catalog.sum(c.claims_in_flight)::bigint,
		   pg_catalog.sum(c.claims_completed)::bigint,
		   pg_catalog.sum(c.claims_stale_taken)::bigint,
		   pg_catalog.sum(c.claims_needs_review)::bigint,
		   pg_catalog.sum(c.completions)::bigint,
		   pg_catalog.sum(c.fails_retryable)::bigint,
		   pg_catalog.sum(c.fails_needs_review)::bigint,
		   pg_catalog.sum(c.resolves)::bigint,
		   pg_catalog.sum(c.deleted_completed)::bigint,
		   pg_catalog.sum(c.deleted_failed)::bigint,
		   pg_catalog.sum(c.alerts)::bigint,
		   pg_catalog.sum(c.escalations)::bigint,
		   pg_catalog.sum(c.janitor_passes)::bigint,
		   pg_catalog.sum(c.releases)::bigint,
		   pg_catalog.sum(c.receipts_cleared)::bigint,
		   pg_catalog.sum(c.fingerprint_mismatches)::bigint,
		   pg_catalog.sum(c.sql_fallbacks)::bigint,
		   pg_catalog.max(c.last_pass_at),
		   pg_catalog.max(c.last_pass_ms),
		   pg_catalog.min(c.reset_at)
	  INTO nodes, answered, available, claims_new, claims_in_flight, claims_completed, claims_stale_taken, claims_needs_review, completions, fails_retryable, fails_needs_review, resolves, deleted_completed, deleted_failed, alerts, escalations, janitor_passes, releases, receipts_cleared, fingerprint_mismatches, sql_fallbacks, last_pass_at, last_pass_ms, reset_at
	  FROM pg_catalog.run_command_on_all_nodes(
			'SELECT pg_catalog.row_to_json(c) FROM idem_gate.stats_counters() c') r
	  LEFT JOIN LATERAL pg_catalog.json_to_record(
			CASE WHEN r.success THEN r.result::pg_catalog.json END)
			AS c(available boolean, claims_new bigint, claims_in_flight bigint, claims_completed bigint, claims_stale_taken bigint, claims_needs_review bigint, completions bigint, fails_retryable bigint, fails_needs_review bigint, resolves bigint, deleted_completed bigint, deleted_failed bigint, alerts bigint, escalations bigint, janitor_passes bigint, releases bigint, receipts_cleared bigint, fingerprint_mismatches bigint, sql_fallbacks bigint, last_pass_at timestamptz, last_pass_ms double precision, reset_at timestamptz) ON true;
	available := COALESCE(available, false) AND answered OPERATOR(pg_catalog.=) nodes;
	SELECT COALESCE(pg_catalog.sum(GREATEST(0, r.result::pg_catalog.float8)), 0)::bigint
	  INTO rows_estimate
	  FROM pg_catalog.run_command_on_shards('idem_gate.claims',
			'SELECT c.reltuples FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) ''%s''::pg_catalog.regclass') r
	 WHERE r.success;
END
$$;
COMMENT ON FUNCTION idem_gate.cluster_counters() IS 'on a Citus coordinator: the counters of every node summed and the shards'' row estimate (idem_gate.stats reads it there)';
REVOKE ALL ON FUNCTION idem_gate.cluster_counters() FROM PUBLIC;

/*
 * One shard group of an idem_claim_many through a Citus node: the keys
 * of the batch whose shard is anchor's, with their positions in the
 * caller's array, claimed as idem_claim_many claims them.  distribute()
 * registers it as a distributed function on anchor, so the node running
 * idem_claim_many sends each group to the node holding its shard in one
 * round trip.  Only the gate calls it (as the extension's owner, from
 * idem_claim_many, which has checked the caller's EXECUTE privilege);
 * caller is the role whose per-workflow grants apply.
 */
CREATE FUNCTION idem_gate.claim_many_group(keys text[], workflow text,
	stale_interval interval, fingerprints text[], execution_id text,
	anchor text, ords integer[], caller name)
RETURNS TABLE (ord integer, key text, outcome idem_gate.outcome, token bigint,
	attempt integer, state idem_gate.state, result jsonb, claimed_at timestamptz)
AS 'MODULE_PATHNAME', 'idem_claim_many_group'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION idem_gate.claim_many_group(text[], text, interval, text[], text, text, integer[], name) IS 'internal: the keys of one shard group of idem_claim_many on Citus';
REVOKE ALL ON FUNCTION idem_gate.claim_many_group(text[], text, interval, text[], text, text, integer[], name) FROM PUBLIC;

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
		had_rows := EXISTS (SELECT 1 FROM idem_gate.claims)
			OR EXISTS (SELECT 1 FROM idem_gate.audit);
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
		'@extschema@.idem_status(text, text)']
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
		FROM idem_gate.claims c
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
COMMENT ON FUNCTION idem_gate.distribute(integer) IS 'on a Citus coordinator: distribute the gate by key and run every single-key API call on the node of its key';
REVOKE ALL ON FUNCTION idem_gate.distribute(integer) FROM PUBLIC;
