--
-- Edges of the json text parser (idem_canonical(json), idem_hash(json)) and
-- of number formatting: whitespace, literals, numbers, escapes, surrogate
-- bounds, index growth, and the 'safe' policy's bounds.  jsonb has its own
-- parser, so for every document without duplicate names or \u0000 the two
-- must agree: that is the oracle of most checks here.
--
-- Leave the database as found: the other suites expect to create idem_gate.
SELECT NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'idem_gate') AS jte_created \gset
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idem_gate;
RESET client_min_messages;

-- Run a statement and show how it fails.
CREATE FUNCTION pg_temp.jte_error(q text, OUT state text, OUT message text, OUT detail text)
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE q;
	state := 'no error';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT,
		detail = PG_EXCEPTION_DETAIL;
END $$;
-- The canonical form under a policy, or the SQLSTATE that refuses it.
CREATE FUNCTION pg_temp.jte_try(doc json, policy text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	RETURN idem_canonical(doc, policy);
EXCEPTION WHEN OTHERS THEN
	RETURN 'ERROR ' || SQLSTATE;
END $$;
-- Text as ASCII: other characters as octal escapes of their UTF-8 bytes.
CREATE FUNCTION pg_temp.jte_ascii(t text) RETURNS text
LANGUAGE sql AS $$
	SELECT CASE WHEN t ~ '^[ -~]*$' THEN t
		   ELSE encode(convert_to(t, 'UTF8'), 'escape') END $$;

------------------------------------------------------------------------
-- documents: the json result, and whether jsonb's parser agrees
------------------------------------------------------------------------
SELECT d AS doc, pg_temp.jte_ascii(idem_canonical(d::json)) AS canonical,
	   idem_canonical(d::json) = idem_canonical(d::jsonb) AS agrees
  FROM unnest(ARRAY[
	-- whitespace of every kind, around and inside every structure
	E' \t\r\n{ \t"b" \r\n: \t[ 1 ,\n2 ] , "a" :{ } , "c":[ ]\t}\n\r ',
	E'[\n]', E'{\r}', E'\t[ [ ] , { } , [ { } ] ]', '  "x"  ', E'\n0\n',
	-- literals everywhere
	'true', 'false', 'null', ' true ', '[true,false,null]',
	'{"t":true,"f":false,"n":null}', '[[true],[false],[null]]',
	'{"a":[null,{"b":false}],"c":true}',
	-- numbers as the json text parser scans them
	'[0,-0,0.5,-0.5e-3,1E5,1e+5,1E-5,10,-10.25,0e0,-0E+0,0.0e7]',
	'{"n":-1.5E+3,"m":100e-2,"o":1.000e3,"p":0.00123,"q":-0.0012e3}',
	'[1,-1,9,-9,19,90,1e1,2E+1,3e-1,40e-1]',
	-- escapes: short ones, and \u with every class of hex digit
	'"\b\f\n\r\t\"\\\/"', '["\u0041\u005a\u0061\u007a","\u0030\u0039"]',
	'"\u00e9\u00E9\u20ac\u20AC\uabcd\uABCD\uffFF\u0fA9"',
	'"a\u0062c\\d\"e\/f"', '{"\u0062":1,"a":2,"\u0063\u0061":3}',
	'{"k\n":1,"k\t":2,"k\"":3,"k\\":4,"k/":5,"k\/x":6}',
	'"\u0001\u001f\u007e\u0080"',
	-- surrogates: the first and last pair, and the code points just outside
	'"\ud800\udc00"', '"\udbff\udfff"', '"\uD800\uDC00\uDBFF\uDFFF"',
	'"\ud7ff\ue000"', '"x\ud83d\ude00y"', '{"\ud83d\ude00":1,"\ue000":2,"\uffff":3}',
	-- plain strings next to escaped ones
	'["plain","esc\n","plain again",""]',
	'{"":{"":[""]}}'
  ]) d;

-- every ASCII character alone in a string, through both parsers: the
-- RFC 8785 short escapes, \u00xx for the other controls, the rest raw
SELECT count(*) AS ascii_checked,
	   count(*) FILTER (WHERE idem_canonical(to_jsonb(chr(i))) = e AND idem_canonical(to_json(chr(i))) = e) AS ascii_ok,
	   string_agg(i::text, ',') FILTER (WHERE idem_canonical(to_jsonb(chr(i))) <> e OR idem_canonical(to_json(chr(i))) <> e) AS wrong
  FROM generate_series(1, 127) i,
	   LATERAL (SELECT '"' || CASE i WHEN 8 THEN '\b' WHEN 9 THEN '\t' WHEN 10 THEN '\n' WHEN 12 THEN '\f'
							  WHEN 13 THEN '\r' WHEN 34 THEN '\"' WHEN 92 THEN '\\'
							  ELSE CASE WHEN i < 32 THEN '\u00' || lpad(to_hex(i), 2, '0') ELSE chr(i) END
						 END || '"' AS e) x;

-- the last code point, from the issue
SELECT idem_canonical('"\udbff\udfff"'::json) = U&'"\+10FFFF"' AS last_code_point,
	   idem_canonical('"\ud800\udc00"'::json) = U&'"\+010000"' AS first_astral;

-- index growth: more objects than the first index holds (64), an object
-- with more members than the first member arrays hold (256), members
-- pending in outer objects while inner ones are parsed, deep arrays
SELECT n, length(idem_canonical(d::json)) AS len,
	   idem_canonical(d::json) = idem_canonical(d::jsonb) AS agrees
  FROM (SELECT 'objects' AS n,
			   (SELECT json_agg(json_build_object('b', i, 'a', -i))::text
				  FROM generate_series(1, 200) i) AS d
		UNION ALL
		SELECT 'members',
			   (SELECT json_object_agg('k' || (1000 - i), i)::text
				  FROM generate_series(1, 600) i)
		UNION ALL
		SELECT 'nested members',
			   (SELECT json_object_agg('o' || i, json_build_object('y', i, 'x', json_build_object('q', i)))::text
				  FROM generate_series(1, 300) i)
		UNION ALL
		SELECT 'mixed',
			   (SELECT json_agg(json_build_object('s', 'v\n' || i, 'l', json_build_array(true, false, null, i * 1.5, '\u00e9')))::text
				  FROM generate_series(1, 150) i)) t;

------------------------------------------------------------------------
-- numbers: ECMAScript layout bounds, the fast path's bounds, exponent
-- parsing, rounding; the same for json and jsonb
------------------------------------------------------------------------
SELECT n, safe, rfc,
	   idem_canonical(n::json, 'rfc') = idem_canonical(n::jsonb, 'rfc') AS agrees,
	   pg_temp.jte_try(('[' || n || ']')::json, 'safe') =
	   CASE WHEN safe LIKE 'ERROR%' THEN safe ELSE '[' || safe || ']' END AS in_array
  FROM unnest(ARRAY[
	'1e20', '1.5e20', '123456789012345678', '1e21', '1.2345e21', '12345e17',
	'0.000001', '0.0000015', '1.5e-6', '1e-7', '1.5e-7', '0.00000099',
	'1e9', '1e10', '1e99', '1e100', '1.5e100', '1e-99', '1e-100', '1.5e-100', '1e308',
	'12.5', '0.5', '-0.5', '123.456e2', '1.2300', '1200', '1.2e3',
	'1e-289', '1e-290', '1e-291', '1.5e299', '1.5e300', '1.5e301', '123456789012345e-300',
	'0.30000000000000004', '1.00000000000000011', '123456789.123456789',
	'100000000000000000000000e-3', '0.0000000000000000000001e22',
	'1e0', '1e-0', '1E+00',
	'4.9406564584124654e-324', '2.2250738585072014e-308', '1.7976931348623157e308',
	'9007199254740991', '-9007199254740991', '9007199254740992', '-9007199254740992',
	'9007199254740991.5', '-9007199254740991.5', '9007199254740991.1', '9007199254740990.9',
	'4503599627370495.5', '4503599627370496.5', '18014398509481984', '1e16', '1e17', '1e22', '1e23'
  ]) n,
	   LATERAL (SELECT pg_temp.jte_try(n::json, 'safe') AS safe, pg_temp.jte_try(n::json, 'rfc') AS rfc) r;

-- zero with an exponent jsonb cannot hold
SELECT idem_canonical('[0e999999999999999999,-0.0e-999999999999999999]'::json) AS zeros;

-- the 'safe' bound is 2^53 itself: 2^53 - 1 plus a fraction rounds to a
-- double below 2^53 or to 2^53, and either is fine
SELECT idem_canonical('9007199254740991.5'::jsonb) AS jsonb_half,
	   idem_canonical('[9007199254740991.1]'::json) AS json_tenth,
	   idem_canonical('9007199254740991.9'::json) AS json_nine_tenths;
-- at and above 2^53 a number must be exact
SELECT * FROM pg_temp.jte_error($$ SELECT idem_canonical('9007199254740992.5'::json) $$);
SELECT * FROM pg_temp.jte_error($$ SELECT idem_canonical('[-9007199254740993]'::jsonb) $$);
SELECT idem_canonical('9007199254740993'::json, 'rfc') AS rfc_rounds,
	   idem_canonical('9007199254740994'::json) AS exact_is_fine;
-- below 2^-1022 (subnormal) a number must be exact; 2^-1022 itself is normal
SELECT * FROM pg_temp.jte_error($$ SELECT idem_canonical('2.2250738585072011e-308'::json) $$);
SELECT idem_canonical('2.2250738585072011e-308'::json, 'rfc') AS rfc_subnormal,
	   idem_canonical('2.2250738585072013830902327173324040642192159804623318306e-308'::json) AS exact_two_m1022;
-- far beyond the double range, both ways
SELECT * FROM pg_temp.jte_error($$ SELECT idem_canonical('1e310'::json) $$);
SELECT * FROM pg_temp.jte_error($$ SELECT idem_canonical('-1e99999999999999999999'::json, 'rfc') $$);
SELECT * FROM pg_temp.jte_error($$ SELECT idem_canonical('1e-99999999999999999999'::json) $$);
SELECT idem_canonical('[1e-99999999999999999999,-1e-400]'::json, 'rfc') AS rfc_underflow;
-- long numbers are abbreviated in messages
SELECT * FROM pg_temp.jte_error($$ SELECT idem_canonical(('1' || repeat('0', 50) || '1')::json) $$);
SELECT * FROM pg_temp.jte_error($$ SELECT idem_canonical(('1' || repeat('0', 40) || '1')::json) $$);
-- up to 40 characters a number is shown as written
SELECT * FROM pg_temp.jte_error($$ SELECT idem_canonical(('1' || repeat('0', 38) || '1')::json) $$);
SELECT * FROM pg_temp.jte_error($$ SELECT idem_canonical(('1' || repeat('0', 39) || '1')::json) $$);
SELECT * FROM pg_temp.jte_error($$ SELECT idem_canonical(('-1' || repeat('0', 37) || '1')::json) $$);
-- 10^50 is not a double, but its shortest form is: that is not a loss
SELECT idem_canonical(('1' || repeat('0', 50))::json) AS ten_to_fifty;
SELECT * FROM pg_temp.jte_error($$ SELECT idem_canonical(('-12345678901234567' || repeat('0', 30))::json) $$);
SELECT * FROM pg_temp.jte_error($$ SELECT idem_canonical(('0.' || repeat('0', 400) || '12345678901234567890123')::json) $$);
-- up to 20 significant digits a long number is shown with all of them
SELECT * FROM pg_temp.jte_error($$ SELECT idem_canonical(('0.' || repeat('0', 400) || '12345678901234567891')::json) $$);

------------------------------------------------------------------------
-- what only the json parser refuses: lone or broken surrogates and
-- duplicate names, also when spelled with escapes
------------------------------------------------------------------------
SELECT d, (pg_temp.jte_error(format('SELECT idem_canonical(%L::json)', d))).*
  FROM unnest(ARRAY[
	'"\ud800"', '"\udbff"', '"\udc00"', '"\udfff"', '["ok","x\udfff"]',
	'"\ud800x"', '"\ud800\u0041"', '"\ud800\ud800"', '"\ud800\udbff"',
	'"\udbff\ue000"', '"\ud800\\"', '{"\ud800":1}',
	'{"a":1,"\u0061":2}', '{"\u0061":1,"a":2}', '{"ab":1,"a\u0062":2}',
	'{"x":{"k":1},"y":{"k":1,"j":2,"k":3}}', '{"":1,"":2}'
  ]) d;

\if :jte_created
DROP EXTENSION idem_gate;
\endif
