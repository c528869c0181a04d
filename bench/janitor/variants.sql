-- The janitor's completed-row batch as the worker runs it (one transaction
-- per batch, plan cached by PL/pgSQL as SPI caches the worker's), in two
-- forms: 'current' as src/janitor_sql.c has it, 'ordered' with ORDER BY
-- c.updated_at, 'keyset' ordered and starting each batch at the largest
-- updated_at the previous batch deleted.
-- CALL idem_bench_delete(variant, batch_size, retention) deletes until a
-- batch comes back short.
CREATE OR REPLACE PROCEDURE idem_bench_delete(variant text, bs int, ret interval)
LANGUAGE plpgsql AS $$
DECLARE n bigint; total bigint := 0; t0 timestamptz := clock_timestamp();
	last timestamptz := '-infinity';
BEGIN
	LOOP
		IF variant = 'keyset' THEN
			WITH del AS (DELETE FROM idem_gate.claims d WHERE d.ctid = ANY (ARRAY(
			 SELECT c.ctid FROM idem_gate.claims c
			 LEFT JOIN idem_gate.policies p ON p.workflow = c.workflow
			 WHERE c.state = 'completed'::idem_gate.state
			 AND c.updated_at >= last
			 AND c.updated_at < (now() - LEAST(ret, (SELECT min(q.retention) FROM idem_gate.policies q)))
			 AND c.updated_at < (now() - COALESCE(p.retention, ret))
			 ORDER BY c.updated_at LIMIT bs FOR UPDATE OF c SKIP LOCKED)) RETURNING d.updated_at)
			SELECT count(*), coalesce(max(updated_at), last) INTO n, last FROM del;
		ELSIF variant = 'ordered' THEN
			DELETE FROM idem_gate.claims d WHERE d.ctid = ANY (ARRAY(
			 SELECT c.ctid FROM idem_gate.claims c
			 LEFT JOIN idem_gate.policies p ON p.workflow = c.workflow
			 WHERE c.state = 'completed'::idem_gate.state
			 AND c.updated_at < (now() - LEAST(ret, (SELECT min(q.retention) FROM idem_gate.policies q)))
			 AND c.updated_at < (now() - COALESCE(p.retention, ret))
			 ORDER BY c.updated_at LIMIT bs FOR UPDATE OF c SKIP LOCKED));
		ELSE
			DELETE FROM idem_gate.claims d WHERE d.ctid = ANY (ARRAY(
			 SELECT c.ctid FROM idem_gate.claims c
			 LEFT JOIN idem_gate.policies p ON p.workflow = c.workflow
			 WHERE c.state = 'completed'::idem_gate.state
			 AND c.updated_at < (now() - LEAST(ret, (SELECT min(q.retention) FROM idem_gate.policies q)))
			 AND c.updated_at < (now() - COALESCE(p.retention, ret))
			 LIMIT bs FOR UPDATE OF c SKIP LOCKED));
		END IF;
		IF variant <> 'keyset' THEN GET DIAGNOSTICS n = ROW_COUNT; END IF;
		total := total + n;
		COMMIT;
		EXIT WHEN n < bs;
	END LOOP;
	RAISE NOTICE '% batch_size=%: % rows in % ms = % rows/s', variant, bs, total,
		round(extract(epoch FROM clock_timestamp() - t0) * 1000),
		round(total / extract(epoch FROM clock_timestamp() - t0));
END $$;
