--
-- The canonical form's output paths: idem_hash streams the canonical bytes
-- into SHA-256 in chunks (long runs straight through), idem_canonical
-- grows a text buffer.  Both must produce the same bytes for documents
-- small and large, so the hash of idem_canonical's text is the oracle.
--
-- Leave the database as found: the other suites expect to create idem_gate.
SELECT NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'idem_gate') AS sink_created \gset
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idem_gate;
RESET client_min_messages;

CREATE TEMP TABLE sink_docs (name text, doc text);
INSERT INTO sink_docs VALUES
	('empty string', '""'),
	('short', '{"b":"x","a":[1,2.5,true,false,null]}'),
	('literals', '[false,true,null,{"f":false,"t":true,"n":null}]'),
	-- strings around and far beyond the hash chunk, raw and with escapes
	('string 8k', '"' || repeat('a', 8191) || '"'),
	('string 8k+1', '"' || repeat('b', 8193) || '"'),
	('string 64k-1', '"' || repeat('c', 65533) || '"'),
	('string 64k', '"' || repeat('d', 65534) || '"'),
	('string 64k+1', '"' || repeat('e', 65535) || '"'),
	('array 64k', '[' || repeat('"', 2) || ',"' || repeat('f', 65527) || '"]'),
	('string 100k', '["' || repeat('abcdefgh', 12500) || '"]'),
	('escapes 50k', '"' || repeat('q\n\"\\\u0001', 10000) || '"'),
	('utf-8 60k', '"' || repeat('é€😀', 10000) || '"'),
	('long key', '{"' || repeat('k', 20000) || '":1,"a":2}'),
	-- many small pieces
	('many members', (SELECT json_object_agg('m' || i, repeat('v', i % 50))::text
					  FROM generate_series(1, 3000) i)),
	('many numbers', (SELECT json_agg(i * 1.25 - 1e6)::text FROM generate_series(1, 5000) i)),
	('mixed', (SELECT json_agg(json_build_object('s', repeat('x', i * 37), 'n', i))::text
			   FROM generate_series(1, 200) i));

SELECT name, length(doc) AS len,
	   idem_hash(doc::jsonb) = encode(sha256(convert_to(idem_canonical(doc::jsonb), 'UTF8')), 'hex') AS jsonb_ok,
	   idem_hash(doc::json) = encode(sha256(convert_to(idem_canonical(doc::json), 'UTF8')), 'hex') AS json_ok,
	   idem_canonical(doc::json) = idem_canonical(doc::jsonb) AS agree,
	   length(idem_canonical(doc::json)) AS canonical_len
  FROM sink_docs ORDER BY name;

-- the hash of a field list goes through the same sink
SELECT idem_hash(doc::jsonb, ARRAY['a', 'b']) =
	   encode(sha256(convert_to('{"a":' || idem_canonical((doc::jsonb) -> 'a') ||
								',"b":' || idem_canonical((doc::jsonb) -> 'b') || '}', 'UTF8')), 'hex') AS fields_ok
  FROM (VALUES ('{"a":"' || repeat('z', 30000) || '","b":[1,2],"c":3}')) v(doc);

-- a field that is a scalar is written by its own path: each kind, with the
-- canonical form of the value alone as the oracle
SELECT f, idem_hash(d, ARRAY[f]) =
	   encode(sha256(convert_to('{"' || f || '":' || idem_canonical(d -> f) || '}', 'UTF8')), 'hex') AS ok
  FROM (VALUES ('{"t":true,"f":false,"n":null,"s":"x\u0001y","num":1.50,"o":{"b":1,"a":[false]}}'::jsonb)) v(d),
	   unnest(ARRAY['t', 'f', 'n', 's', 'num', 'o']) f;

-- JSON pointers with multi-digit array indexes
SELECT p, idem_hash(doc, ARRAY[p]) = idem_hash(jsonb_build_object(p, doc #> string_to_array(substr(p, 2), '/'))) AS ok
  FROM (SELECT jsonb_build_object('arr', jsonb_agg(i * 3), 'o', jsonb_build_object('10', 'ten'))
		  FROM generate_series(0, 130) i) d(doc),
	   unnest(ARRAY['/arr/0', '/arr/9', '/arr/10', '/arr/12', '/arr/99', '/arr/123', '/o/10']) p;

DROP TABLE sink_docs;
\if :sink_created
DROP EXTENSION idem_gate;
\endif
