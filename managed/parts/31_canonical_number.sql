/*
 * idem_gate managed edition: JSON numbers in RFC 8785 form, the C
 * edition's src/jcs_number.c in PL/pgSQL, for the canonical JSON of
 * 30_canonical.sql: the ECMAScript serialization of the nearest IEEE-754
 * double, under idem_gate's 'safe' and 'rfc' policies, and the errors of
 * the numbers they refuse.
 *
 * Numbers are their own file, as in the C edition, because they are the
 * one part of canonical JSON that is arithmetic rather than text.
 */
/*
 * Digits and exponent laid out as ECMAScript's Number::toString does
 * (ECMA-262 7.1.12.1), as layout() in jcs_number.c: the value is
 * 0.digits * 10^n, plain notation for 1e-6 <= |x| < 1e21, otherwise
 * d.ddde+x.
 */
CREATE FUNCTION idem_gate.jcs_layout(neg pg_catalog.bool, digits pg_catalog.text,
									 n pg_catalog.int4)
	RETURNS pg_catalog.text
	LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $$
SELECT CASE WHEN neg THEN '-' ELSE '' END ||
	CASE
		WHEN length(digits) <= n AND n <= 21 THEN digits || repeat('0', n - length(digits))
		WHEN 0 < n AND n <= 21 THEN left(digits, n) || '.' || substr(digits, n + 1)
		WHEN -6 < n AND n <= 0 THEN '0.' || repeat('0', -n) || digits
		ELSE left(digits, 1) ||
			CASE WHEN length(digits) > 1 THEN '.' || substr(digits, 2) ELSE '' END ||
			CASE WHEN n - 1 < 0 THEN 'e-' ELSE 'e+' END || abs(n - 1)::text
	END
$$;
REVOKE ALL ON FUNCTION idem_gate.jcs_layout(pg_catalog.bool, pg_catalog.text, pg_catalog.int4) FROM PUBLIC;

/*
 * Split decimal text (JSON number syntax; also float8out's) into sign,
 * significant digits without leading or trailing zeros, and n such that
 * the value is 0.digits * 10^n, as parse_decimal() does.  An exponent too
 * long for any double saturates the same way, so that messages show the
 * same figure.
 */
CREATE FUNCTION idem_gate.jcs_decimal(num pg_catalog.text,
									  OUT neg pg_catalog.bool, OUT digits pg_catalog.text,
									  OUT n pg_catalog.int8)
	LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	m text[] := regexp_match(num, E'^(-?)([0-9]*)(?:\\.([0-9]*))?(?:[eE]([+-]?)([0-9]+))?$');
	allds text := m[2] || coalesce(m[3], '');
	trimmed text := ltrim(allds, '0');
	e text := left(ltrim(coalesce(m[5], ''), '0'), 13);
BEGIN
	neg := m[1] = '-';
	digits := rtrim(trimmed, '0');
	n := length(m[2]) - (length(allds) - length(trimmed));
	IF e <> '' THEN
		n := n + CASE WHEN m[4] = '-' THEN -e::int8 ELSE e::int8 END;
	END IF;
	IF digits = '' THEN
		neg := false;
		n := 0;
	END IF;
END
$$;
REVOKE ALL ON FUNCTION idem_gate.jcs_decimal(pg_catalog.text) FROM PUBLIC;

/*
 * Compare the magnitudes of two non-zero decimals given as (digits, n),
 * as decimal_abs_cmp(): by n, then by digits, which have no trailing zero.
 */
CREATE FUNCTION idem_gate.jcs_decimal_cmp(ad pg_catalog.text, an pg_catalog.int8,
										  bd pg_catalog.text, bn pg_catalog.int8)
	RETURNS pg_catalog.int4
	LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $$
SELECT CASE
	WHEN an <> bn THEN CASE WHEN an < bn THEN -1 ELSE 1 END
	WHEN ad COLLATE "C" < bd COLLATE "C" THEN -1
	WHEN ad COLLATE "C" > bd COLLATE "C" THEN 1
	ELSE 0 END
$$;
REVOKE ALL ON FUNCTION idem_gate.jcs_decimal_cmp(pg_catalog.text, pg_catalog.int8, pg_catalog.text, pg_catalog.int8) FROM PUBLIC;

/*
 * The RFC 8785 form of a JSON number (its text), or NULL when it must be
 * refused: beyond the double range, or, under numbers => 'safe', changed
 * by the rounding at or beyond 2^53 or below 2^-1022.  jcs_number_error()
 * then says why; the walkers call it only when this gives NULL, so that
 * the common case computes no error text and no path.
 *
 * As in jcs_number.c: at most 15 significant digits in the normal range
 * survive the trip through a double, and are laid out from their own
 * digits.  Every other number is rounded to the nearest double by
 * float8in (glibc's correctly rounding strtod), after the range checks
 * that keep float8in from raising its own error, and its shortest
 * round-trip digits are float8out's (Ryu, with extra_float_digits = 1
 * pinned).  Ryu never picks a candidate lying exactly on the rounding
 * boundary, which ECMAScript does pick when the significand is even
 * (1e+23); that can only give shorter digits at 2^53 and beyond, where the
 * double is an integer, so only there are the shorter lengths tried, each
 * rounded half to even from the double's exact value, as printf rounds.
 */
CREATE FUNCTION idem_gate.jcs_number(num pg_catalog.text, numbers pg_catalog.text)
	RETURNS pg_catalog.text
	LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	SET extra_float_digits = 1
	AS $$
DECLARE
	d record;
	o record;
	x float8;
	odigits text;
	on_ int8;
	bits int8;
	exact numeric;
	len int;
	p int;
	s int;
	q numeric;
	r numeric;
	lossy bool;
	/* 2^1024 - 2^970: from there on the nearest double is infinite */
	overflow constant text := '179769313486231580793728971405301199252069012264752390332004544495176179815914405962979891974645423012232115555300567187032120937808212446226604419574981744567648002453640436138616217095862843221601213587155225281578010838811823051071262153744208839424495880768409225810446453212049640050983763685637';
BEGIN
	d := idem_gate.jcs_decimal(num);
	IF d.digits = '' THEN
		RETURN '0';
	END IF;
	IF length(d.digits) <= 15 AND d.n > -290 AND d.n < 300 THEN
		RETURN idem_gate.jcs_layout(d.neg, d.digits, d.n::int4);
	END IF;

	/* round to the nearest double: beyond 2^1024 - 2^970 it is infinite */
	IF d.n > 310 OR idem_gate.jcs_decimal_cmp(d.digits, d.n, overflow, 309) >= 0 THEN
		RETURN NULL;
	END IF;
	/* at or below 2^-1075 it is zero */
	IF d.n < -330 OR idem_gate.jcs_decimal_cmp(d.digits, d.n,
		'24703282292062327208828439643411068618252990130716238221279284125033775363510437593264991818081799618989828234772285886546332835517796989819938739800539093906315035659515570226392290858392449105184435931802849936536152500319370457678249219365623669863658480757001585769269903706311928279558551332927834338409351978015531246597263579574622766465272827220056374006485499977096599470454020828166226237857393450736339007967761930577506740176324673600968951340535537458516661134223766678604162159680461914467291840300530057530849048765391711386591646239524912623653881879636239373280423891018672348497668235089863388587925628302755995657524455507255189313690836254779186948667994968324049705821028513185451396213837722826145437693412532098591327667236328125', -323) <= 0 THEN
		x := 0;
	ELSE
		x := ('0.' || d.digits || 'e' || d.n)::float8;
	END IF;

	IF x = 0 THEN
		odigits := '';
		on_ := 0;
	ELSE
		o := idem_gate.jcs_decimal(x::text);
		odigits := o.digits;
		on_ := o.n;
		bits := ('x' || encode(float8send(x), 'hex'))::bit(64)::int8;
		IF x >= 9007199254740992 AND bits & 1 = 0 AND length(odigits) > 1 THEN
			exact := ((bits & 4503599627370495) | 4503599627370496)::numeric *
				power(2::numeric, ((bits >> 52) & 2047) - 1075);
			exact := trunc(exact);
			len := length(exact::text);
			FOR p IN 1 .. length(odigits) - 1 LOOP
				s := len - p;
				q := div(exact, power(10::numeric, s));
				r := exact - q * power(10::numeric, s);
				IF 2 * r > power(10::numeric, s) OR
					(2 * r = power(10::numeric, s) AND mod(q, 2) = 1) THEN
					q := q + 1;
				END IF;
				/* a candidate rounded up to 2^1024 is not x (float8in would refuse it) */
				CONTINUE WHEN idem_gate.jcs_decimal_cmp(rtrim(q::text, '0'), length(q::text) + s,
														overflow, 309) >= 0;
				IF (q::text || 'e' || s)::float8 = x THEN
					odigits := rtrim(q::text, '0');
					on_ := length(q::text) + s;
					EXIT;
				END IF;
			END LOOP;
		END IF;
	END IF;

	IF numbers = 'safe' AND NOT (odigits = d.digits AND on_ = d.n) THEN
		/* the lossy zone: 2^53 and beyond, below 2^-1022 */
		lossy := idem_gate.jcs_decimal_cmp(d.digits, d.n, '9007199254740992', 16) >= 0 OR
			d.n < -330 OR
			idem_gate.jcs_decimal_cmp(d.digits, d.n,
			'2225073858507201383090232717332404064219215980462331830553327416887204434813918195854283159012511020564067339731035811005152434161553460108856012385377718821130777993532002330479610147442583636071921565046942503734208375250806650616658158948720491179968591639648500635908770118304874799780887753749949451580451605050915399856582470818645113537935804992115981085766051992433352114352390148795699609591288891602992641511063466313393663477586513029371762047325631781485664350872122828637642044846811407613911477062801689853244110024161447421618567166150540154285084716752901903161322778896729707373123334086988983175067838846926092773977972858659654941091369095406136467568702398678315290680984617210924625396728515625', -307) < 0;
		IF lossy THEN
			RETURN NULL;
		END IF;
	END IF;

	IF odigits = '' THEN
		RETURN '0';
	END IF;
	RETURN idem_gate.jcs_layout(d.neg, odigits, on_::int4);
END
$$;
REVOKE ALL ON FUNCTION idem_gate.jcs_number(pg_catalog.text, pg_catalog.text) FROM PUBLIC;

/*
 * Raise the error for a number that jcs_number() refused, with the text
 * of jcs_put_number(): the number as written when short, otherwise its
 * leading digits, exponent and digit count; and where it is.
 */
CREATE FUNCTION idem_gate.jcs_number_error(num pg_catalog.text, numbers pg_catalog.text,
										   path pg_catalog.text)
	RETURNS void
	LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	d record := idem_gate.jcs_decimal(num);
	sign text := CASE WHEN d.neg THEN '-' ELSE '' END;
	e text := CASE WHEN d.n - 1 < 0 THEN '-' ELSE '+' END || abs(d.n - 1)::text;
	shown text;
	nearest text := idem_gate.jcs_number(num, 'rfc');
BEGIN
	IF octet_length(num) <= 40 THEN
		shown := num;
	ELSIF length(d.digits) = 1 THEN
		shown := sign || d.digits || 'e' || e;
	ELSIF length(d.digits) <= 20 THEN
		shown := sign || left(d.digits, 1) || '.' || substr(d.digits, 2) || 'e' || e;
	ELSE
		shown := format('%s%s.%s...e%s (%s significant digits)', sign, left(d.digits, 1),
						substr(d.digits, 2, 15), e, length(d.digits));
	END IF;
	IF nearest IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = '22003',
			MESSAGE = format('number %s is out of range for an IEEE-754 double', shown),
			DETAIL = format('RFC 8785 serializes every number as a double; the number is at %s.', path),
			HINT = 'Send such values as JSON strings (RFC 8785, Appendix D).';
	END IF;
	RAISE EXCEPTION USING ERRCODE = '22003',
		MESSAGE = format('number %s cannot be represented as an IEEE-754 double without loss', shown),
		DETAIL = format('The nearest double is %s; under numbers => ''safe'' a number of magnitude 2^53 or more, or below 2^-1022, must keep its exact value.  The number is at %s.',
						nearest, path),
		HINT = 'Send such values as JSON strings (RFC 8785, Appendix D).';
END
$$;
REVOKE ALL ON FUNCTION idem_gate.jcs_number_error(pg_catalog.text, pg_catalog.text, pg_catalog.text) FROM PUBLIC;
