--
-- What a listener on idem_gate_alert hears, read from a second connection
-- (dblink): one announcement per claim that enters the inbox, for the
-- reason it enters it, when its transaction commits.  A claim failing
-- retryably is announced once, at the idem_gate.max_attempts-th failure,
-- however often it fails after; a stuck claim once per grant.  The
-- payload names the workflow, cut to 500 bytes on a character boundary and
-- then marked, the reason, the time and a number; nothing else.
--
-- Leave the database as found: the other files expect to create idem_gate.
SELECT NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'idem_gate') AS alerts_created \gset
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idem_gate;
RESET client_min_messages;
CREATE EXTENSION dblink;
SELECT dblink_connect(c, format('dbname=%s port=%s host=%s', current_database(),
		current_setting('port'), split_part(current_setting('unix_socket_directories'), ',', 1)))
  FROM unnest(ARRAY['listener', 'sender']) c;
SELECT dblink_exec('listener', 'LISTEN idem_gate_alert');

-- Everything the listener heard since the last call.  The sender's own
-- notification, committed after every statement before this call, comes
-- after theirs: once it is heard, nothing of theirs is still on its way.
CREATE FUNCTION pg_temp.heard(OUT workflow text, OUT bytes int, OUT truncated bool,
	OUT reason text, OUT members text)
RETURNS SETOF record LANGUAGE plpgsql AS $$
DECLARE
	tag text := 'end of ' || clock_timestamp();
	n record;
	p jsonb;
	done bool := false;
BEGIN
	PERFORM dblink_exec('sender', format('NOTIFY idem_gate_alert, %L', tag));
	FOR i IN 1..2000 LOOP
		FOR n IN SELECT extra FROM dblink_get_notify('listener') LOOP
			IF n.extra = tag THEN
				done := true;
				CONTINUE;
			END IF;
			p := n.extra::jsonb;
			workflow := left(p->>'workflow', 12);
			bytes := octet_length(p->>'workflow');
			truncated := coalesce((p->>'workflow_truncated')::bool, false);
			reason := p->>'reason';
			members := (SELECT string_agg(k, ',' ORDER BY k) FROM jsonb_object_keys(p) k);
			IF (p->>'at')::timestamptz NOT BETWEEN now() - interval '1 minute' AND clock_timestamp()
			   OR (p->>'seq')::bigint < 1 THEN
				RAISE EXCEPTION 'odd time or number in %', n.extra;
			END IF;
			RETURN NEXT;
		END LOOP;
		EXIT WHEN done;
		PERFORM pg_sleep(0.01);
	END LOOP;
	IF NOT done THEN
		RAISE EXCEPTION 'the listener heard nothing in 20 s';
	END IF;
END $$;

-- a claim, and its failure, each committed by the statement that calls it
CREATE FUNCTION pg_temp.claim(k text, w text) RETURNS text LANGUAGE sql
AS $$ SELECT idem_claim(k, w) $$;
CREATE FUNCTION pg_temp.fail(k text, w text, retryable bool) RETURNS text LANGUAGE sql
AS $$ SELECT idem_fail(k, w, (SELECT token FROM idem_gate.claims c WHERE c.workflow = w AND c.key = k),
					   'downstream said no', retryable) $$;

-- retryable failures, max_attempts 3: the third is announced, no other;
-- the listener asked after each claim and each failure
SET idem_gate.max_attempts = 3;
SELECT $$SELECT pg_temp.claim('k', 'retried')$$, $$SELECT * FROM pg_temp.heard()$$,
	   $$SELECT pg_temp.fail('k', 'retried', true)$$, format($$SELECT %s AS failure, * FROM pg_temp.heard()$$, a)
  FROM generate_series(1, 5) a \gexec
RESET idem_gate.max_attempts;

-- needs_review: announced at the failure that asks for a person, after
-- retryable ones or none
SELECT pg_temp.claim('r', 'reviewed'), pg_temp.fail('r', 'reviewed', true), pg_temp.claim('r', 'reviewed');
SELECT * FROM pg_temp.heard();
SELECT pg_temp.fail('r', 'reviewed', false);
SELECT * FROM pg_temp.heard();

-- two in one transaction: two announcements (their numbers keep
-- PostgreSQL from folding them into one), none before it commits
BEGIN;
SELECT pg_temp.claim('t' || g, 'twice'), pg_temp.fail('t' || g, 'twice', false) FROM generate_series(1, 2) g;
SELECT * FROM pg_temp.heard();
COMMIT;
SELECT * FROM pg_temp.heard();

-- stuck: the janitor's pass announces the claim once; a second pass does
-- not; a new grant after it is a new announcement
CREATE FUNCTION pg_temp.age_stuck() RETURNS void LANGUAGE sql AS $$
	UPDATE idem_gate.claims SET created_at = created_at - interval '2 hours',
		claimed_at = claimed_at - interval '2 hours', updated_at = updated_at - interval '2 hours'
	 WHERE workflow = 'stuck' $$;
SET client_min_messages = error;	-- the pass's warning says for how long
SELECT pg_temp.claim('s', 'stuck');
SELECT pg_temp.age_stuck();
SELECT alerts FROM idem_gate.janitor_run();
SELECT * FROM pg_temp.heard();
SELECT alerts FROM idem_gate.janitor_run();
SELECT * FROM pg_temp.heard();
SELECT idem_claim('s', 'stuck', interval '1 hour');
SELECT * FROM pg_temp.heard();
SELECT pg_temp.age_stuck();
SELECT alerts FROM idem_gate.janitor_run();
SELECT * FROM pg_temp.heard();
RESET client_min_messages;

-- workflow names around the 500-byte cut, of one- and two-byte
-- characters: cut on a character boundary, and marked only when cut
SET idem_gate.max_key_length = 1000;
SELECT format($$SELECT pg_temp.claim('n', repeat('w', %s) || %L), pg_temp.fail('n', repeat('w', %s) || %L, false)$$,
			  n, tail, n, tail),
	   format($$SELECT %s AS bytes_named, * FROM pg_temp.heard()$$, n + octet_length(tail))
  FROM (SELECT n, '' AS tail FROM unnest(ARRAY[1, 499, 500, 501, 600]) n
		UNION ALL SELECT n, 'é' FROM unnest(ARRAY[497, 498, 499]) n) names
 ORDER BY n + octet_length(tail), tail \gexec
RESET idem_gate.max_key_length;

SELECT dblink_disconnect(c) FROM unnest(ARRAY['listener', 'sender']) c;
DROP EXTENSION dblink;
\if :alerts_created
DROP EXTENSION idem_gate;
\endif
