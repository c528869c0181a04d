/*-------------------------------------------------------------------------
 *
 * jcs_number.c
 *	  JSON numbers in RFC 8785 form: the ECMAScript serialization of the
 *	  nearest IEEE-754 double, under idem_gate's 'safe' and 'rfc' policies.
 *
 * A number arrives as decimal text (numeric_out of a jsonb numeric, or the
 * token of a json document).  It is first reduced to its significant digits
 * and a decimal exponent.  Most numbers in real payloads have at most 15
 * significant digits and a moderate exponent; such a decimal survives the
 * trip through a double unchanged, so its ECMAScript form is written
 * straight from its own digits, with no binary conversion at all.
 *
 * Every other number is rounded to the nearest double by glibc's correctly
 * rounding strtod(), and the shortest digits that round back to it are
 * found with PostgreSQL's Ryu code.  That code never picks a candidate lying
 * exactly on the rounding boundary, which ECMAScript does pick when the
 * double's significand is even (1e+23 comes out as 9.999999999999999e+22).
 * Such a boundary candidate can only be shorter than Ryu's answer when the
 * boundary is an integer, that is for magnitudes of 2^53 and more, so only
 * there do we try the shorter lengths, each correctly rounded by printf, and
 * keep the first that rounds back to the same double.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "common/shortest_dec.h"

#include "jcs.h"
#include "jcs_number.h"

/*
 * A decimal number: sign * 0.d1d2...dk * 10^n, with no leading or trailing
 * zero digit.  k = 0 means zero.
 */
typedef struct JcsDecimal
{
	bool		neg;
	const char *digits;
	int			ndigits;
	int64		n;
} JcsDecimal;

/* 2^53: at and above it, a double cannot hold every integer */
static const JcsDecimal two53 = {false, "9007199254740992", 16, 16};

/* 2^-1022, the smallest normal double, computed on first use */
static char twom1022_digits[800];
static JcsDecimal twom1022 = {false, NULL, 0, 0};

#define JCS_FAST_DIGITS 15

/*
 * Split decimal text (JSON number syntax, possibly with leading zeros as
 * numeric_out never writes them but the grammar is shared) into a
 * JcsDecimal.  Digits are copied to buf, which must hold len bytes.
 */
static void
parse_decimal(const char *s, size_t len, char *buf, JcsDecimal *d)
{
	const char *p = s;
	const char *end = s + len;
	int			k = 0;
	int64		intdigits = 0;
	int64		skipped = 0;
	bool		started = false;

	d->neg = false;
	if (p < end && *p == '-')
	{
		d->neg = true;
		p++;
	}
	for (; p < end && *p >= '0' && *p <= '9'; p++)
	{
		intdigits++;
		if (!started && *p == '0')
			skipped++;
		else
		{
			started = true;
			buf[k++] = *p;
		}
	}
	if (p < end && *p == '.')
	{
		for (p++; p < end && *p >= '0' && *p <= '9'; p++)
		{
			if (!started && *p == '0')
				skipped++;
			else
			{
				started = true;
				buf[k++] = *p;
			}
		}
	}
	d->n = intdigits - skipped;
	if (p < end && (*p == 'e' || *p == 'E'))
	{
		bool		eneg = false;
		int64		e = 0;

		p++;
		if (p < end && (*p == '+' || *p == '-'))
			eneg = (*p++ == '-');
		for (; p < end && *p >= '0' && *p <= '9'; p++)
		{
			/* saturate: anything this large is far outside any double */
			if (e < INT64CONST(1000000000000))
				e = e * 10 + (*p - '0');
		}
		d->n += eneg ? -e : e;
	}
	while (k > 0 && buf[k - 1] == '0')
		k--;
	d->digits = buf;
	d->ndigits = k;
}

/*
 * Compare the magnitudes of two decimals; both must be non-zero.
 */
static int
decimal_abs_cmp(const JcsDecimal *a, const JcsDecimal *b)
{
	int			m = Min(a->ndigits, b->ndigits);
	int			c;

	if (a->n != b->n)
		return a->n < b->n ? -1 : 1;
	c = memcmp(a->digits, b->digits, m);
	if (c != 0)
		return c;
	/* no trailing zeros, so the longer one is larger */
	if (a->ndigits != b->ndigits)
		return a->ndigits < b->ndigits ? -1 : 1;
	return 0;
}

/*
 * Fill twom1022 with the exact decimal value of 2^-1022, that is
 * 5^1022 * 10^-1022.  It is needed only to judge numbers just below the
 * normal range, so it is built on first use.
 */
static void
init_twom1022(void)
{
	/* little-endian decimal digits of 5^1022 */
	int			digits[800];
	int			nd = 1;
	int			i;
	int			j;

	digits[0] = 1;
	for (i = 0; i < 1022; i++)
	{
		int			carry = 0;

		for (j = 0; j < nd; j++)
		{
			int			v = digits[j] * 5 + carry;

			digits[j] = v % 10;
			carry = v / 10;
		}
		while (carry > 0)
		{
			digits[nd++] = carry % 10;
			carry /= 10;
		}
	}
	for (j = 0; j < nd; j++)
		twom1022_digits[j] = '0' + digits[nd - 1 - j];
	twom1022.ndigits = nd;
	twom1022.n = nd - 1022;
	twom1022.digits = twom1022_digits;
}

/*
 * Lay out digits and exponent as ECMAScript's Number::toString does
 * (ECMA-262 7.1.12.1): plain notation for 1e-6 <= |x| < 1e21, otherwise
 * d.ddde+x.  out must hold 32 bytes; returns the length.
 */
static int
layout(bool neg, const char *digits, int k, int n, char *out)
{
	char	   *p = out;
	int			e;
	int			i;

	if (neg)
		*p++ = '-';
	if (k <= n && n <= 21)
	{
		memcpy(p, digits, k);
		p += k;
		for (i = k; i < n; i++)
			*p++ = '0';
	}
	else if (0 < n && n <= 21)
	{
		memcpy(p, digits, n);
		p += n;
		*p++ = '.';
		memcpy(p, digits + n, k - n);
		p += k - n;
	}
	else if (-6 < n && n <= 0)
	{
		*p++ = '0';
		*p++ = '.';
		for (i = 0; i < -n; i++)
			*p++ = '0';
		memcpy(p, digits, k);
		p += k;
	}
	else
	{
		*p++ = digits[0];
		if (k > 1)
		{
			*p++ = '.';
			memcpy(p, digits + 1, k - 1);
			p += k - 1;
		}
		*p++ = 'e';
		e = n - 1;
		if (e < 0)
		{
			*p++ = '-';
			e = -e;
		}
		else
			*p++ = '+';
		if (e >= 100)
			*p++ = '0' + e / 100;
		if (e >= 10)
			*p++ = '0' + (e / 10) % 10;
		*p++ = '0' + e % 10;
	}
	return p - out;
}

/*
 * The ECMAScript digits of a positive finite double: the shortest that
 * round back to x, the closest to x among those, with boundary candidates
 * accepted when x's significand is even.  buf must hold 40 bytes.
 */
static void
double_digits(double x, char *buf, JcsDecimal *d)
{
	char		ryu[DOUBLE_SHORTEST_DECIMAL_LEN];
	char		digits[DOUBLE_SHORTEST_DECIMAL_LEN];
	int			len;
	uint64		bits;

	len = double_to_shortest_decimal_bufn(x, ryu);
	parse_decimal(ryu, len, buf, d);

	memcpy(&bits, &x, sizeof(bits));
	if (x >= 9007199254740992.0 && (bits & 1) == 0 && d->ndigits > 1)
	{
		int			p;

		for (p = 1; p < d->ndigits; p++)
		{
			char		cand[40];
			int			clen;

			clen = snprintf(cand, sizeof(cand), "%.*e", p - 1, x);
			if (strtod(cand, NULL) == x)
			{
				memcpy(digits, cand, clen);
				parse_decimal(digits, clen, buf, d);
				break;
			}
		}
	}
}

/*
 * Show a number in an error message: as written when short, otherwise as
 * its leading digits, exponent and digit count.
 */
static char *
number_display(const char *num, size_t len, const JcsDecimal *d)
{
	const char *sign = d->neg ? "-" : "";

	if (len <= 40)
		return pnstrdup(num, len);
	if (d->ndigits == 1)
		return psprintf("%s%ce%+lld", sign, d->digits[0], (long long) (d->n - 1));
	if (d->ndigits <= 20)
		return psprintf("%s%c.%.*se%+lld", sign, d->digits[0],
						d->ndigits - 1, d->digits + 1, (long long) (d->n - 1));
	return psprintf("%s%c.%.15s...e%+lld (%d significant digits)",
					sign, d->digits[0], d->digits + 1,
					(long long) (d->n - 1), d->ndigits);
}

/*
 * Append the RFC 8785 form of the decimal number num (JSON number syntax,
 * len bytes), enforcing the state's number policy.
 */
void
jcs_put_number(JcsState *st, const char *num, size_t len)
{
	char		stackbuf[64];
	char	   *buf;
	JcsDecimal	d;
	JcsDecimal	o;
	char		obuf[40];
	char		out[32];
	int			outlen;
	double		x;

	buf = (len <= sizeof(stackbuf)) ? stackbuf : palloc(len);
	parse_decimal(num, len, buf, &d);

	if (d.ndigits == 0)
	{
		jcs_putc(&st->sink, '0');
		goto done;
	}

	/* Fast path: at most 15 digits in the normal range come back unchanged */
	if (d.ndigits <= JCS_FAST_DIGITS && d.n > -290 && d.n < 300)
	{
		outlen = layout(d.neg, d.digits, d.ndigits, (int) d.n, out);
		jcs_putn(&st->sink, out, outlen);
		goto done;
	}

	/* Round to the nearest double */
	if (d.n > 310)
		x = HUGE_VAL;
	else if (d.n < -330)
		x = 0.0;
	else
	{
		char	   *tmp = palloc(d.ndigits + 32);

		snprintf(tmp, d.ndigits + 32, "0.%.*se%d", d.ndigits, d.digits,
				 (int) d.n);
		x = strtod(tmp, NULL);
		pfree(tmp);
	}

	if (isinf(x))
	{
		char	   *path = jcs_path_text(st);

		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("number %s is out of range for an IEEE-754 double",
						number_display(num, len, &d)),
				 errdetail("RFC 8785 serializes every number as a double; the number is at %s.",
						   path),
				 errhint("Send such values as JSON strings (RFC 8785, Appendix D).")));
	}

	if (x == 0)
	{
		o.neg = false;
		o.ndigits = 0;
		o.n = 0;
		o.digits = obuf;
	}
	else
	{
		double_digits(x, obuf, &o);
		o.neg = d.neg;
	}

	if (st->numbers == JCS_NUMBERS_SAFE &&
		!(o.ndigits == d.ndigits && o.n == d.n &&
		  memcmp(o.digits, d.digits, d.ndigits) == 0))
	{
		bool		lossy_zone;

		if (twom1022.digits == NULL)
			init_twom1022();
		lossy_zone = decimal_abs_cmp(&d, &two53) >= 0 ||
			decimal_abs_cmp(&d, &twom1022) < 0;
		if (lossy_zone)
		{
			char	   *path = jcs_path_text(st);

			if (o.ndigits == 0)
				outlen = 1, out[0] = '0';
			else
				outlen = layout(o.neg, o.digits, o.ndigits, (int) o.n,
								out);
			out[outlen] = '\0';
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("number %s cannot be represented as an IEEE-754 double without loss",
							number_display(num, len, &d)),
					 errdetail("The nearest double is %s; under numbers => 'safe' a number of magnitude 2^53 or more, or below 2^-1022, must keep its exact value.  The number is at %s.",
							   out, path),
					 errhint("Send such values as JSON strings (RFC 8785, Appendix D).")));
		}
	}

	if (o.ndigits == 0)
		jcs_putc(&st->sink, '0');
	else
	{
		outlen = layout(o.neg, o.digits, o.ndigits, (int) o.n, out);
		jcs_putn(&st->sink, out, outlen);
	}

done:
	if (buf != stackbuf)
		pfree(buf);
}
