/*-------------------------------------------------------------------------
 *
 * jcs_json_lex.c
 *	  The tokens of json text for jcs_json.c: checking scans of strings,
 *	  numbers and literals, and the decoding of strings.
 *
 * A json datum has passed json_in, so these scans rarely find an error;
 * they still check every byte, because canonical JSON must never guess
 * what a document means.  Lone UTF-16 surrogates, which json_in accepts,
 * are refused here (RFC 8785 needs valid Unicode).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "mb/pg_wchar.h"

#include "jcs_json_lex.h"

/*
 * A json datum has passed json_in, so syntax errors are not expected here;
 * this still refuses anything that is not JSON rather than guess.
 */
void
jcs_j_syntax_error(const JcsJText *doc, uint32 pos)
{
	if (pos >= doc->len)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid input syntax for type json"),
				 errdetail("The input ends unexpectedly.")));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg("invalid input syntax for type json"),
			 errdetail("Unexpected character at byte %u.", pos + 1)));
}

/* Value of four hex digits at pos, or -1. */
static int
hex4(const JcsJText *doc, uint32 pos)
{
	int			v = 0;
	int			i;

	if (pos + 4 > doc->len)
		return -1;
	for (i = 0; i < 4; i++)
	{
		unsigned char c = doc->text[pos + i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	return v;
}

/*
 * Refuse a lone surrogate: RFC 8785 section 3.2.2.2 requires strings to
 * be valid Unicode, and jsonb refuses them too.
 */
static void
surrogate_error(uint32 pos, int cp)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg("invalid input syntax for type json"),
			 errdetail("The escape \\u%04x at byte %u is a lone UTF-16 surrogate; canonical JSON needs valid Unicode.",
					   cp, pos + 1),
			 errhint("A high surrogate \\ud800-\\udbff must be followed by a low surrogate \\udc00-\\udfff.")));
}

/*
 * Read the \u escape at pos (pointing at the backslash), including the low
 * half of a surrogate pair; returns the code point and sets *next.
 */
static int
unicode_escape(const JcsJText *doc, uint32 pos, uint32 *next)
{
	int			cp = hex4(doc, pos + 2);

	if (cp < 0)
		jcs_j_syntax_error(doc, pos);
	if (cp >= 0xD800 && cp <= 0xDBFF)
	{
		int			lo = -1;

		if (pos + 7 < doc->len && doc->text[pos + 6] == '\\' &&
			doc->text[pos + 7] == 'u')
			lo = hex4(doc, pos + 8);
		if (lo < 0xDC00 || lo > 0xDFFF)
			surrogate_error(pos, cp);
		*next = pos + 12;
		return 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
	}
	if (cp >= 0xDC00 && cp <= 0xDFFF)
		surrogate_error(pos, cp);
	*next = pos + 6;
	return cp;
}

/*
 * Check the string whose opening quote is at pos, whatever it holds (see
 * jcs_j_scan_string); returns the offset after its closing quote and tells
 * whether it holds any escape.
 */
uint32
jcs_j_scan_string_full(const JcsJText *doc, uint32 pos, bool *escapes)
{
	const unsigned char *t = doc->text;

	*escapes = false;
	pos++;
	while (pos < doc->len)
	{
		unsigned char c = t[pos];

		if (c == '"')
			return pos + 1;
		if (c < 0x20)
			jcs_j_syntax_error(doc, pos);
		if (c != '\\')
		{
			pos++;
			continue;
		}
		*escapes = true;
		if (pos + 1 >= doc->len)
			jcs_j_syntax_error(doc, pos + 1);
		switch (t[pos + 1])
		{
			case '"':
			case '\\':
			case '/':
			case 'b':
			case 'f':
			case 'n':
			case 'r':
			case 't':
				pos += 2;
				break;
			case 'u':
				(void) unicode_escape(doc, pos, &pos);
				break;
			default:
				jcs_j_syntax_error(doc, pos + 1);
		}
	}
	jcs_j_syntax_error(doc, pos);
	return pos;					/* keep the compiler quiet */
}

/*
 * Decode the checked string content between start and end (the closing
 * quote) into out, which needs end - start bytes; returns the length.
 */
int
jcs_j_decode_string(const JcsJText *doc, uint32 start, uint32 end, char *out)
{
	const unsigned char *t = doc->text;
	char	   *o = out;
	uint32		pos = start;

	while (pos < end)
	{
		int			cp;

		if (t[pos] != '\\')
		{
			*o++ = t[pos++];
			continue;
		}
		switch (t[pos + 1])
		{
			case 'b':
				*o++ = '\b';
				break;
			case 'f':
				*o++ = '\f';
				break;
			case 'n':
				*o++ = '\n';
				break;
			case 'r':
				*o++ = '\r';
				break;
			case 't':
				*o++ = '\t';
				break;
			case 'u':
				cp = unicode_escape(doc, pos, &pos);
				unicode_to_utf8(cp, (unsigned char *) o);
				o += pg_utf_mblen((unsigned char *) o);
				continue;
			default:			/* '"', '\\', '/' */
				*o++ = t[pos + 1];
				break;
		}
		pos += 2;
	}
	return o - out;
}

/* Check a number token at pos; returns the offset after it. */
uint32
jcs_j_scan_number(const JcsJText *doc, uint32 pos)
{
	const unsigned char *t = doc->text;
	uint32		len = doc->len;

	if (pos < len && t[pos] == '-')
		pos++;
	if (pos < len && t[pos] == '0')
		pos++;
	else if (pos < len && t[pos] >= '1' && t[pos] <= '9')
	{
		while (pos < len && t[pos] >= '0' && t[pos] <= '9')
			pos++;
	}
	else
		jcs_j_syntax_error(doc, pos);
	if (pos < len && t[pos] == '.')
	{
		pos++;
		if (!(pos < len && t[pos] >= '0' && t[pos] <= '9'))
			jcs_j_syntax_error(doc, pos);
		while (pos < len && t[pos] >= '0' && t[pos] <= '9')
			pos++;
	}
	if (pos < len && (t[pos] == 'e' || t[pos] == 'E'))
	{
		pos++;
		if (pos < len && (t[pos] == '+' || t[pos] == '-'))
			pos++;
		if (!(pos < len && t[pos] >= '0' && t[pos] <= '9'))
			jcs_j_syntax_error(doc, pos);
		while (pos < len && t[pos] >= '0' && t[pos] <= '9')
			pos++;
	}
	return pos;
}

/* Check a literal (true, false, null) at pos. */
uint32
jcs_j_scan_literal(const JcsJText *doc, uint32 pos, const char *lit, uint32 litlen)
{
	if (pos + litlen > doc->len || memcmp(doc->text + pos, lit, litlen) != 0)
		jcs_j_syntax_error(doc, pos);
	return pos + litlen;
}
