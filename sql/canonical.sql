--
-- Canonical JSON (RFC 8785): idem_canonical and idem_hash outputs.
-- The exhaustive vectors and the differential test are in
-- test/suites/20_jcs.sh; this file pins the documented behaviour.
--
-- Leave the database as found: the other suites expect to create idem_gate.
SELECT NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'idem_gate') AS canonical_created \gset
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idem_gate;
RESET client_min_messages;

-- the contract's example: members by UTF-16 order, numbers by value
SELECT idem_canonical('{"b":[1E30,4.50,-0],"a":"€/"}'::jsonb);
SELECT idem_canonical('{"b":[1E30,4.50,-0],"a":"€/"}'::json);
SELECT idem_hash('{"b":[1E30,4.50,-0],"a":"€/"}'::jsonb);
-- the hash is SHA-256 of the canonical UTF-8 bytes
SELECT idem_hash('{"b":[1E30,4.50,-0],"a":"€/"}'::jsonb) =
       encode(sha256(convert_to('{"a":"€/","b":[1e+30,4.5,0]}', 'UTF8')), 'hex') AS same;

-- member order: UTF-16 code units, not jsonb's length-first order and not
-- UTF-8 byte order (U+E000..U+FFFF sort after the supplementary planes)
SELECT idem_canonical('{"bb":1,"a":2,"ccc":3,"B":4,"é":5,"z":6}'::jsonb);
SELECT idem_canonical(('{"":0,"1":0,"10":0,"9":0,"B":0,"a":0,"a\ud800\udc00":0,"a\uffff":0,' ||
       '"bb":0,"ccc":0,"z":0,"\u0080":0,"é":0,"\ud800\udc00":0,"\ud83d\ude00":0,' ||
       '"\ue000":0,"\ufb33":0,"\uffff":0}')::jsonb) =
       U&'{"":0,"1":0,"10":0,"9":0,"B":0,"a":0,"a\+010000":0,"a\FFFF":0,"bb":0,"ccc":0,"z":0,' ||
       U&'"\0080":0,"\00E9":0,"\+010000":0,"\+01F600":0,"\E000":0,"\FB33":0,"\FFFF":0}' AS utf16_order;
-- arrays keep their order; nested objects are sorted too
SELECT idem_canonical('[3,1,{"y":[{"b":1,"a":2}],"x":null},2]'::jsonb);

-- strings: short escapes, lowercase \u00xx for other controls, everything
-- else raw (including / DEL U+2028 and astral characters)
SELECT idem_canonical('"\u0001\u001f\b\f\n\r\t\"\\\/\u000b"'::jsonb);
-- a space is the first character written as itself
SELECT idem_canonical('{" a b ": " \u0020c! "}'::jsonb);
SELECT encode(convert_to(idem_canonical('"\u007f\u2028\u00e9\ud83d\ude00"'::jsonb), 'UTF8'), 'hex');
-- no Unicode normalization: NFC and NFD differ
SELECT idem_hash('"\u00e9"'::jsonb) = idem_hash('"e\u0301"'::jsonb) AS nfc_equals_nfd;
-- json input: \u0000 is written as RFC 8785 writes it (jsonb cannot hold it)
SELECT idem_canonical('{"k\u0000":"a\u0000b"}'::json);

-- literals and scalar documents
SELECT idem_canonical('true'::jsonb), idem_canonical('null'::jsonb),
       idem_canonical('"x"'::jsonb), idem_canonical('  -0.0  '::json),
       idem_canonical('{}'::jsonb), idem_canonical('[]'::json),
       idem_canonical('{ "a" : [ ] , "b" : { } }'::json);

-- numbers: ECMAScript form of the nearest double
SELECT n, idem_canonical(n::jsonb) AS jsonb, idem_canonical(n::json) AS json
  FROM unnest(ARRAY['0', '-0', '1.0', '4.50', '100e-2', '-1.5E+3', '1e20', '1e21',
                    '123456789012345680000', '1e-6', '1.5e-7', '0.000001', '1e-7',
                    '333333333.33333329', '0.1000000000000000055511151231257827',
                    '9007199254740992', '9007199254740994', '1e30', '1E30', '1e+23',
                    '295147905179352830000', '5e-324', '1.7976931348623157e308',
                    '2.2250738585072014e-308', '-0.0000033333333333333333',
                    '1424953923781206.25']) AS n;

-- numbers => 'rfc' rounds what 'safe' refuses; 1e23 and 8.41e21 are the
-- doubles whose shortest form lies exactly halfway to a neighbour, which
-- ECMAScript takes (round half to even) and PostgreSQL's float8 output does
-- not (9.999999999999999e+22)
SELECT n, idem_canonical(n::jsonb, 'rfc') AS jsonb, idem_canonical(n::json, numbers => 'rfc') AS json
  FROM unnest(ARRAY['12345678901234567890', '9007199254740993', '18446744073709551615',
                    '295147905179352825856', '3e-324', '2e-324', '1e-400', '-1e-400',
                    '1e23', '-1e23', '8.41e21', '99999999999999991611392']) AS n;

-- hash properties: member order and whitespace do not matter, jsonb and
-- json agree, numeric scale does not matter, types do
SELECT idem_hash('{"id": "evt_1", "amount": 1000, "meta": {"b": 1, "a": [1, 2]}}'::jsonb) =
       idem_hash('{"meta":{"a":[1,2],"b":1},"amount":1000,"id":"evt_1"}'::jsonb) AS key_order,
       idem_hash('{"id": "evt_1", "amount": 1000, "meta": {"b": 1, "a": [1, 2]}}'::jsonb) =
       idem_hash(E'{\n  "meta" : {"a":[1 ,2], "b":1},\t"amount":1000,"id":"evt_1"}'::json) AS jsonb_json,
       idem_hash('{"amount": 1000}'::jsonb) = idem_hash('{"amount": 1000.00}'::jsonb) AS scale,
       idem_hash('{"amount": 1000}'::jsonb) = idem_hash('{"amount": "1000"}'::jsonb) AS types,
       idem_hash('[1,2]'::jsonb) = idem_hash('[2,1]'::jsonb) AS array_order;
SELECT idem_hash('{"a":1}'::json, 'rfc') = idem_hash('{"a":1}'::jsonb, numbers => 'safe') AS policies_agree;

-- identity fields: member names and JSON pointers
SELECT idem_hash('{"id":"evt_1","type":"charge.succeeded","created":1700000000,"data":{"object":{"id":"ch_1","amount":2000}}}'::jsonb,
                 ARRAY['id']) =
       idem_hash('{"id":"evt_1"}'::jsonb) AS one_field;
SELECT idem_hash('{"id":"evt_1","type":"charge.succeeded","created":1700000000,"data":{"object":{"id":"ch_1","amount":2000}}}'::jsonb,
                 ARRAY['type', '/data/object/id']) =
       idem_hash('{"/data/object/id":"ch_1","type":"charge.succeeded"}'::jsonb) AS pointer_field;
-- field order does not matter; a field's value may be any JSON value
SELECT idem_hash('{"a":{"y":2,"x":1},"b":[1,{"c":null}],"z":true}'::jsonb, ARRAY['z', '/b/1', 'a']) =
       idem_hash('{"a":{"x":1,"y":2},"/b/1":{"c":null},"z":true}'::jsonb) AS any_values,
       idem_hash('{"a":{"y":2,"x":1},"b":[1,{"c":null}],"z":true}'::jsonb, ARRAY['z', '/b/1', 'a']) =
       idem_hash('{"a":{"y":2,"x":1},"b":[1,{"c":null}],"z":true}'::jsonb, ARRAY['a', 'z', '/b/1']) AS field_order;
-- RFC 6901 escapes: ~1 is "/", ~0 is "~"; "/" alone is the member ""; a
-- name without a leading "/" is taken literally
SELECT idem_hash('{"a/b":{"m~n":5},"":7,"x/y":8}'::jsonb, ARRAY['/a~1b/m~0n', '/', 'x/y']) =
       idem_hash('{"/a~1b/m~0n":5,"/":7,"x/y":8}'::jsonb) AS pointer_escapes;
-- array indexes in a pointer (RFC 6901): "0", or digits without a leading
-- zero, inside the array; any other token finds no element.  Generated:
-- the empty token, every token of one or two printable ASCII characters
-- ("/" and "~" aside), and longer ones up to and past 9 digits and 2^32, against
-- [10, 20, 30], compared with that rule: none found that the rule does not
-- find, none missed, and each found one the element the rule names
CREATE FUNCTION pg_temp.pointer_index(tok text) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
	doc jsonb := '{"a":[10,20,30]}';
	h text;
BEGIN
	h := idem_hash(doc, ARRAY['/a/' || tok]);
	FOR i IN 0..2 LOOP
		IF h = idem_hash(jsonb_build_object('/a/' || tok, doc->'a'->i)) THEN
			RETURN i;
		END IF;
	END LOOP;
	RETURN -1;			-- found, but not an element of the array
EXCEPTION WHEN invalid_parameter_value THEN
	RETURN NULL;		-- "missing from the document"
END $$;
WITH chars AS (
	SELECT chr(c) AS ch FROM generate_series(32, 126) c WHERE chr(c) NOT IN ('/', '~')),
tokens AS (
	SELECT ch AS tok FROM chars
	UNION ALL SELECT a.ch || b.ch FROM chars a, chars b
	UNION ALL SELECT unnest(ARRAY['', '000', '001', '010', '100', '0000000001', '999999999',
		'1000000000', '4294967296', '4294967297', '4294967298', '18446744073709551616', '2 ', ' 2', '+2', '2.0', '2e0'])),
judged AS (
	SELECT tok, pg_temp.pointer_index(tok) AS found,
		   CASE WHEN tok ~ '^(0|[1-9][0-9]*)$' AND tok::numeric < 3 THEN tok::int END AS rule
	  FROM tokens)
SELECT count(*) AS tokens,
	   count(*) FILTER (WHERE rule IS NOT NULL) AS elements,
	   count(*) FILTER (WHERE found IS DISTINCT FROM rule) AS disagreements,
	   string_agg(quote_literal(tok), ', ') FILTER (WHERE found IS DISTINCT FROM rule) AS which
  FROM judged;
-- other fields of the document do not change the hash
SELECT idem_hash('{"id":"evt_1","delivery":1}'::jsonb, ARRAY['id']) =
       idem_hash('{"id":"evt_1","delivery":2}'::jsonb, ARRAY['id']) AS other_fields_ignored;
-- a null value is present, not missing
SELECT idem_hash('{"id":null}'::jsonb, ARRAY['id']) = idem_hash('{"id":null}'::jsonb) AS null_value;
-- numbers => applies to the fields
SELECT idem_hash('{"id":12345678901234567890}'::jsonb, ARRAY['id'], 'rfc') =
       idem_hash('{"id":12345678901234567000}'::jsonb, ARRAY['id']) AS fields_rfc;

-- a NULL document gives NULL; a NULL numbers or fields is an error (22004),
-- never a NULL hash that would turn a fingerprint check off
SELECT idem_canonical(NULL::jsonb) IS NULL AS c1, idem_hash(NULL::json) IS NULL AS h1,
       idem_hash(NULL::jsonb, ARRAY['id']) IS NULL AS f1;
SELECT idem_hash('{}'::jsonb, NULL::text[]);
SELECT idem_hash('{}'::jsonb, NULL::text);
SELECT idem_hash('{}'::json, NULL::text);
SELECT idem_canonical('{}'::jsonb, NULL::text);
SELECT idem_canonical('{}'::json, NULL::text);
SELECT idem_hash('{"id": 1}'::jsonb, ARRAY['id'], NULL::text);

-- declared properties
SELECT p.oid::regprocedure AS function, p.provolatile, p.proisstrict, p.proparallel,
       pg_catalog.has_function_privilege('public', p.oid, 'EXECUTE') AS public_execute,
       obj_description(p.oid, 'pg_proc') IS NOT NULL AS commented
  FROM pg_proc p
 WHERE p.proname IN ('idem_canonical', 'idem_hash')
 ORDER BY p.proname, p.pronargs, p.proargtypes[0] = 'json'::regtype;

-- deep nesting works
CREATE TEMP TABLE canonical_deep AS
  SELECT (repeat('{"a":[', 3000) || '1' || repeat(']}', 3000)) AS t;
SELECT length(idem_canonical(t::jsonb)) AS jsonb_len, length(idem_canonical(t::json)) AS json_len,
       idem_hash(t::jsonb) = idem_hash(t::json) AS same_hash
  FROM canonical_deep;

\if :canonical_created
DROP EXTENSION idem_gate;
\endif
