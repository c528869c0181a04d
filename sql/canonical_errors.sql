--
-- Canonical JSON: every error, with its SQLSTATE, message, detail and hint.
--
-- Leave the database as found: the other suites expect to create idem_gate.
SELECT NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'idem_gate') AS canonical_created \gset
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idem_gate;
RESET client_min_messages;

-- Run a statement and show how it fails (no LOCATION line to go stale).
CREATE FUNCTION pg_temp.canonical_error(q text,
	OUT state text, OUT message text, OUT detail text, OUT hint text)
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE q;
	state := 'no error';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT,
		detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
END $$;
\pset format unaligned
\pset recordsep '\n\n'
\pset fieldsep '\n  '
\pset tuples_only on

-- 22003: a number beyond the double range, under both policies
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_canonical('{"a":[1,1e400]}'::jsonb) $$);
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_hash('-1e400'::jsonb, 'rfc') $$);
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_canonical('[1e999999999]'::json, 'rfc') $$);
-- 22003: numbers => 'safe' refuses silent collisions at and beyond 2^53 and
-- below 2^-1022 (long numbers are abbreviated in the message)
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_canonical('{"id":12345678901234567890}'::jsonb) $$);
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_hash('{"x":{"ids":[1,9007199254740993]}}'::json) $$);
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_canonical('3e-324'::jsonb) $$);
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_canonical('{"a~/b":1e-400}'::jsonb) $$);
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_canonical(('[' || repeat('7', 200) || ']')::jsonb) $$);
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_hash('{"data":{"id":18446744073709551615}}'::jsonb, ARRAY['/data/id']) $$);

-- 22023: unknown numbers policy
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_canonical('{}'::jsonb, 'exact') $$);
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_hash('{}'::json, 'RFC') $$);
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_hash('{}'::jsonb, ARRAY['a'], '') $$);
-- the message shows spaces as they are, control characters escaped
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_canonical('{}'::jsonb, E'no such\tpolicy') $$);

-- 22030: duplicate member names in json input (jsonb keeps the last one)
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_canonical('{"a":1,"b":2,"a":3}'::json) $$);
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_hash('[{"x":{"k":1,"\u006b":2}}]'::json) $$);
SELECT idem_canonical('{"a":1,"b":2,"a":3}'::jsonb) AS jsonb_keeps_last;

-- 22P02: lone surrogates in json input (RFC 8785 needs valid Unicode)
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_canonical('"\ud800"'::json) $$);
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_hash('{"\udc00x":1}'::json) $$);
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_canonical('["\ud83d\u0041"]'::json) $$);

-- identity fields: 22023 for a missing field, naming it
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_hash('{"id":1}'::jsonb, ARRAY['id', 'event_id']) $$);
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_hash('{"data":{"object":{}}}'::jsonb, ARRAY['/data/object/id']) $$);
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_hash('{"items":[1,2]}'::jsonb, ARRAY['/items/2']) $$);
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_hash('{"items":[1,2]}'::jsonb, ARRAY['/items/01']) $$);
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_hash('{"items":[1,2]}'::jsonb, ARRAY['/items/-']) $$);
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_hash('{"id":"x"}'::jsonb, ARRAY['/id/0']) $$);
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_hash('{"id":1}'::jsonb, ARRAY['']) $$);
-- 22023: bad identity fields
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_hash('{"a~b":1}'::jsonb, ARRAY['/a~b']) $$);
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_hash('{"id":1}'::jsonb, ARRAY[]::text[]) $$);
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_hash('{"id":1}'::jsonb, ARRAY['id', 'id']) $$);
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_hash('{"id":1}'::jsonb, ARRAY[['id'], ['id']]) $$);
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_hash('[{"id":1}]'::jsonb, ARRAY['id']) $$);
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_hash('"id"'::jsonb, ARRAY['id']) $$);
-- 22004: a null field
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_hash('{"id":1}'::jsonb, ARRAY['id', NULL]) $$);

-- 54001: deep documents end in a clean error, never a crash
CREATE TEMP TABLE canonical_deep AS
  SELECT (repeat('[', 5000) || repeat(']', 5000)) AS t,
         (repeat('[', 5000) || repeat(']', 5000))::json AS js,
         (repeat('[', 5000) || repeat(']', 5000))::jsonb AS j;
SET max_stack_depth = '100kB';
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_hash(j) FROM canonical_deep $$);
SELECT * FROM pg_temp.canonical_error($$ SELECT idem_canonical(js) FROM canonical_deep $$);
RESET max_stack_depth;
SELECT length(idem_canonical(j)), length(idem_canonical(js)) FROM canonical_deep;

\if :canonical_created
DROP EXTENSION idem_gate;
\endif
