
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

	IF pg_catalog.cardinality(steps) OPERATOR(pg_catalog.=) 0 THEN
		RETURN 'already distributed';
	END IF;
	RETURN pg_catalog.array_to_string(steps, '; ');
END
$$;
COMMENT ON FUNCTION idem_gate.distribute(integer) IS 'on a Citus coordinator: distribute the gate by key and run every single-key API call on the node of its key';
REVOKE ALL ON FUNCTION idem_gate.distribute(integer) FROM PUBLIC;
