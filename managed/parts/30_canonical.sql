/*
 * idem_gate managed edition: RFC 8785 (JCS) canonical JSON, the C
 * edition's src/canonical.c, src/jcs.c, src/jcs_jsonb.c, src/jcs_json.c
 * and src/jcs_json_lex.c in SQL and PL/pgSQL; numbers are in
 * 31_canonical_number.sql, as src/jcs_number.c.
 *
 * idem_canonical and idem_hash must give the C edition's answers byte for
 * byte, and refuse what it refuses with the same SQLSTATE, message, detail
 * and hint: a workflow moved between the editions must keep its keys and
 * fingerprints.  docs/canonical.md is the reference for both.
 *
 * The C edition walks a document recursively.  Here a document is walked
 * by one recursive query (WITH RECURSIVE), which needs no stack per level:
 * every value gets a sort key, the concatenation of one component per
 * level (a member name's sort key ended by a 0 byte, or an array index as
 * 4 big-endian bytes), so that ordering the values by their sort keys
 * gives the canonical order, members by UTF-16 code units included.  Each
 * container also gets a closing token (its sort key and 0xFF, which sorts
 * after all its members), and the text is the concatenation of the tokens
 * in that order, with a comma before every token that follows a value.
 *
 * Every function pins search_path, and every literal holding a backslash
 * is an E'' string, so that no setting of the caller changes an answer;
 * the number formatter also pins extra_float_digits.  The helpers live in
 * schema idem_gate and are not executable by PUBLIC: only the five SQL
 * functions of the contract are.  Those five are SECURITY DEFINER, so that
 * a caller needs neither USAGE on idem_gate nor EXECUTE on a helper (as
 * with the C edition, everyone may call them); they read no table and run
 * no dynamic SQL, so their owner's rights give a caller nothing else.
 */

/*
 * A string shown in a message, as jcs_display(): clipped to 64 characters,
 * control characters written as \u00xx, so that a message stays one
 * readable line whatever a member name holds.
 */
CREATE FUNCTION idem_gate.jcs_display(s pg_catalog.text)
	RETURNS pg_catalog.text
	LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	r text := s;
	c integer;
BEGIN
	IF char_length(r) > 64 THEN
		r := left(r, 61) || '...';
	END IF;
	IF r ~ E'[\\x01-\\x1f]' THEN
		FOR c IN 1 .. 31 LOOP
			r := replace(r, chr(c), E'\\u00' || lpad(to_hex(c), 2, '0'));
		END LOOP;
	END IF;
	RETURN r;
END
$$;
REVOKE ALL ON FUNCTION idem_gate.jcs_display(pg_catalog.text) FROM PUBLIC;

/*
 * The checks every canonical JSON function makes first, in the C
 * edition's order: a UTF8 database (canonical JSON is UTF-8 text, and
 * other encodings cannot hold every string), then the numbers argument,
 * which may not be NULL so that a fingerprint is never silently missing.
 */
CREATE FUNCTION idem_gate.jcs_check_args(numbers pg_catalog.text)
	RETURNS void
	LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	IF getdatabaseencoding() <> 'UTF8' THEN
		RAISE EXCEPTION USING ERRCODE = '0A000',
			MESSAGE = 'canonical JSON needs a UTF8 database',
			DETAIL = format('The database encoding is %s; RFC 8785 canonical JSON is UTF-8 text.',
							getdatabaseencoding()),
			HINT = 'Create the database with ENCODING ''UTF8''.';
	END IF;
	IF numbers IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = '22004',
			MESSAGE = 'numbers must not be null',
			HINT = 'Use numbers => ''safe'' (the default) or numbers => ''rfc''.';
	END IF;
	IF numbers <> 'safe' AND numbers <> 'rfc' THEN
		RAISE EXCEPTION USING ERRCODE = '22023',
			MESSAGE = format('unknown numbers policy "%s"', idem_gate.jcs_display(numbers)),
			HINT = 'Use numbers => ''safe'' (the default: refuse a number that a double would change at or beyond 2^53 or below 2^-1022) or numbers => ''rfc'' (round every number to the nearest double).';
	END IF;
END
$$;
REVOKE ALL ON FUNCTION idem_gate.jcs_check_args(pg_catalog.text) FROM PUBLIC;

/*
 * The sort key of a member name: its UTF-8 bytes, ended by a 0 byte, which
 * no name holds, so that a name sorts before every longer name it begins.
 * UTF-8 byte order is code point order, which differs from RFC 8785's
 * UTF-16 code unit order only where a name holds U+E000..U+FFFF: those
 * come after the supplementary characters in UTF-16.  Such a name (and one
 * holding U+10FFFF, so that all are coded alike) is first rewritten with
 * U+10FFFF + U+0001 for U+10FFFF and U+10FFFF + c for each c in
 * U+E000..U+FFFF: an order-preserving prefix code that puts them last.
 * (jcs_canonical_json rewrites the stand-in of U+0000 the same way before
 * calling this, so that it sorts first.)
 */
CREATE FUNCTION idem_gate.jcs_sort_key(k pg_catalog.text)
	RETURNS pg_catalog.bytea
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $$
SELECT convert_to(
	CASE WHEN k ~ E'[\\uE000-\\uFFFF\\U0010FFFF]' THEN
		regexp_replace(replace(k, chr(1114111), chr(1114111) || chr(1)),
					   E'([\\uE000-\\uFFFF])', chr(1114111) || E'\\1', 'g')
	ELSE k END, 'UTF8') || E'\\x00'::bytea
$$;
REVOKE ALL ON FUNCTION idem_gate.jcs_sort_key(pg_catalog.text) FROM PUBLIC;

/*
 * The canonical form of a jsonb document, as jcs_emit_jsonb() writes it.
 * jsonb has already dropped duplicate member names and refused lone
 * surrogates and U+0000, and its text output of a string is exactly RFC
 * 8785's (short escapes for \b \t \n \f \r " \, \u00xx in lowercase for
 * the other control characters, everything else raw), so only member
 * order and numbers are work.  path is where doc sits in the document the
 * caller was given, as JSON pointer text without its quotes ('' for the
 * top level), for the message of a refused number.
 *
 * An integer of at most 15 digits, or a plain decimal of at most 15
 * significant digits with no trailing zero and |x| >= 1e-6, is its own RFC
 * 8785 form; the rest go to jcs_number().  Of the refused numbers the
 * first in canonical order is the one reported, as the C edition stops
 * at the first it writes.  The sort key of a member name is
 * jcs_sort_key()'s, written out: a function call per member would cost
 * more than the rest of the walk.
 */
CREATE FUNCTION idem_gate.jcs_canonical_jsonb(doc pg_catalog.jsonb, numbers pg_catalog.text,
											  path pg_catalog.text)
	RETURNS pg_catalog.text
	LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	res text;
	bad bool;
	badnum text;
	badpath text;
BEGIN
	/*
	 * The walk: each row is a value or the end of a container, with its
	 * token (a comma when it is not the first, its member name, and its
	 * text or its opening bracket).
	 */
	WITH RECURSIVE t(sk, v, typ, s) AS (
		SELECT ''::bytea, doc, jsonb_typeof(doc),
			   CASE jsonb_typeof(doc) WHEN 'object' THEN '{' WHEN 'array' THEN '['
				WHEN 'number' THEN
					CASE WHEN doc::text ~ '^(0|-?[1-9][0-9]{0,14})$' OR
							  (doc::text ~ E'^-?([1-9][0-9]*\\.[0-9]*[1-9]|0\\.0{0,5}[1-9]([0-9]*[1-9])?)$' AND
							   length(doc::text) <= 16)
						 THEN doc::text
						 ELSE idem_gate.jcs_number(doc::text, numbers) END
				ELSE doc::text END
	UNION ALL
		SELECT t.sk || c.sk, c.v, c.typ, c.s
		  FROM t CROSS JOIN LATERAL (
				SELECT m.sk, m.v, m.typ,
					   CASE WHEN row_number() OVER (ORDER BY m.sk) > 1 THEN ',' ELSE '' END ||
					   m.pre || m.tok AS s
				  FROM (SELECT convert_to(CASE WHEN e.key ~ E'[\\uE000-\\uFFFF\\U0010FFFF]' THEN
									regexp_replace(replace(e.key, chr(1114111), chr(1114111) || chr(1)),
												   E'([\\uE000-\\uFFFF])', chr(1114111) || E'\\1', 'g')
								ELSE e.key END, 'UTF8') || E'\\x00'::bytea AS sk,
							   e.value AS v, jsonb_typeof(e.value) AS typ,
							   to_json(e.key)::text || ':' AS pre,
							   CASE jsonb_typeof(e.value) WHEN 'object' THEN '{' WHEN 'array' THEN '['
								WHEN 'number' THEN
									CASE WHEN e.value::text ~ '^(0|-?[1-9][0-9]{0,14})$' OR
											  (e.value::text ~ E'^-?([1-9][0-9]*\\.[0-9]*[1-9]|0\\.0{0,5}[1-9]([0-9]*[1-9])?)$' AND
											   length(e.value::text) <= 16)
										 THEN e.value::text
										 ELSE idem_gate.jcs_number(e.value::text, numbers) END
								ELSE e.value::text END AS tok
						  FROM jsonb_each(CASE WHEN t.typ = 'object' THEN t.v END) AS e) AS m
			UNION ALL
				SELECT int4send((a.i - 1)::int4), a.value, jsonb_typeof(a.value),
					   CASE WHEN a.i > 1 THEN ',' ELSE '' END ||
					   CASE jsonb_typeof(a.value) WHEN 'object' THEN '{' WHEN 'array' THEN '['
						WHEN 'number' THEN
							CASE WHEN a.value::text ~ '^(0|-?[1-9][0-9]{0,14})$' OR
									  (a.value::text ~ E'^-?([1-9][0-9]*\\.[0-9]*[1-9]|0\\.0{0,5}[1-9]([0-9]*[1-9])?)$' AND
									   length(a.value::text) <= 16)
								 THEN a.value::text
								 ELSE idem_gate.jcs_number(a.value::text, numbers) END
						ELSE a.value::text END
				  FROM jsonb_array_elements(CASE WHEN t.typ = 'array' THEN t.v END)
					   WITH ORDINALITY AS a(value, i)
			UNION ALL
				SELECT E'\\xff'::bytea, NULL, 'end', CASE t.typ WHEN 'object' THEN '}' ELSE ']' END
			) AS c
		 WHERE t.typ IN ('object', 'array')
	)
	SELECT string_agg(t.s, '' ORDER BY t.sk), bool_or(t.s IS NULL)
	  INTO res, bad
	  FROM t;
	IF NOT bad THEN
		RETURN res;
	END IF;

	/* A refused number: the walk again, to find the first and where it is. */
	WITH RECURSIVE t(sk, pre, v, typ, pkey, pidx) AS (
		SELECT ''::bytea, '', doc, jsonb_typeof(doc), NULL::text, NULL::int4
	UNION ALL
		SELECT t.sk || c.sk, c.pre, c.v, jsonb_typeof(c.v), c.pkey, c.pidx
		  FROM t CROSS JOIN LATERAL (
				SELECT convert_to(CASE WHEN e.key ~ E'[\\uE000-\\uFFFF\\U0010FFFF]' THEN
							regexp_replace(replace(e.key, chr(1114111), chr(1114111) || chr(1)),
										   E'([\\uE000-\\uFFFF])', chr(1114111) || E'\\1', 'g')
						ELSE e.key END, 'UTF8') || E'\\x00'::bytea AS sk,
					   to_json(e.key)::text || ':' AS pre, e.value AS v,
					   e.key AS pkey, NULL::int4 AS pidx
				  FROM jsonb_each(CASE WHEN t.typ = 'object' THEN t.v END) AS e
			UNION ALL
				SELECT int4send((a.i - 1)::int4), '', a.value, NULL, (a.i - 1)::int4
				  FROM jsonb_array_elements(CASE WHEN t.typ = 'array' THEN t.v END)
					   WITH ORDINALITY AS a(value, i)
			) AS c
		 WHERE t.typ IN ('object', 'array')
	), tok AS (
		SELECT sk, typ IN ('object', 'array') AS open, false AS close,
			   pre || CASE typ
				WHEN 'object' THEN '{'
				WHEN 'array' THEN '['
				WHEN 'number' THEN
					CASE WHEN v::text ~ '^(0|-?[1-9][0-9]{0,14})$' OR
							  (v::text ~ E'^-?([1-9][0-9]*\\.[0-9]*[1-9]|0\\.0{0,5}[1-9]([0-9]*[1-9])?)$' AND
							   length(v::text) <= 16)
						 THEN v::text
						 ELSE idem_gate.jcs_number(v::text, numbers) END
				ELSE v::text END AS s
		  FROM t
		UNION ALL
		SELECT sk || E'\\xff'::bytea, false, true, CASE typ WHEN 'object' THEN '}' ELSE ']' END
		  FROM t
		 WHERE typ IN ('object', 'array')
	), agg AS (
		SELECT string_agg(CASE WHEN NOT close AND prev_open IS NOT NULL AND NOT prev_open
							   THEN ',' || s ELSE s END, '' ORDER BY sk) AS res,
			   (array_agg(sk ORDER BY sk) FILTER (WHERE s IS NULL))[1] AS bad
		  FROM (SELECT sk, close, s, lag(open) OVER (ORDER BY sk) AS prev_open FROM tok) AS x
	)
	SELECT agg.res,
		   (SELECT t.v::text FROM t WHERE agg.bad IS NOT NULL AND t.sk = agg.bad),
		   (SELECT string_agg('/' || coalesce(t.pidx::text,
					replace(replace(idem_gate.jcs_display(t.pkey), '~', '~0'), '/', '~1')),
					'' ORDER BY length(t.sk))
			  FROM t
			 WHERE agg.bad IS NOT NULL AND t.sk <> ''::bytea
			   AND t.sk = substring(agg.bad FROM 1 FOR length(t.sk)))
	  INTO res, badnum, badpath
	  FROM agg;

	badpath := path || coalesce(badpath, '');
	PERFORM idem_gate.jcs_number_error(badnum, numbers,
		CASE WHEN badpath = '' THEN 'the top level of the document'
			 ELSE 'JSON pointer "' || badpath || '"' END);
	RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION idem_gate.jcs_canonical_jsonb(pg_catalog.jsonb, pg_catalog.text, pg_catalog.text) FROM PUBLIC;

/*
 * The canonical form of a json (text) document, as jcs_emit_json_text()
 * writes it.  json keeps the text as it came, so this is where the
 * refusals of the C edition's json parser are made, before anything is
 * written, as its first pass does:
 *
 * - a lone UTF-16 surrogate escape (json_in accepts them; RFC 8785 needs
 *   valid Unicode), named with its byte position;
 * - a member name given twice in one object (jsonb would keep the last
 *   value silently, hashing a document the sender did not mean).
 *
 * Escapes are found as the C lexer finds them: after each "\\" pair is
 * replaced by two other characters of the same length, every backslash
 * left begins an escape.  \u0000, which json allows and text cannot hold,
 * is replaced by a noncharacter the document does not contain, which
 * stands for U+0000 until the text is written (it sorts first, and is
 * written \u0000).  Strings without a backslash are already in RFC 8785
 * form (json_in refuses raw control characters); the others are decoded
 * and escaped again.  Numbers are read from their text, never through
 * numeric, so that 1e999999 is refused as the C edition refuses it.
 */
CREATE FUNCTION idem_gate.jcs_canonical_json(doc pg_catalog.json, numbers pg_catalog.text)
	RETURNS pg_catalog.text
	LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	src text := doc::text;
	jdoc json := doc;
	plain text;
	m text[];
	nul text;
	bs text;
	c int4;
	res text;
	bad bool;
	dupkey text;
	badnum text;
	badpath text;
BEGIN
	IF strpos(src, E'\\') > 0 THEN
		plain := replace(src, E'\\\\', '..');
		/* lone surrogates: drop the valid pairs, then look for any left */
		IF plain ~ E'\\\\u[dD][89a-fA-F]' THEN
			m := regexp_match(
				regexp_replace(plain, E'\\\\u[dD][89abAB][0-9a-fA-F]{2}\\\\u[dD][c-fC-F][0-9a-fA-F]{2}',
							   '............', 'g'),
				E'^(.*?)\\\\u([dD][89a-fA-F][0-9a-fA-F]{2})');
			IF m IS NOT NULL THEN
				RAISE EXCEPTION USING ERRCODE = '22P02',
					MESSAGE = 'invalid input syntax for type json',
					DETAIL = format(E'The escape \\u%s at byte %s is a lone UTF-16 surrogate; canonical JSON needs valid Unicode.',
									lower(m[2]), octet_length(m[1]) + 1),
					HINT = E'A high surrogate \\ud800-\\udbff must be followed by a low surrogate \\udc00-\\udfff.';
			END IF;
		END IF;
		/* U+0000: a stand-in the document holds neither raw nor escaped */
		IF strpos(plain, E'\\u0000') > 0 THEN
			FOR c IN 64976 .. 65007 LOOP
				CONTINUE WHEN strpos(src, chr(c)) > 0 OR src ~* (E'\\\\u' || to_hex(c));
				IF nul IS NULL THEN
					nul := chr(c);
				ELSE
					bs := chr(c);
					EXIT;
				END IF;
			END LOOP;
			src := replace(replace(replace(src, E'\\\\', bs), E'\\u0000', nul), bs, E'\\\\');
			jdoc := src::json;
		END IF;
	END IF;

	/*
	 * The walk, as in jcs_canonical_jsonb(), each member also telling
	 * whether its name is given twice in its object.
	 */
	WITH RECURSIVE t(sk, v, typ, s, dup) AS (
		SELECT ''::bytea, jdoc, json_typeof(jdoc), CASE json_typeof(jdoc) WHEN 'object' THEN '{' WHEN 'array' THEN '['
						WHEN 'string' THEN CASE WHEN strpos(jdoc::text, E'\\') = 0 THEN btrim(jdoc::text, E' \t\n\r')
						 ELSE to_json(jdoc #>> '{}')::text END
						WHEN 'number' THEN CASE WHEN jdoc::text ~ '^(0|-?[1-9][0-9]{0,14})$' OR
							  (jdoc::text ~ E'^-?([1-9][0-9]*\\.[0-9]*[1-9]|0\\.0{0,5}[1-9]([0-9]*[1-9])?)$' AND
							   length(jdoc::text) <= 16)
						 THEN jdoc::text
						 ELSE idem_gate.jcs_number(btrim(jdoc::text, E' \t\n\r'), numbers) END
						ELSE btrim(jdoc::text, E' \t\n\r') END, false
	UNION ALL
		SELECT t.sk || c.sk, c.v, c.typ, c.s, c.dup
		  FROM t CROSS JOIN LATERAL (
				SELECT m.sk, m.v, json_typeof(m.v) AS typ,
					   CASE WHEN row_number() OVER (ORDER BY m.sk) > 1 THEN ',' ELSE '' END ||
					   m.pre || CASE json_typeof(m.v) WHEN 'object' THEN '{' WHEN 'array' THEN '['
						WHEN 'string' THEN CASE WHEN strpos(m.v::text, E'\\') = 0 THEN btrim(m.v::text, E' \t\n\r')
						 ELSE to_json(m.v #>> '{}')::text END
						WHEN 'number' THEN CASE WHEN m.v::text ~ '^(0|-?[1-9][0-9]{0,14})$' OR
							  (m.v::text ~ E'^-?([1-9][0-9]*\\.[0-9]*[1-9]|0\\.0{0,5}[1-9]([0-9]*[1-9])?)$' AND
							   length(m.v::text) <= 16)
						 THEN m.v::text
						 ELSE idem_gate.jcs_number(btrim(m.v::text, E' \t\n\r'), numbers) END
						ELSE btrim(m.v::text, E' \t\n\r') END AS s,
					   count(*) OVER (PARTITION BY m.sk) > 1 AS dup
				  FROM (SELECT convert_to(CASE WHEN k.k ~ E'[\\uE000-\\uFFFF\\U0010FFFF]' THEN
									regexp_replace(replace(k.k, chr(1114111), chr(1114111) || chr(1)),
												   E'([\\uE000-\\uFFFF])', chr(1114111) || E'\\1', 'g')
								ELSE k.k END, 'UTF8') || E'\\x00'::bytea AS sk,
							   e.value AS v, to_json(e.key)::text || ':' AS pre
						  FROM json_each(CASE WHEN t.typ = 'object' THEN t.v END) AS e,
							   LATERAL (SELECT CASE WHEN nul IS NULL THEN e.key
											ELSE replace(replace(e.key, chr(1), chr(1) || chr(2)),
														 nul, chr(1) || chr(1)) END) AS k(k)) AS m
			UNION ALL
				SELECT int4send((a.i - 1)::int4), a.value, json_typeof(a.value),
					   CASE WHEN a.i > 1 THEN ',' ELSE '' END || CASE json_typeof(a.value) WHEN 'object' THEN '{' WHEN 'array' THEN '['
						WHEN 'string' THEN CASE WHEN strpos(a.value::text, E'\\') = 0 THEN btrim(a.value::text, E' \t\n\r')
						 ELSE to_json(a.value #>> '{}')::text END
						WHEN 'number' THEN CASE WHEN a.value::text ~ '^(0|-?[1-9][0-9]{0,14})$' OR
							  (a.value::text ~ E'^-?([1-9][0-9]*\\.[0-9]*[1-9]|0\\.0{0,5}[1-9]([0-9]*[1-9])?)$' AND
							   length(a.value::text) <= 16)
						 THEN a.value::text
						 ELSE idem_gate.jcs_number(btrim(a.value::text, E' \t\n\r'), numbers) END
						ELSE btrim(a.value::text, E' \t\n\r') END,
					   false
				  FROM json_array_elements(CASE WHEN t.typ = 'array' THEN t.v END)
					   WITH ORDINALITY AS a(value, i)
			UNION ALL
				SELECT E'\\xff'::bytea, NULL, 'end', CASE t.typ WHEN 'object' THEN '}' ELSE ']' END, false
			) AS c
		 WHERE t.typ IN ('object', 'array')
	)
	SELECT string_agg(t.s, '' ORDER BY t.sk), bool_or(t.s IS NULL OR t.dup)
	  INTO res, bad
	  FROM t;
	IF NOT bad THEN
		IF nul IS NOT NULL THEN
			res := replace(res, nul, E'\\u0000');
		END IF;
		RETURN res;
	END IF;

	/* A duplicate or a refused number: the walk again, to say which. */
	WITH RECURSIVE t(sk, pre, v, typ, pkey, pidx) AS (
		SELECT ''::bytea, '', jdoc, json_typeof(jdoc), NULL::text, NULL::int4
	UNION ALL
		SELECT t.sk || c.sk, c.pre, c.v, json_typeof(c.v), c.pkey, c.pidx
		  FROM t CROSS JOIN LATERAL (
				SELECT convert_to(CASE WHEN k.k ~ E'[\\uE000-\\uFFFF\\U0010FFFF]' THEN
							regexp_replace(replace(k.k, chr(1114111), chr(1114111) || chr(1)),
										   E'([\\uE000-\\uFFFF])', chr(1114111) || E'\\1', 'g')
						ELSE k.k END, 'UTF8') || E'\\x00'::bytea AS sk,
					   to_json(e.key)::text || ':' AS pre, e.value AS v,
					   e.key AS pkey, NULL::int4 AS pidx
				  FROM json_each(CASE WHEN t.typ = 'object' THEN t.v END) AS e,
					   LATERAL (SELECT CASE WHEN nul IS NULL THEN e.key
									ELSE replace(replace(e.key, chr(1), chr(1) || chr(2)),
												 nul, chr(1) || chr(1)) END) AS k(k)
			UNION ALL
				SELECT int4send((a.i - 1)::int4), '', a.value, NULL, (a.i - 1)::int4
				  FROM json_array_elements(CASE WHEN t.typ = 'array' THEN t.v END)
					   WITH ORDINALITY AS a(value, i)
			) AS c
		 WHERE t.typ IN ('object', 'array')
	), tok AS (
		SELECT sk, typ IN ('object', 'array') AS open, false AS close,
			   pre || CASE typ
				WHEN 'object' THEN '{'
				WHEN 'array' THEN '['
				WHEN 'string' THEN
					CASE WHEN strpos(v::text, E'\\') = 0 THEN btrim(v::text, E' \t\n\r')
						 ELSE to_json(v #>> '{}')::text END
				WHEN 'number' THEN
					CASE WHEN v::text ~ '^(0|-?[1-9][0-9]{0,14})$' OR
							  (v::text ~ E'^-?([1-9][0-9]*\\.[0-9]*[1-9]|0\\.0{0,5}[1-9]([0-9]*[1-9])?)$' AND
							   length(v::text) <= 16)
						 THEN v::text
						 ELSE idem_gate.jcs_number(btrim(v::text, E' \t\n\r'), numbers) END
				ELSE btrim(v::text, E' \t\n\r') END AS s
		  FROM t
		UNION ALL
		SELECT sk || E'\\xff'::bytea, false, true, CASE typ WHEN 'object' THEN '}' ELSE ']' END
		  FROM t
		 WHERE typ IN ('object', 'array')
	), agg AS (
		SELECT string_agg(CASE WHEN NOT close AND prev_open IS NOT NULL AND NOT prev_open
							   THEN ',' || s ELSE s END, '' ORDER BY sk) AS res,
			   (array_agg(sk ORDER BY sk) FILTER (WHERE s IS NULL))[1] AS bad
		  FROM (SELECT sk, close, s, lag(open) OVER (ORDER BY sk) AS prev_open FROM tok) AS x
	)
	SELECT agg.res,
		   /* a duplicate's subtree repeats too: the shortest is the real one */
		   (SELECT min(d.pkey) FROM t AS d
			 WHERE d.sk = (SELECT t.sk FROM t WHERE t.pkey IS NOT NULL
							GROUP BY t.sk HAVING count(*) > 1
							ORDER BY length(t.sk), t.sk LIMIT 1)),
		   (SELECT btrim(t.v::text, E' \t\n\r') FROM t WHERE agg.bad IS NOT NULL AND t.sk = agg.bad),
		   (SELECT string_agg('/' || coalesce(t.pidx::text,
					replace(replace(idem_gate.jcs_display(t.pkey), '~', '~0'), '/', '~1')),
					'' ORDER BY length(t.sk))
			  FROM t
			 WHERE agg.bad IS NOT NULL AND t.sk <> ''::bytea
			   AND t.sk = substring(agg.bad FROM 1 FOR length(t.sk)))
	  INTO res, dupkey, badnum, badpath
	  FROM agg;

	IF dupkey IS NOT NULL THEN
		dupkey := idem_gate.jcs_display(dupkey);
		IF nul IS NOT NULL THEN
			dupkey := replace(dupkey, nul, E'\\u0000');
		END IF;
		RAISE EXCEPTION USING ERRCODE = '22030',
			MESSAGE = format('duplicate JSON object member name "%s"', dupkey),
			DETAIL = 'Canonical JSON (RFC 8785) needs unique member names within an object.',
			HINT = 'Remove the duplicate, or cast the document to jsonb, which keeps the last value of each name.';
	END IF;
	IF nul IS NOT NULL THEN
		badpath := replace(badpath, nul, E'\\u0000');
	END IF;
	PERFORM idem_gate.jcs_number_error(badnum, numbers,
		CASE WHEN badpath IS NULL THEN 'the top level of the document'
			 ELSE 'JSON pointer "' || badpath || '"' END);
	RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION idem_gate.jcs_canonical_json(pg_catalog.json, pg_catalog.text) FROM PUBLIC;

/*
 * The value of one identity field of idem_hash(doc, fields): a top-level
 * member name, or an RFC 6901 JSON Pointer when it starts with '/', as
 * resolve_field() finds it, with the same errors when it is absent.
 */
CREATE FUNCTION idem_gate.jcs_field(doc pg_catalog.jsonb, spec pg_catalog.text)
	RETURNS pg_catalog.jsonb
	LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	cur jsonb := doc;
	tok text;
	detail text;
BEGIN
	IF left(spec, 1) <> '/' THEN
		cur := doc -> spec;
	ELSE
		FOREACH tok IN ARRAY regexp_split_to_array(substr(spec, 2), '/') LOOP
			IF tok ~ '~([^01]|$)' THEN
				RAISE EXCEPTION USING ERRCODE = '22023',
					MESSAGE = format('invalid JSON pointer "%s" in identity fields',
									 idem_gate.jcs_display(spec)),
					DETAIL = 'In a JSON pointer "~" must be followed by "0" or "1" (RFC 6901).',
					HINT = 'Write "~0" for "~" and "~1" for "/" in a member name.';
			END IF;
			tok := replace(replace(tok, '~1', '/'), '~0', '~');
			IF jsonb_typeof(cur) = 'object' THEN
				cur := cur -> tok;
				IF cur IS NULL THEN
					detail := format('There is no member "%s".', idem_gate.jcs_display(tok));
					EXIT;
				END IF;
			ELSIF jsonb_typeof(cur) = 'array' THEN
				IF tok !~ '^(0|[1-9][0-9]{0,8})$' OR tok::int4 >= jsonb_array_length(cur) THEN
					detail := format('The array has no element "%s".', idem_gate.jcs_display(tok));
					cur := NULL;
					EXIT;
				END IF;
				cur := cur -> tok::int4;
			ELSE
				detail := format('The pointer goes through a scalar before "%s".',
								 idem_gate.jcs_display(tok));
				cur := NULL;
				EXIT;
			END IF;
		END LOOP;
	END IF;
	IF cur IS NULL AND detail IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = '22023',
			MESSAGE = format('identity field "%s" is missing from the document',
							 idem_gate.jcs_display(spec)),
			HINT = 'Every identity field must be present: idem_gate never hashes a partial identity.';
	END IF;
	IF cur IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = '22023',
			MESSAGE = format('identity field "%s" is missing from the document',
							 idem_gate.jcs_display(spec)),
			DETAIL = detail,
			HINT = 'Every identity field must be present: idem_gate never hashes a partial identity.';
	END IF;
	RETURN cur;
END
$$;
REVOKE ALL ON FUNCTION idem_gate.jcs_field(pg_catalog.jsonb, pg_catalog.text) FROM PUBLIC;

/*
 * Workflows derive idempotency keys and payload fingerprints from JSON;
 * hashing jsonb::text or a body in arrival order misses duplicates, so
 * idem_gate hashes the RFC 8785 canonical form, which any JCS
 * implementation reproduces byte for byte.  A NULL document gives NULL, a
 * NULL numbers an error (CALLED ON NULL INPUT, as the C edition).
 */
CREATE FUNCTION @extschema@.idem_canonical(doc pg_catalog.jsonb,
										   numbers pg_catalog.text DEFAULT 'safe')
	RETURNS pg_catalog.text
	LANGUAGE plpgsql IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	IF numbers IS NULL OR (numbers <> 'safe' AND numbers <> 'rfc') OR
		getdatabaseencoding() <> 'UTF8' THEN
		PERFORM idem_gate.jcs_check_args(numbers);
	END IF;
	IF doc IS NULL THEN
		RETURN NULL;
	END IF;
	RETURN idem_gate.jcs_canonical_jsonb(doc, numbers, '');
END
$$;
COMMENT ON FUNCTION @extschema@.idem_canonical(pg_catalog.jsonb, pg_catalog.text) IS
	'RFC 8785 canonical form of a jsonb document; numbers => ''safe'' (default) or ''rfc''';

/* The same for json text, which keeps duplicates and U+0000 to be judged. */
CREATE FUNCTION @extschema@.idem_canonical(doc pg_catalog.json,
										   numbers pg_catalog.text DEFAULT 'safe')
	RETURNS pg_catalog.text
	LANGUAGE plpgsql IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	IF numbers IS NULL OR (numbers <> 'safe' AND numbers <> 'rfc') OR
		getdatabaseencoding() <> 'UTF8' THEN
		PERFORM idem_gate.jcs_check_args(numbers);
	END IF;
	IF doc IS NULL THEN
		RETURN NULL;
	END IF;
	RETURN idem_gate.jcs_canonical_json(doc, numbers);
END
$$;
COMMENT ON FUNCTION @extschema@.idem_canonical(pg_catalog.json, pg_catalog.text) IS
	'RFC 8785 canonical form of a json document (duplicate member names are refused); numbers => ''safe'' (default) or ''rfc''';

/*
 * The SHA-256 of the canonical form's UTF-8 bytes, as 64 lowercase hex
 * digits.  Unlike the C edition, which streams the bytes into the hash,
 * this builds the canonical text first: the answer is the same, the memory
 * use is that of idem_canonical.
 */
CREATE FUNCTION @extschema@.idem_hash(doc pg_catalog.jsonb,
									  numbers pg_catalog.text DEFAULT 'safe')
	RETURNS pg_catalog.text
	LANGUAGE plpgsql IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	IF numbers IS NULL OR (numbers <> 'safe' AND numbers <> 'rfc') OR
		getdatabaseencoding() <> 'UTF8' THEN
		PERFORM idem_gate.jcs_check_args(numbers);
	END IF;
	IF doc IS NULL THEN
		RETURN NULL;
	END IF;
	RETURN encode(sha256(convert_to(idem_gate.jcs_canonical_jsonb(doc, numbers, ''), 'UTF8')), 'hex');
END
$$;
COMMENT ON FUNCTION @extschema@.idem_hash(pg_catalog.jsonb, pg_catalog.text) IS
	'SHA-256 (64 lowercase hex digits) of the RFC 8785 canonical form of a jsonb document';

/* The same for json text. */
CREATE FUNCTION @extschema@.idem_hash(doc pg_catalog.json,
									  numbers pg_catalog.text DEFAULT 'safe')
	RETURNS pg_catalog.text
	LANGUAGE plpgsql IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	IF numbers IS NULL OR (numbers <> 'safe' AND numbers <> 'rfc') OR
		getdatabaseencoding() <> 'UTF8' THEN
		PERFORM idem_gate.jcs_check_args(numbers);
	END IF;
	IF doc IS NULL THEN
		RETURN NULL;
	END IF;
	RETURN encode(sha256(convert_to(idem_gate.jcs_canonical_json(doc, numbers), 'UTF8')), 'hex');
END
$$;
COMMENT ON FUNCTION @extschema@.idem_hash(pg_catalog.json, pg_catalog.text) IS
	'SHA-256 (64 lowercase hex digits) of the RFC 8785 canonical form of a json document (duplicate member names are refused)';

/*
 * The hash of the object that maps each identity field to its value, so
 * that any JCS implementation can reproduce it from the same projection.
 * The checks come in the C edition's order (idem_hash_fields()), and the
 * fields are written in canonical order, so that of a listed-twice field
 * and a refused number the same one is reported first.
 */
CREATE FUNCTION @extschema@.idem_hash(doc pg_catalog.jsonb,
									  fields pg_catalog.text[],
									  numbers pg_catalog.text DEFAULT 'safe')
	RETURNS pg_catalog.text
	LANGUAGE plpgsql IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	n int4;
	i int4;
	specs text[] := '{}';
	vals jsonb[] := '{}';
	f record;
	prev text;
	out text := '{';
BEGIN
	IF numbers IS NULL OR (numbers <> 'safe' AND numbers <> 'rfc') OR
		getdatabaseencoding() <> 'UTF8' THEN
		PERFORM idem_gate.jcs_check_args(numbers);
	END IF;
	IF fields IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = '22004',
			MESSAGE = 'identity fields must not be null',
			HINT = 'Name the members that identify the event, for example ARRAY[''id''].';
	END IF;
	IF doc IS NULL THEN
		RETURN NULL;
	END IF;
	IF array_ndims(fields) > 1 THEN
		RAISE EXCEPTION USING ERRCODE = '22023',
			MESSAGE = 'identity fields must be a one-dimensional array';
	END IF;
	IF jsonb_typeof(doc) <> 'object' THEN
		RAISE EXCEPTION USING ERRCODE = '22023',
			MESSAGE = format('cannot take identity fields from %s',
				CASE jsonb_typeof(doc) WHEN 'array' THEN 'an array' WHEN 'string' THEN 'a string'
					WHEN 'number' THEN 'a number' WHEN 'boolean' THEN 'a boolean' ELSE 'null' END),
			DETAIL = 'idem_hash(doc, fields) needs a JSON object.';
	END IF;
	n := coalesce(cardinality(fields), 0);
	IF n = 0 THEN
		RAISE EXCEPTION USING ERRCODE = '22023',
			MESSAGE = 'identity fields must not be empty',
			DETAIL = 'A hash of no fields would be the same for every document.',
			HINT = 'Name the members that identify the event, for example ARRAY[''id''].';
	END IF;
	FOR i IN 1 .. n LOOP
		IF fields[array_lower(fields, 1) + i - 1] IS NULL THEN
			RAISE EXCEPTION USING ERRCODE = '22004',
				MESSAGE = format('identity field %s is null', i),
				HINT = 'Remove the null or replace it with a member name or JSON pointer.';
		END IF;
		specs := specs || fields[array_lower(fields, 1) + i - 1];
		vals := vals || idem_gate.jcs_field(doc, fields[array_lower(fields, 1) + i - 1]);
	END LOOP;

	FOR f IN SELECT s.spec, s.i FROM unnest(specs) WITH ORDINALITY AS s(spec, i)
			  ORDER BY idem_gate.jcs_sort_key(s.spec), s.i LOOP
		IF prev IS NOT NULL THEN
			IF prev = f.spec THEN
				RAISE EXCEPTION USING ERRCODE = '22023',
					MESSAGE = format('identity field "%s" is listed twice', idem_gate.jcs_display(f.spec));
			END IF;
			out := out || ',';
		END IF;
		out := out || to_json(f.spec)::text || ':' ||
			idem_gate.jcs_canonical_jsonb(vals[f.i::int4], numbers,
				CASE WHEN left(f.spec, 1) = '/' THEN '/' || idem_gate.jcs_display(substr(f.spec, 2))
					 ELSE '/' || replace(replace(idem_gate.jcs_display(f.spec), '~', '~0'), '/', '~1') END);
		prev := f.spec;
	END LOOP;
	RETURN encode(sha256(convert_to(out || '}', 'UTF8')), 'hex');
END
$$;
COMMENT ON FUNCTION @extschema@.idem_hash(pg_catalog.jsonb, pg_catalog.text[], pg_catalog.text) IS
	'SHA-256 of the canonical object that maps each identity field (member name, or JSON pointer starting with /) to its value; a missing field is an error';
