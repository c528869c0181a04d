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
 * 1. Validate and index.  Check the whole text, refuse duplicate member
 *    names, and record only the objects whose members are not already in
 *    canonical order: for each, where it starts, and the offsets of its
 *    member names in canonical order (4 bytes a member).  Objects already
 *    in order (every empty or one-member object, and documents written by
 *    a canonical serializer) cost nothing, nor do arrays and scalars, so
 *    the index stays well below the size of the text whatever its shape.
 *    Member names are compared decoded; a name with escapes is decoded
 *    into a scratch stack that lives only until its object is checked.
 *
 * 2. Write.  Walk the text again from the root: arrays, scalars and
 *    objects in order are written as they are met, the other objects
 *    member by member in the order the index gives.
 *
 * Both passes recurse once per nesting level, with check_stack_depth().
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"

#include "jcs.h"
#include "jcs_json.h"
#include "jcs_json_lex.h"
#include "jcs_number.h"

/*
 * A member name met in pass 1: the offset of its opening quote, and either
 * its length (it has no escape and is used in place) or, with
 * JCS_J_DECODED set, the offset in the scratch stack of its decoded form
 * (a uint32 length, then the bytes).
 */
typedef struct JcsJName
{
	uint32		off;
	uint32		ref;
} JcsJName;

#define JCS_J_DECODED	0x80000000U

/* set on the last name offset of a record in JcsJDoc.recs */
#define JCS_J_LAST		0x80000000U

/* An object whose members must be reordered, and where its record is. */
typedef struct JcsJObject
{
	uint32		start;			/* offset of '{' */
	uint32		rec;			/* its record in JcsJDoc.recs */
} JcsJObject;

typedef struct JcsJDoc
{
	JcsJText	src;			/* the document */
	/* index: objects to reorder (by start after pass 1) and their records */
	JcsJObject *objs;
	int64		nobjs;
	int64		maxobjs;
	uint32	   *recs;			/* per object: its name offsets, the last
								 * with JCS_J_LAST */
	int64		nrecs;
	int64		maxrecs;
	/* pass 1 only: names of the objects being parsed, innermost last */
	JcsJName   *names;
	int64		nnames;
	int64		maxnames;
	char	   *scratch;		/* decoded names with escapes */
	int64		nscratch;
	int64		maxscratch;
} JcsJDoc;

static uint32 parse_value(JcsJDoc *doc, uint32 pos);
static uint32 emit_value(JcsState *st, JcsJDoc *doc, uint32 pos);

/*
 * Make room for n more elements of size elemsize in a growing array (NULL
 * when empty) of *max elements, used of them in use; returns the array,
 * which may move.
 */
static void *
reserve(void *arr, int64 *max, int64 used, int64 n, Size elemsize)
{
	if (used + n > *max)
	{
		*max = Max(Max(*max * 2, 64), used + n);
		if (arr == NULL)
			return MemoryContextAllocHuge(CurrentMemoryContext,
										  (Size) *max * elemsize);
		arr = repalloc_huge(arr, (Size) *max * elemsize);
	}
	return arr;
}

/* The decoded bytes and length of a name met in pass 1. */
static inline const char *
member_name(const JcsJDoc *doc, const JcsJName *n, int *len)
{
	const char *p;
	uint32		l;

	if (!(n->ref & JCS_J_DECODED))
	{
		*len = (int) n->ref;
		return (const char *) doc->src.text + n->off + 1;
	}
	p = doc->scratch + (n->ref & ~JCS_J_DECODED);
	memcpy(&l, p, sizeof(l));
	*len = (int) l;
	return p + sizeof(l);
}

/* Order two names of pass 1 (in the document arg) as RFC 8785 does. */
static int
name_cmp(const void *a, const void *b, void *arg)
{
	int			alen;
	int			blen;
	const char *ak = member_name(arg, a, &alen);
	const char *bk = member_name(arg, b, &blen);

	return jcs_key_cmp(ak, alen, bk, blen);
}

/*
 * Sort the names of one object.  Objects are mostly small, where an
 * insertion sort beats qsort's overhead.
 */
static void
sort_names(JcsJDoc *doc, JcsJName *m, int64 n)
{
	int64		i;

	if (n > 16)
	{
		qsort_arg(m, n, sizeof(JcsJName), name_cmp, doc);
		return;
	}
	for (i = 1; i < n; i++)
	{
		JcsJName	t = m[i];
		int64		j = i;

		for (; j > 0 && name_cmp(&m[j - 1], &t, doc) > 0; j--)
			m[j] = m[j - 1];
		m[j] = t;
	}
}

/*
 * Refuse duplicate member names: RFC 8785 section 3.1 requires unique
 * names, and picking one of the values silently would hash a document the
 * sender did not mean.
 */
static void
duplicate_error(const JcsJDoc *doc, const JcsJName *n)
{
	int			len;
	const char *name = member_name(doc, n, &len);

	ereport(ERROR,
			(errcode(ERRCODE_DUPLICATE_JSON_OBJECT_KEY_VALUE),
			 errmsg("duplicate JSON object member name \"%s\"",
					jcs_display(name, len)),
			 errdetail("Canonical JSON (RFC 8785) needs unique member names within an object."),
			 errhint("Remove the duplicate, or cast the document to jsonb, which keeps the last value of each name.")));
}

/*
 * Pass 1: note the name of a member whose opening quote is at kstart and
 * closing quote at end - 1.
 */
static void
push_name(JcsJDoc *doc, uint32 kstart, uint32 end, bool escapes)
{
	JcsJName   *n;
	uint32		l;

	doc->names = reserve(doc->names, &doc->maxnames, doc->nnames, 1,
						 sizeof(JcsJName));
	n = &doc->names[doc->nnames++];
	n->off = kstart;
	if (!escapes)
	{
		n->ref = end - kstart - 2;
		return;
	}
	doc->scratch = reserve(doc->scratch, &doc->maxscratch, doc->nscratch,
						   sizeof(uint32) + (end - kstart), 1);
	l = jcs_j_decode_string(&doc->src, kstart + 1, end - 1,
							doc->scratch + doc->nscratch + sizeof(uint32));
	memcpy(doc->scratch + doc->nscratch, &l, sizeof(l));
	n->ref = (uint32) doc->nscratch | JCS_J_DECODED;
	doc->nscratch += sizeof(uint32) + l;
}

/*
 * Pass 1, at the end of the object that starts at start and whose names
 * are m[0 .. count-1]: refuse duplicates and, unless the names are already
 * in canonical order, record their offsets in that order.
 */
static void
index_object(JcsJDoc *doc, uint32 start, JcsJName *m, int64 count)
{
	int64		i;

	for (i = 1; i < count; i++)
	{
		int			c = name_cmp(&m[i - 1], &m[i], doc);

		if (c == 0)
			duplicate_error(doc, &m[i]);
		if (c > 0)
			break;
	}
	if (i >= count)
		return;					/* in order */

	sort_names(doc, m, count);
	for (i = 1; i < count; i++)
	{
		if (name_cmp(&m[i - 1], &m[i], doc) == 0)
			duplicate_error(doc, &m[i]);
	}
	doc->objs = reserve(doc->objs, &doc->maxobjs, doc->nobjs, 1,
						sizeof(JcsJObject));
	doc->objs[doc->nobjs].start = start;
	doc->objs[doc->nobjs].rec = (uint32) doc->nrecs;
	doc->nobjs++;
	doc->recs = reserve(doc->recs, &doc->maxrecs, doc->nrecs, count,
						sizeof(uint32));
	for (i = 0; i < count; i++)
		doc->recs[doc->nrecs++] = m[i].off;
	doc->recs[doc->nrecs - 1] |= JCS_J_LAST;
}

/* Pass 1 for an object whose '{' is at pos. */
static uint32
parse_object(JcsJDoc *doc, uint32 pos)
{
	uint32		start = pos;
	int64		base = doc->nnames;
	int64		sbase = doc->nscratch;

	pos = jcs_j_skip_ws(&doc->src, pos + 1);
	if (pos < doc->src.len && doc->src.text[pos] == '}')
		return pos + 1;
	for (;;)
	{
		uint32		kstart = pos;
		bool		escapes;

		if (pos >= doc->src.len || doc->src.text[pos] != '"')
			jcs_j_syntax_error(&doc->src, pos);
		pos = jcs_j_scan_string(&doc->src, pos, &escapes);
		push_name(doc, kstart, pos, escapes);

		pos = jcs_j_skip_ws(&doc->src, pos);
		if (pos >= doc->src.len || doc->src.text[pos] != ':')
			jcs_j_syntax_error(&doc->src, pos);
		pos = jcs_j_skip_ws(&doc->src, pos + 1);
		pos = parse_value(doc, pos);
		if (!jcs_j_next_item(&doc->src, &pos, '}'))
			break;
	}
	index_object(doc, start, doc->names + base, doc->nnames - base);
	doc->nnames = base;
	doc->nscratch = sbase;
	return pos;
}

/* Pass 1 for the value at pos (whitespace skipped); returns its end. */
static uint32
parse_value(JcsJDoc *doc, uint32 pos)
{
	bool		escapes;

	if (pos >= doc->src.len)
		jcs_j_syntax_error(&doc->src, pos);
	switch (doc->src.text[pos])
	{
		case '{':
			check_stack_depth();
			return parse_object(doc, pos);
		case '[':
			check_stack_depth();
			pos = jcs_j_skip_ws(&doc->src, pos + 1);
			if (pos < doc->src.len && doc->src.text[pos] == ']')
				return pos + 1;
			do
			{
				pos = parse_value(doc, pos);
			} while (jcs_j_next_item(&doc->src, &pos, ']'));
			return pos;
		case '"':
			return jcs_j_scan_string(&doc->src, pos, &escapes);
		case 't':
			return jcs_j_scan_literal(&doc->src, pos, "true", 4);
		case 'f':
			return jcs_j_scan_literal(&doc->src, pos, "false", 5);
		case 'n':
			return jcs_j_scan_literal(&doc->src, pos, "null", 4);
		default:
			return jcs_j_scan_number(&doc->src, pos);
	}
}

/* qsort comparator: objects to reorder by their start. */
static int
object_cmp(const void *a, const void *b)
{
	uint32		sa = ((const JcsJObject *) a)->start;
	uint32		sb = ((const JcsJObject *) b)->start;

	return (sa > sb) - (sa < sb);
}

/*
 * Pass 2: the record of the object starting at pos, or -1 when its
 * members are already in canonical order.
 */
static int64
find_object(JcsJDoc *doc, uint32 pos)
{
	int64		lo = 0;
	int64		hi = doc->nobjs - 1;

	while (lo <= hi)
	{
		int64		mid = lo + (hi - lo) / 2;

		if (doc->objs[mid].start == pos)
			return doc->objs[mid].rec;
		if (doc->objs[mid].start < pos)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

/*
 * Pass 2: the decoded bytes and length of the checked string whose opening
 * quote is at pos, and in *end the offset after its closing quote.  A
 * string without escapes is returned in place; otherwise *buf is set to a
 * palloc'd copy the caller frees.
 */
static const char *
read_string(JcsJDoc *doc, uint32 pos, int *len, char **buf,
			uint32 *end)
{
	const unsigned char *t = doc->src.text;
	uint32		start = pos + 1;
	uint32		p = start;
	bool		escapes;

	*buf = NULL;
	while (t[p] != '"' && t[p] != '\\')
		p++;
	if (t[p] == '"')
	{
		*len = p - start;
		*end = p + 1;
		return (const char *) t + start;
	}
	*end = jcs_j_scan_string(&doc->src, pos, &escapes);
	*buf = palloc(*end - start);
	*len = jcs_j_decode_string(&doc->src, start, *end - 1, *buf);
	return *buf;
}

/*
 * Pass 2 for the member whose name starts at pos: write its name, the
 * colon and its value; returns the end of the value.
 */
static uint32
emit_member(JcsState *st, JcsJDoc *doc, uint32 pos)
{
	char	   *buf;
	int			len;
	uint32		end;
	const char *name = read_string(doc, pos, &len, &buf, &end);

	jcs_put_string(&st->sink, name, len);
	jcs_putc(&st->sink, ':');
	jcs_path_push(st, name, len, -1);
	end = emit_value(st, doc, jcs_j_skip_ws(&doc->src, end) + 1);
	jcs_path_pop(st);
	if (buf)
		pfree(buf);
	return end;
}

/* Pass 2 for an object whose '{' is at pos; returns its end. */
static uint32
emit_object(JcsState *st, JcsJDoc *doc, uint32 pos)
{
	const unsigned char *t = doc->src.text;
	int64		rec = find_object(doc, pos);

	check_stack_depth();
	CHECK_FOR_INTERRUPTS();
	jcs_putc(&st->sink, '{');
	if (rec < 0)
	{
		/* members already in order: write them as they come */
		pos = jcs_j_skip_ws(&doc->src, pos + 1);
		while (t[pos] != '}')
		{
			pos = jcs_j_skip_ws(&doc->src, emit_member(st, doc, pos));
			if (t[pos] == ',')
			{
				jcs_putc(&st->sink, ',');
				pos = jcs_j_skip_ws(&doc->src, pos + 1);
			}
		}
	}
	else
	{
		uint32		last = 0;
		uint32		r;

		/* the member written last in the text ends last, before the '}' */
		do
		{
			uint32		end;

			r = doc->recs[rec++];
			end = emit_member(st, doc, r & ~JCS_J_LAST);
			last = Max(last, end);
			if (!(r & JCS_J_LAST))
				jcs_putc(&st->sink, ',');
		} while (!(r & JCS_J_LAST));
		pos = jcs_j_skip_ws(&doc->src, last);
	}
	jcs_putc(&st->sink, '}');
	return pos + 1;
}

/* Pass 2 for the value at pos; returns its end. */
static uint32
emit_value(JcsState *st, JcsJDoc *doc, uint32 pos)
{
	const unsigned char *t = doc->src.text;

	pos = jcs_j_skip_ws(&doc->src, pos);
	switch (t[pos])
	{
		case '{':
			return emit_object(st, doc, pos);
		case '[':
			{
				int			i = 0;

				check_stack_depth();
				CHECK_FOR_INTERRUPTS();
				jcs_putc(&st->sink, '[');
				pos = jcs_j_skip_ws(&doc->src, pos + 1);
				while (t[pos] != ']')
				{
					if (i > 0)
						jcs_putc(&st->sink, ',');
					jcs_path_push(st, NULL, 0, i++);
					pos = jcs_j_skip_ws(&doc->src, emit_value(st, doc, pos));
					jcs_path_pop(st);
					if (t[pos] == ',')
						pos++;
				}
				jcs_putc(&st->sink, ']');
				return pos + 1;
			}
		case '"':
			{
				char	   *buf;
				int			len;
				uint32		end;
				const char *s = read_string(doc, pos, &len, &buf, &end);

				jcs_put_string(&st->sink, s, len);
				if (buf)
					pfree(buf);
				return end;
			}
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
				uint32		end = jcs_j_scan_number(&doc->src, pos);

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

	if (len >= PG_UINT32_MAX / 2)
		elog(ERROR, "json document too large");	/* text cannot be */
	memset(&doc, 0, sizeof(doc));
	doc.src.text = (const unsigned char *) text;
	doc.src.len = len;

	/* pass 1 */
	pos = jcs_j_skip_ws(&doc.src, 0);
	pos = parse_value(&doc, pos);
	pos = jcs_j_skip_ws(&doc.src, pos);
	if (pos != doc.src.len)
		jcs_j_syntax_error(&doc.src, pos);
	if (doc.names)
		pfree(doc.names);
	if (doc.scratch)
		pfree(doc.scratch);

	/*
	 * Objects were recorded as they ended, so one nested in another comes
	 * before it; pass 2 looks them up by where they start.  (qsort returns
	 * at once when they are already in order, the common case.)
	 */
	if (doc.nobjs > 1)
		qsort(doc.objs, doc.nobjs, sizeof(JcsJObject), object_cmp);

	/* pass 2 */
	(void) emit_value(st, &doc, 0);
}
