/*-------------------------------------------------------------------------
 *
 * jcs_json.c
 *	  Canonical JSON of json (text) documents.
 *
 * The json type keeps the document as text, so idem_canonical(json) and
 * idem_hash(json) parse it themselves.  That is what lets them refuse
 * duplicate member names (jsonb keeps the last one silently), refuse lone
 * UTF-16 surrogates (RFC 8785 requires valid Unicode; json input accepts
 * them), write U+0000 as \u0000 as RFC 8785 does (jsonb cannot hold it), and
 * read numbers straight from their text, without a numeric conversion.
 *
 * Two passes over the text:
 *
 * 1. Validate and index.  For every object record where it starts and
 *    ends, and its members (decoded name, offset of the value), sorted by
 *    name; duplicates show up as neighbours after the sort.  Arrays and
 *    scalars are only checked, not stored, so the index costs a few bytes
 *    per object member, not per value.
 *
 * 2. Write.  Walk the text again from the root: arrays and scalars are
 *    written as they are met, objects through their sorted member lists.
 *
 * Both passes recurse once per nesting level, with check_stack_depth().
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "mb/pg_wchar.h"
#include "miscadmin.h"

#include "jcs.h"
#include "jcs_json.h"
#include "jcs_number.h"

/* An object of the document: its extent and its sorted members. */
typedef struct JcsJObject
{
	uint32		start;			/* offset of '{' */
	uint32		end;			/* offset after '}' */
	int64		first;			/* index of its first member in members */
	int64		count;
} JcsJObject;

typedef struct JcsJDoc
{
	const unsigned char *text;
	uint32		len;
	JcsJObject *objs;			/* in order of their '{' */
	int64		nobjs;
	int64		maxobjs;
	JcsMember  *members;		/* members of each object, contiguous */
	int64		nmembers;
	int64		maxmembers;
	JcsMember  *pending;		/* members of the objects being parsed */
	int64		npending;
	int64		maxpending;
} JcsJDoc;

static uint32 jcs_j_parse_value(JcsJDoc *doc, uint32 pos);
static uint32 jcs_j_emit_value(JcsState *st, JcsJDoc *doc, uint32 pos);

/*
 * A json datum has passed json_in, so syntax errors are not expected here;
 * this still refuses anything that is not JSON rather than guess.
 */
static void
jcs_j_syntax_error(JcsJDoc *doc, uint32 pos)
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

/* Skip JSON whitespace. */
static inline uint32
jcs_j_skip_ws(JcsJDoc *doc, uint32 pos)
{
	while (pos < doc->len &&
		   (doc->text[pos] == ' ' || doc->text[pos] == '\n' ||
			doc->text[pos] == '\r' || doc->text[pos] == '\t'))
		pos++;
	return pos;
}

/* Value of four hex digits at pos, or -1. */
static int
jcs_j_hex4(JcsJDoc *doc, uint32 pos)
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
jcs_j_surrogate_error(uint32 pos, int cp)
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
jcs_j_unicode_escape(JcsJDoc *doc, uint32 pos, uint32 *next)
{
	int			cp = jcs_j_hex4(doc, pos + 2);

	if (cp < 0)
		jcs_j_syntax_error(doc, pos);
	if (cp >= 0xD800 && cp <= 0xDBFF)
	{
		int			lo = -1;

		if (pos + 7 < doc->len && doc->text[pos + 6] == '\\' &&
			doc->text[pos + 7] == 'u')
			lo = jcs_j_hex4(doc, pos + 8);
		if (lo < 0xDC00 || lo > 0xDFFF)
			jcs_j_surrogate_error(pos, cp);
		*next = pos + 12;
		return 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
	}
	if (cp >= 0xDC00 && cp <= 0xDFFF)
		jcs_j_surrogate_error(pos, cp);
	*next = pos + 6;
	return cp;
}

/*
 * Check the string whose opening quote is at pos; returns the offset after
 * its closing quote and tells whether it holds any escape.
 */
static uint32
jcs_j_scan_string(JcsJDoc *doc, uint32 pos, bool *escapes)
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
				(void) jcs_j_unicode_escape(doc, pos, &pos);
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
static int
jcs_j_decode_string(JcsJDoc *doc, uint32 start, uint32 end, char *out)
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
				cp = jcs_j_unicode_escape(doc, pos, &pos);
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
static uint32
jcs_j_scan_number(JcsJDoc *doc, uint32 pos)
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
static uint32
jcs_j_scan_literal(JcsJDoc *doc, uint32 pos, const char *lit, uint32 litlen)
{
	if (pos + litlen > doc->len || memcmp(doc->text + pos, lit, litlen) != 0)
		jcs_j_syntax_error(doc, pos);
	return pos + litlen;
}

/*
 * Refuse duplicate member names: RFC 8785 section 3.1 requires unique
 * names, and picking one of the values silently would hash a document the
 * sender did not mean.
 */
static void
jcs_j_duplicate_error(const JcsMember *m)
{
	ereport(ERROR,
			(errcode(ERRCODE_DUPLICATE_JSON_OBJECT_KEY_VALUE),
			 errmsg("duplicate JSON object member name \"%s\"",
					jcs_display(m->key, m->keylen)),
			 errdetail("Canonical JSON (RFC 8785) needs unique member names within an object."),
			 errhint("Remove the duplicate, or cast the document to jsonb, which keeps the last value of each name.")));
}

/* Pass 1 for an object whose '{' is at pos. */
static uint32
jcs_j_parse_object(JcsJDoc *doc, uint32 pos)
{
	int64		id = doc->nobjs;
	int64		base = doc->npending;
	int64		count;
	int64		first;
	int64		i;

	if (doc->nobjs >= doc->maxobjs)
	{
		doc->maxobjs *= 2;
		doc->objs = repalloc_huge(doc->objs, doc->maxobjs * sizeof(JcsJObject));
	}
	doc->nobjs++;
	doc->objs[id].start = pos;

	pos = jcs_j_skip_ws(doc, pos + 1);
	if (pos < doc->len && doc->text[pos] == '}')
		pos++;
	else
	{
		for (;;)
		{
			uint32		kstart = pos;
			bool		escapes;
			JcsMember  *m;

			if (pos >= doc->len || doc->text[pos] != '"')
				jcs_j_syntax_error(doc, pos);
			pos = jcs_j_scan_string(doc, pos, &escapes);
			if (doc->npending >= doc->maxpending)
			{
				doc->maxpending *= 2;
				doc->pending = repalloc_huge(doc->pending,
											 doc->maxpending * sizeof(JcsMember));
			}
			m = &doc->pending[doc->npending++];
			if (escapes)
			{
				char	   *k = palloc(pos - kstart);

				m->key = k;
				m->keylen = jcs_j_decode_string(doc, kstart + 1, pos - 1, k);
			}
			else
			{
				m->key = (const char *) doc->text + kstart + 1;
				m->keylen = pos - kstart - 2;
			}

			pos = jcs_j_skip_ws(doc, pos);
			if (pos >= doc->len || doc->text[pos] != ':')
				jcs_j_syntax_error(doc, pos);
			pos = jcs_j_skip_ws(doc, pos + 1);
			m->voff = pos;		/* m may move during the next call */
			pos = jcs_j_parse_value(doc, pos);
			pos = jcs_j_skip_ws(doc, pos);
			if (pos < doc->len && doc->text[pos] == ',')
			{
				pos = jcs_j_skip_ws(doc, pos + 1);
				continue;
			}
			if (pos < doc->len && doc->text[pos] == '}')
			{
				pos++;
				break;
			}
			jcs_j_syntax_error(doc, pos);
		}
	}

	/* move the members to their final place, sorted */
	count = doc->npending - base;
	first = doc->nmembers;
	if (doc->nmembers + count > doc->maxmembers)
	{
		doc->maxmembers = Max(doc->maxmembers * 2, doc->nmembers + count);
		doc->members = repalloc_huge(doc->members,
									 doc->maxmembers * sizeof(JcsMember));
	}
	if (count > 0)
		memcpy(doc->members + first, doc->pending + base,
			   count * sizeof(JcsMember));
	doc->nmembers += count;
	doc->npending = base;
	if (count > PG_INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("JSON object has too many members")));
	jcs_sort_members(doc->members + first, (int) count);
	for (i = 1; i < count; i++)
	{
		JcsMember  *a = &doc->members[first + i - 1];
		JcsMember  *b = &doc->members[first + i];

		if (jcs_key_cmp(a->key, a->keylen, b->key, b->keylen) == 0)
			jcs_j_duplicate_error(b);
	}
	doc->objs[id].first = first;
	doc->objs[id].count = count;
	doc->objs[id].end = pos;
	return pos;
}

/* Pass 1 for the value at pos (whitespace skipped); returns its end. */
static uint32
jcs_j_parse_value(JcsJDoc *doc, uint32 pos)
{
	bool		escapes;

	if (pos >= doc->len)
		jcs_j_syntax_error(doc, pos);
	switch (doc->text[pos])
	{
		case '{':
			check_stack_depth();
			return jcs_j_parse_object(doc, pos);
		case '[':
			check_stack_depth();
			pos = jcs_j_skip_ws(doc, pos + 1);
			if (pos < doc->len && doc->text[pos] == ']')
				return pos + 1;
			for (;;)
			{
				pos = jcs_j_parse_value(doc, pos);
				pos = jcs_j_skip_ws(doc, pos);
				if (pos < doc->len && doc->text[pos] == ',')
				{
					pos = jcs_j_skip_ws(doc, pos + 1);
					continue;
				}
				if (pos < doc->len && doc->text[pos] == ']')
					return pos + 1;
				jcs_j_syntax_error(doc, pos);
			}
		case '"':
			return jcs_j_scan_string(doc, pos, &escapes);
		case 't':
			return jcs_j_scan_literal(doc, pos, "true", 4);
		case 'f':
			return jcs_j_scan_literal(doc, pos, "false", 5);
		case 'n':
			return jcs_j_scan_literal(doc, pos, "null", 4);
		default:
			return jcs_j_scan_number(doc, pos);
	}
}

/* Find the object starting at pos (pass 2). */
static const JcsJObject *
jcs_j_find_object(JcsJDoc *doc, uint32 pos)
{
	int64		lo = 0;
	int64		hi = doc->nobjs - 1;

	while (lo <= hi)
	{
		int64		mid = lo + (hi - lo) / 2;

		if (doc->objs[mid].start == pos)
			return &doc->objs[mid];
		if (doc->objs[mid].start < pos)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	elog(ERROR, "canonical JSON: no object indexed at byte %u", pos);
	return NULL;				/* keep the compiler quiet */
}

/* Pass 2 for a string at pos; returns its end. */
static uint32
jcs_j_emit_string(JcsState *st, JcsJDoc *doc, uint32 pos)
{
	const unsigned char *t = doc->text;
	uint32		start = pos + 1;
	uint32		p = start;
	uint32		end;
	bool		escapes;
	char	   *buf;
	int			n;

	while (t[p] != '"' && t[p] != '\\')
		p++;
	if (t[p] == '"')
	{
		jcs_put_string(&st->sink, (const char *) t + start, p - start);
		return p + 1;
	}
	end = jcs_j_scan_string(doc, pos, &escapes);
	buf = palloc(end - start);
	n = jcs_j_decode_string(doc, start, end - 1, buf);
	jcs_put_string(&st->sink, buf, n);
	pfree(buf);
	return end;
}

/* Pass 2 for the value at pos; returns its end. */
static uint32
jcs_j_emit_value(JcsState *st, JcsJDoc *doc, uint32 pos)
{
	const unsigned char *t = doc->text;

	pos = jcs_j_skip_ws(doc, pos);
	switch (t[pos])
	{
		case '{':
			{
				const JcsJObject *obj = jcs_j_find_object(doc, pos);
				int64		i;

				check_stack_depth();
				CHECK_FOR_INTERRUPTS();
				jcs_putc(&st->sink, '{');
				for (i = 0; i < obj->count; i++)
				{
					const JcsMember *m = &doc->members[obj->first + i];

					if (i > 0)
						jcs_putc(&st->sink, ',');
					jcs_put_string(&st->sink, m->key, m->keylen);
					jcs_putc(&st->sink, ':');
					jcs_path_push(st, m->key, m->keylen, -1);
					(void) jcs_j_emit_value(st, doc, m->voff);
					jcs_path_pop(st);
				}
				jcs_putc(&st->sink, '}');
				return obj->end;
			}
		case '[':
			{
				int			i = 0;

				check_stack_depth();
				CHECK_FOR_INTERRUPTS();
				jcs_putc(&st->sink, '[');
				pos = jcs_j_skip_ws(doc, pos + 1);
				if (t[pos] != ']')
				{
					for (;;)
					{
						if (i > 0)
							jcs_putc(&st->sink, ',');
						jcs_path_push(st, NULL, 0, i++);
						pos = jcs_j_emit_value(st, doc, pos);
						jcs_path_pop(st);
						pos = jcs_j_skip_ws(doc, pos);
						if (t[pos] == ']')
							break;
						pos++;	/* the ',' */
					}
				}
				jcs_putc(&st->sink, ']');
				return pos + 1;
			}
		case '"':
			return jcs_j_emit_string(st, doc, pos);
		case 't':
			jcs_putn(&st->sink, "true", 4);
			return pos + 4;
		case 'f':
			jcs_putn(&st->sink, "false", 5);
			return pos + 5;
		case 'n':
			jcs_putn(&st->sink, "null", 4);
			return pos + 4;
		default:
			{
				uint32		end = jcs_j_scan_number(doc, pos);

				jcs_put_number(st, (const char *) t + pos, end - pos);
				return end;
			}
	}
}

/*
 * Write the canonical form of the json text (len bytes, not terminated).
 */
void
jcs_emit_json_text(JcsState *st, const char *text, size_t len)
{
	JcsJDoc		doc;
	uint32		pos;

	if (len >= PG_UINT32_MAX)
		elog(ERROR, "json document too large");	/* text cannot be */
	doc.text = (const unsigned char *) text;
	doc.len = len;
	doc.maxobjs = 64;
	doc.nobjs = 0;
	doc.objs = palloc(doc.maxobjs * sizeof(JcsJObject));
	doc.maxmembers = 256;
	doc.nmembers = 0;
	doc.members = palloc(doc.maxmembers * sizeof(JcsMember));
	doc.maxpending = 256;
	doc.npending = 0;
	doc.pending = palloc(doc.maxpending * sizeof(JcsMember));

	/* pass 1 */
	pos = jcs_j_skip_ws(&doc, 0);
	pos = jcs_j_parse_value(&doc, pos);
	pos = jcs_j_skip_ws(&doc, pos);
	if (pos != doc.len)
		jcs_j_syntax_error(&doc, pos);
	pfree(doc.pending);

	/* pass 2 */
	(void) jcs_j_emit_value(st, &doc, 0);
}
