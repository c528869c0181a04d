--
-- Every number of the RFC 8785 number vectors in the quick layer
-- (test/jcs/vectors/numbers: RFC 8785's appendix B and the V8 edge list,
-- about 5,600 doubles).  ECMAScript's form of a double, read back, gives the
-- same double, so idem_canonical must give that form again, through the
-- json and the jsonb path alike.  The vector suite (test/suites/20_jcs.sh)
-- also starts from each double's bits.
--
-- Leave the database as found: the other suites expect to create idem_gate.
SELECT NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'idem_gate') AS vec_created \gset
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idem_gate;
RESET client_min_messages;

\getenv abs_srcdir PG_ABS_SRCDIR
CREATE TEMP TABLE num_vectors (hex text, expected text, comment text);
\set f :abs_srcdir '/test/jcs/vectors/numbers/rfc8785_appendix_b.csv'
COPY num_vectors FROM :'f' (FORMAT csv, HEADER);
\set f :abs_srcdir '/test/jcs/vectors/numbers/v8_edge_numbers.csv'
COPY num_vectors FROM :'f' (FORMAT csv, HEADER);

-- vec_safe(n): the 'safe' form, or the error's SQLSTATE
CREATE FUNCTION pg_temp.vec_safe(n text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	RETURN idem_canonical(n::json);
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE;
END $$;

SELECT count(*) FILTER (WHERE expected <> 'ERROR') AS numbers,
	   count(*) FILTER (WHERE expected = 'ERROR') AS not_json,
	   count(*) FILTER (WHERE expected <> 'ERROR' AND
						idem_canonical(expected::json, 'rfc') IS DISTINCT FROM expected) AS json_differ,
	   count(*) FILTER (WHERE expected <> 'ERROR' AND
						idem_canonical(expected::jsonb, 'rfc') IS DISTINCT FROM expected) AS jsonb_differ,
	   count(*) FILTER (WHERE expected <> 'ERROR' AND
						idem_canonical(('[' || expected || ',{"n":' || expected || '}]')::jsonb, 'rfc')
						IS DISTINCT FROM '[' || expected || ',{"n":' || expected || '}]') AS nested_differ
  FROM num_vectors;
-- which ones, if any
SELECT hex, expected, idem_canonical(expected::json, 'rfc') AS json,
	   idem_canonical(expected::jsonb, 'rfc') AS jsonb
  FROM num_vectors
 WHERE expected <> 'ERROR'
   AND (idem_canonical(expected::json, 'rfc') IS DISTINCT FROM expected OR
		idem_canonical(expected::jsonb, 'rfc') IS DISTINCT FROM expected)
 ORDER BY hex LIMIT 10;
-- the 'safe' policy refuses only a number its canonical form would change,
-- and each of these is already the ECMAScript form of its double
SELECT count(*) AS safe_differ FROM num_vectors
 WHERE expected <> 'ERROR' AND pg_temp.vec_safe(expected) <> expected;

DROP TABLE num_vectors;
\if :vec_created
DROP EXTENSION idem_gate;
\endif
