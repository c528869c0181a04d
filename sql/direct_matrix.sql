--
-- The direct writes honour everything the SQL path does.  For each change
-- a DBA can make to idem_gate.claims, the same script of claims,
-- completions, failures, resolves and releases runs once with the direct
-- writes (where the gate still uses them) and once forced through SQL
-- (idem_gate.direct_writes = off): the answers, SQLSTATEs and resulting
-- rows must be identical.  The sql_fallbacks counter shows which path the
-- first run took.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idem_gate;
RESET client_min_messages;

-- the script: one answer (or SQLSTATE) per step
CREATE FUNCTION matrix_run(wf text) RETURNS TABLE (step int, answer text)
LANGUAGE plpgsql AS $$
DECLARE
	t bigint;
	q text[] := ARRAY[
		$q$SELECT outcome::text FROM idem_claim_ex('evt_a', %L, NULL, 'fp', 'run-1')$q$,
		$q$SELECT outcome::text FROM idem_claim_ex('evt_a', %L)$q$,
		$q$SELECT idem_complete('evt_a', %1$L, (SELECT token FROM idem_status('evt_a', %1$L)), '{"r": 1}')::text$q$,
		$q$SELECT outcome || ' ' || result FROM idem_claim_ex('evt_a', %L)$q$,
		$q$SELECT outcome::text FROM idem_claim_ex('evt_b', %L, NULL, NULL, 'bad')$q$,
		$q$SELECT idem_claim('evt_c', %L)::text$q$,
		$q$SELECT idem_fail('evt_c', %L, NULL, 'before', true)::text$q$,
		$q$SELECT outcome || ' ' || attempt FROM idem_claim_ex('evt_c', %L)$q$,
		$q$SELECT idem_fail('evt_c', %1$L, (SELECT token FROM idem_status('evt_c', %1$L)), 'after', false)::text$q$,
		$q$SELECT idem_resolve('evt_c', %L, 'completed', '{"by": "ops"}', 'checked')::text$q$,
		$q$SELECT outcome::text FROM idem_claim_ex('not_an_evt', %L)$q$,
		$q$SELECT idem_heartbeat('evt_b', %1$L, (SELECT token FROM idem_status('evt_b', %1$L)))::text$q$,
		$q$SELECT idem_claim('evt_d', %L)::text$q$,
		$q$SELECT idem_complete('evt_d', %L, NULL, '{"r": 4}')::text$q$,
		$q$SELECT idem_release('evt_d', %L, 'redo')::text$q$,
		$q$SELECT outcome::text FROM idem_claim_ex('evt_d', %L, NULL, NULL, 'run-4')$q$,
		$q$SELECT outcome::text FROM idem_claim_ex('evt_t', %L, NULL, NULL, 'run-5')$q$,
		$q$SELECT idem_complete('evt_t', %L)::text$q$
	];
	a text;
BEGIN
	FOR i IN 1 .. array_length(q, 1) LOOP
		BEGIN
			EXECUTE format(q[i], wf) INTO a;
		EXCEPTION WHEN OTHERS THEN
			a := 'ERROR ' || SQLSTATE;
		END;
		step := i;
		answer := a;
		RETURN NEXT;
	END LOOP;
END $$;

-- the rows a run left, without what differs by nature (tokens, times)
CREATE FUNCTION matrix_rows(wf text) RETURNS text LANGUAGE sql AS $$
	SELECT string_agg((to_jsonb(c) - 'workflow' - 'token' - 'created_at' - 'claimed_at'
					   - 'updated_at' - 'completed_at' - 'alerted_token')::text
					  || ' completed_at:' || (c.completed_at IS NOT NULL), E'\n' ORDER BY c.key)
	  FROM idem_gate.claims c WHERE c.workflow = wf $$;

-- compare(change): run the script both ways and report
CREATE FUNCTION matrix_compare(what text) RETURNS TABLE (
	change text, answers_equal boolean, rows_equal boolean, direct_fallbacks bigint, answers text)
LANGUAGE plpgsql AS $$
DECLARE
	f0 bigint;
	ad text;
	asql text;
BEGIN
	SELECT s.sql_fallbacks INTO f0 FROM idem_gate.stats s;
	SELECT string_agg(r.answer, ', ' ORDER BY r.step) INTO ad FROM matrix_run('m_direct') r;
	SELECT s.sql_fallbacks - f0 INTO direct_fallbacks FROM idem_gate.stats s;
	SET LOCAL idem_gate.direct_writes = off;
	SELECT string_agg(r.answer, ', ' ORDER BY r.step) INTO asql FROM matrix_run('m_sql') r;
	SET LOCAL idem_gate.direct_writes = on;
	change := what;
	answers_equal := ad = asql;
	rows_equal := matrix_rows('m_direct') IS NOT DISTINCT FROM matrix_rows('m_sql');
	answers := CASE WHEN ad = asql THEN ad ELSE ad || ' <> ' || asql END;
	RETURN NEXT;
END $$;

-- the table as the extension made it: direct writes, no fallback
BEGIN;
DELETE FROM idem_gate.claims;
SELECT * FROM matrix_compare('none');
ROLLBACK;

-- a DBA's CHECK, with the number of CHECKs unchanged
BEGIN;
DELETE FROM idem_gate.claims;
ALTER TABLE idem_gate.claims DROP CONSTRAINT claims_key_not_empty;
ALTER TABLE idem_gate.claims ADD CONSTRAINT evt_keys CHECK (key ~ '^evt_');
SELECT * FROM matrix_compare('a DBA CHECK replacing one of ours');
ROLLBACK;

-- a NOT NULL of the DBA's
BEGIN;
DELETE FROM idem_gate.claims;
ALTER TABLE idem_gate.claims ALTER last_error SET NOT NULL;
SELECT * FROM matrix_compare('NOT NULL on last_error');
ROLLBACK;

-- an added column with a default, and a domain with a CHECK
BEGIN;
DELETE FROM idem_gate.claims;
ALTER TABLE idem_gate.claims ADD COLUMN note text DEFAULT 'from the DBA';
SELECT * FROM matrix_compare('an added column with a default');
ROLLBACK;
BEGIN;
DELETE FROM idem_gate.claims;
CREATE DOMAIN exec_id AS text CHECK (VALUE <> 'bad');
-- the inbox shows the column: a view's column cannot change its type
ALTER EXTENSION idem_gate DROP VIEW idem_gate.inbox;
DROP VIEW idem_gate.inbox;
ALTER TABLE idem_gate.claims ALTER execution_id TYPE exec_id;
SELECT * FROM matrix_compare('execution_id as a domain with a CHECK');
ROLLBACK;

-- a dropped column leaves the table as the extension made it
BEGIN;
DELETE FROM idem_gate.claims;
ALTER TABLE idem_gate.claims ADD COLUMN scratch int;
ALTER TABLE idem_gate.claims DROP COLUMN scratch;
SELECT * FROM matrix_compare('a column added and dropped');
ROLLBACK;

-- an index of the DBA's is maintained by both paths
BEGIN;
DELETE FROM idem_gate.claims;
CREATE INDEX claims_by_execution ON idem_gate.claims (execution_id);
SELECT * FROM matrix_compare('an index added');
SET LOCAL enable_seqscan = off;
SET LOCAL enable_bitmapscan = off;
SELECT execution_id, count(*) FROM idem_gate.claims
 WHERE execution_id IN ('run-1', 'run-4') GROUP BY 1 ORDER BY 1;
ROLLBACK;

-- indexes the direct writes do not maintain as an INSERT would: an
-- expression (even PostgreSQL's own function), a deferred unique check, an
-- exclusion; each sends the writes through SQL (fallbacks above 0)
BEGIN;
DELETE FROM idem_gate.claims;
CREATE INDEX claims_by_lower_execution ON idem_gate.claims (lower(execution_id));
SELECT * FROM matrix_compare('an expression index');
ROLLBACK;
BEGIN;
DELETE FROM idem_gate.claims;
ALTER TABLE idem_gate.claims ADD CONSTRAINT claims_token_deferred UNIQUE (token) DEFERRABLE INITIALLY DEFERRED;
SELECT * FROM matrix_compare('a deferred unique constraint');
ROLLBACK;
BEGIN;
DELETE FROM idem_gate.claims;
ALTER TABLE idem_gate.claims ADD CONSTRAINT claims_token_excluded EXCLUDE USING btree (token WITH =);
SELECT * FROM matrix_compare('an exclusion constraint');
ROLLBACK;

-- triggers: one that fires on the gate's writes needs SQL; a disabled
-- one, or one on TRUNCATE only, does not
CREATE FUNCTION matrix_touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.last_error := coalesce(NEW.last_error, 'touched');
	RETURN NEW;
END $$;
CREATE FUNCTION matrix_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RETURN NULL;
END $$;
BEGIN;
DELETE FROM idem_gate.claims;
CREATE TRIGGER touch BEFORE INSERT OR UPDATE ON idem_gate.claims
	FOR EACH ROW EXECUTE FUNCTION matrix_touch();
SELECT * FROM matrix_compare('a BEFORE trigger');
ROLLBACK;
BEGIN;
DELETE FROM idem_gate.claims;
CREATE TRIGGER touch BEFORE INSERT OR UPDATE ON idem_gate.claims
	FOR EACH ROW EXECUTE FUNCTION matrix_touch();
ALTER TABLE idem_gate.claims DISABLE TRIGGER touch;
SELECT * FROM matrix_compare('a disabled trigger');
ROLLBACK;
BEGIN;
DELETE FROM idem_gate.claims;
CREATE TRIGGER on_truncate BEFORE TRUNCATE ON idem_gate.claims
	FOR EACH STATEMENT EXECUTE FUNCTION matrix_truncate();
SELECT * FROM matrix_compare('a TRUNCATE trigger');
ROLLBACK;

-- a publication with and without a replica identity (without the warning
-- that wal_level is not logical, which PostgreSQL 17 words differently)
BEGIN;
DELETE FROM idem_gate.claims;
SET LOCAL client_min_messages = error;
CREATE PUBLICATION matrix_pub FOR TABLE idem_gate.claims;
SELECT * FROM matrix_compare('published, replica identity by primary key');
ROLLBACK;
BEGIN;
DELETE FROM idem_gate.claims;
SET LOCAL client_min_messages = error;
CREATE PUBLICATION matrix_pub FOR TABLE idem_gate.claims;
ALTER TABLE idem_gate.claims REPLICA IDENTITY NOTHING;
SELECT * FROM matrix_compare('published without a replica identity');
ROLLBACK;

-- a partition of a parent that takes only some workflows
BEGIN;
DELETE FROM idem_gate.claims;
CREATE TABLE claims_parent (LIKE idem_gate.claims) PARTITION BY LIST (workflow);
ALTER TABLE claims_parent ATTACH PARTITION idem_gate.claims FOR VALUES IN ('m_direct', 'm_sql', 'other');
SELECT * FROM matrix_compare('a partition of a parent');
DO $$ BEGIN
	PERFORM idem_claim('k', 'not_in_the_list');
EXCEPTION WHEN OTHERS THEN
	RAISE NOTICE 'a workflow outside the partition: %', SQLSTATE;
END $$;
ROLLBACK;

-- privileges the owner of the functions lacks
CREATE ROLE regress_matrix_owner;
-- give_to(role): the role owns the gate's functions that the script calls
CREATE FUNCTION matrix_give_to(r text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('ALTER FUNCTION idem_claim_ex(text, text, interval, text, text) OWNER TO %I', r);
	EXECUTE format('ALTER FUNCTION idem_claim(text, text, interval) OWNER TO %I', r);
	EXECUTE format('ALTER FUNCTION idem_complete(text, text, bigint, jsonb) OWNER TO %I', r);
	EXECUTE format('ALTER FUNCTION idem_fail(text, text, bigint, text, boolean) OWNER TO %I', r);
END $$;
GRANT USAGE ON SCHEMA idem_gate TO regress_matrix_owner;
BEGIN;
DELETE FROM idem_gate.claims;
SELECT matrix_give_to('regress_matrix_owner');
GRANT SELECT ON idem_gate.claims TO regress_matrix_owner;
GRANT USAGE ON SEQUENCE idem_gate.token_seq TO regress_matrix_owner;
SELECT * FROM matrix_compare('the owner may read but not write');
ROLLBACK;
BEGIN;
DELETE FROM idem_gate.claims;
SELECT matrix_give_to('regress_matrix_owner');
GRANT INSERT, UPDATE ON idem_gate.claims TO regress_matrix_owner;
GRANT USAGE ON SEQUENCE idem_gate.token_seq TO regress_matrix_owner;
SELECT * FROM matrix_compare('the owner may write but not read');
ROLLBACK;
-- an owner that is not the table's owner, with every privilege, under
-- workflow ACLs: row security applies to its reads, but the gate's own
-- reads inside a call, whose caller's grants are checked, see every row
BEGIN;
DELETE FROM idem_gate.claims;
SELECT matrix_give_to('regress_matrix_owner');
GRANT SELECT, INSERT, UPDATE ON idem_gate.claims TO regress_matrix_owner;
GRANT USAGE ON SEQUENCE idem_gate.token_seq TO regress_matrix_owner;
SET LOCAL idem_gate.workflow_acl = on;
SELECT * FROM matrix_compare('the owner is under row security');
ROLLBACK;
DROP OWNED BY regress_matrix_owner;
DROP ROLE regress_matrix_owner;

DROP FUNCTION matrix_give_to(text);
DROP FUNCTION matrix_touch(), matrix_truncate(), matrix_compare(text),
	matrix_rows(text), matrix_run(text);
