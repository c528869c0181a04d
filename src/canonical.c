/*-------------------------------------------------------------------------
 *
 * canonical.c
 *	  RFC 8785 (JCS) canonical JSON: idem_canonical and idem_hash.
 *
 * Workflows derive idempotency keys and payload fingerprints from JSON
 * documents.  Hashing jsonb::text or a body in arrival order misses
 * duplicates (key order, whitespace and number spelling vary between
 * retries), so idem_gate hashes the RFC 8785 canonical form instead, which
 * any JCS implementation reproduces byte for byte.
 *
 * jsonb documents are walked directly in their binary container format: no
 * JsonbValue tree and no iterator allocations, only a member array per
 * object (kept on one reusable stack) to sort its members by UTF-16 code
 * units.  json documents are parsed by jcs_json.c.  Numbers are handled by
 * jcs_number.c.
 *
 * Each call works in a child memory context that is deleted at the end.
 * idem_hash streams the canonical bytes into SHA-256 through a small
 * buffer, so its memory use does not grow with the canonical form.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/cryptohash.h"
#include "common/sha2.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

#include "jcs.h"

PG_FUNCTION_INFO_V1(idem_canonical_jsonb);
PG_FUNCTION_INFO_V1(idem_canonical_json);
PG_FUNCTION_INFO_V1(idem_hash_jsonb);
PG_FUNCTION_INFO_V1(idem_hash_json);
PG_FUNCTION_INFO_V1(idem_hash_fields);

/* hash mode staging buffer */
#define JCS_HASH_CHUNK		(64 * 1024)

/* longest member name or field shown in a message, in characters */
#define JCS_DISPLAY_CHARS	64

/*
 * Escapes of RFC 8785 section 3.2.2.2, by byte: 0 = copy the byte, 'u' =
 * \u00xx with lowercase hex, anything else = backslash and that letter.
 */
static const char jcs_escape[256] = {
	'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'b', 't', 'n', 'u', 'f', 'r', 'u', 'u',
	'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u',
	0, 0, '"', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, '\\', 0, 0, 0,
	/* 0x60 .. 0xff: all zero */
};

static void jcs_emit_container(JcsState *st, const JsonbContainer *jc);

/*
 * Make room in the sink for need more bytes: in hash mode by feeding the
 * buffered bytes to SHA-256, in text mode by enlarging the buffer up to
 * the largest possible text value.
 */
void
jcs_sink_grow(JcsSink *sink, size_t need)
{
	size_t		newcap;

	if (sink->hash)
	{
		if (sink->len > 0 &&
			pg_cryptohash_update(sink->hash, (uint8 *) sink->data,
								 sink->len) < 0)
			elog(ERROR, "could not update SHA-256 context: %s",
				 pg_cryptohash_error(sink->hash));
		sink->len = 0;
		Assert(need <= sink->cap);
		return;
	}

	if (sink->len + need > MaxAllocSize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("canonical JSON form is too large"),
				 errdetail("The canonical form exceeds the largest text value, 1 GB."),
				 errhint("Use idem_hash(), which does not build the canonical text.")));
	newcap = Max(sink->cap * 2, sink->len + need);
	newcap = Min(newcap, MaxAllocSize);
	sink->data = repalloc(sink->data, newcap);
	sink->cap = newcap;
}

/*
 * Append n bytes that do not fit in the sink's free space.  Long runs go
 * straight into the hash without staging.
 */
void
jcs_sink_put_big(JcsSink *sink, const char *p, size_t n)
{
	if (sink->hash)
	{
		jcs_sink_grow(sink, 0);
		if (n >= sink->cap)
		{
			if (pg_cryptohash_update(sink->hash, (const uint8 *) p, n) < 0)
				elog(ERROR, "could not update SHA-256 context: %s",
					 pg_cryptohash_error(sink->hash));
			return;
		}
	}
	else
		jcs_sink_grow(sink, n);
	memcpy(sink->data + sink->len, p, n);
	sink->len += n;
}

/*
 * Append a JSON string in RFC 8785 form.  s is UTF-8 with escapes already
 * decoded (it may contain U+0000 when it comes from a json document).
 * Everything but the control characters, '"' and '\' is copied raw.
 */
void
jcs_put_string(JcsSink *sink, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *) s;
	const unsigned char *end = p + len;
	const unsigned char *run = p;

	jcs_putc(sink, '"');
	for (; p < end; p++)
	{
		char		e = jcs_escape[*p];

		if (likely(e == 0))
			continue;
		if (p > run)
			jcs_putn(sink, (const char *) run, p - run);
		if (e == 'u')
		{
			static const char hex[] = "0123456789abcdef";
			char		u[6] = {'\\', 'u', '0', '0', 0, 0};

			u[4] = hex[*p >> 4];
			u[5] = hex[*p & 0xf];
			jcs_putn(sink, u, 6);
		}
		else
		{
			char		b[2] = {'\\', e};

			jcs_putn(sink, b, 2);
		}
		run = p + 1;
	}
	if (p > run)
		jcs_putn(sink, (const char *) run, p - run);
	jcs_putc(sink, '"');
}

/*
 * Order two member names (UTF-8) as RFC 8785 requires: by their UTF-16
 * code units.  That is UTF-8 byte order except that U+E000..U+FFFF (lead
 * bytes 0xEE, 0xEF) sort after the supplementary characters (lead bytes
 * 0xF0..0xF4), whose UTF-16 surrogates are smaller.  At the first
 * differing byte both names are either at a character boundary or inside
 * characters with the same lead byte, so looking at that byte is enough.
 */
int
jcs_key_cmp(const char *a, int alen, const char *b, int blen)
{
	int			m = Min(alen, blen);
	int			i = 0;
	unsigned char ca;
	unsigned char cb;

	while (i < m && a[i] == b[i])
		i++;
	if (i == m)
		return (alen > blen) - (alen < blen);
	ca = (unsigned char) a[i];
	cb = (unsigned char) b[i];
	if (ca >= 0xEE && cb >= 0xEE)
	{
		bool		ahi = (ca <= 0xEF);
		bool		bhi = (cb <= 0xEF);

		if (ahi != bhi)
			return ahi ? 1 : -1;
	}
	return ca < cb ? -1 : 1;
}

static int
jcs_member_cmp(const void *a, const void *b)
{
	const JcsMember *ma = (const JcsMember *) a;
	const JcsMember *mb = (const JcsMember *) b;

	return jcs_key_cmp(ma->key, ma->keylen, mb->key, mb->keylen);
}

/*
 * Sort object members by name.  Objects in payloads are small, where an
 * insertion sort beats qsort's overhead.
 */
void
jcs_sort_members(JcsMember *m, int n)
{
	int			i;

	if (n > 16)
	{
		qsort(m, n, sizeof(JcsMember), jcs_member_cmp);
		return;
	}
	for (i = 1; i < n; i++)
	{
		JcsMember	t = m[i];
		int			j = i;

		while (j > 0 && jcs_key_cmp(m[j - 1].key, m[j - 1].keylen,
									t.key, t.keylen) > 0)
		{
			m[j] = m[j - 1];
			j--;
		}
		m[j] = t;
	}
}

/*
 * Enter a member (key != NULL) or an array element, for error messages.
 */
void
jcs_path_push(JcsState *st, const char *key, int keylen, int index)
{
	if (st->depth >= st->maxdepth)
	{
		st->maxdepth *= 2;
		st->path = repalloc(st->path, st->maxdepth * sizeof(JcsPathElem));
	}
	st->path[st->depth].key = key;
	st->path[st->depth].keylen = keylen;
	st->path[st->depth].index = index;
	st->depth++;
}

/*
 * Show a string in a message: clipped to JCS_DISPLAY_CHARS characters,
 * with control characters (and U+0000 from json input) escaped.
 */
char *
jcs_display(const char *s, int len)
{
	StringInfoData buf;
	int			clip = len;
	int			i;

	if (pg_mbstrlen_with_len(s, len) > JCS_DISPLAY_CHARS)
		clip = pg_mbcharcliplen(s, len, JCS_DISPLAY_CHARS - 3);
	initStringInfo(&buf);
	for (i = 0; i < clip; i++)
	{
		unsigned char c = (unsigned char) s[i];

		if (c < 0x20)
			appendStringInfo(&buf, "\\u%04x", c);
		else
			appendStringInfoChar(&buf, (char) c);
	}
	if (clip < len)
		appendStringInfoString(&buf, "...");
	return buf.data;
}

/*
 * Describe where the current value is, as an RFC 6901 JSON Pointer.
 */
char *
jcs_path_text(JcsState *st)
{
	StringInfoData buf;
	int			i;

	if (st->depth == 0)
		return pstrdup("the top level of the document");
	initStringInfo(&buf);
	appendStringInfoString(&buf, "JSON pointer \"");
	for (i = 0; i < st->depth; i++)
	{
		JcsPathElem *e = &st->path[i];

		appendStringInfoChar(&buf, '/');
		if (e->key == NULL)
			appendStringInfo(&buf, "%d", e->index);
		else if (e->index == JCS_PATH_POINTER)
			appendStringInfoString(&buf, jcs_display(e->key + 1, e->keylen - 1));
		else
		{
			char	   *k = jcs_display(e->key, e->keylen);
			char	   *p;

			for (p = k; *p; p++)
			{
				if (*p == '~')
					appendStringInfoString(&buf, "~0");
				else if (*p == '/')
					appendStringInfoString(&buf, "~1");
				else
					appendStringInfoChar(&buf, *p);
			}
		}
	}
	appendStringInfoChar(&buf, '"');
	return buf.data;
}

/*
 * Append a jsonb numeric.
 */
static void
jcs_emit_numeric(JcsState *st, Numeric num)
{
	char	   *s;

	if (numeric_is_nan(num) || numeric_is_inf(num))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("number %s is not allowed in canonical JSON",
						numeric_is_nan(num) ? "NaN" : "Infinity"),
				 errdetail("RFC 8785 refuses NaN and Infinity.")));
	s = DatumGetCString(DirectFunctionCall1(numeric_out,
											NumericGetDatum(num)));
	jcs_put_number(st, s, strlen(s));
	pfree(s);
}

/*
 * Append the jsonb value described by a JEntry, the data area it lives in
 * and its start and end offsets in that area.
 */
static inline void
jcs_emit_jentry(JcsState *st, JEntry je, const char *base,
				uint32 off, uint32 end)
{
	switch (je & JENTRY_TYPEMASK)
	{
		case JENTRY_ISSTRING:
			jcs_put_string(&st->sink, base + off, end - off);
			break;
		case JENTRY_ISNUMERIC:
			jcs_emit_numeric(st, (Numeric) (base + INTALIGN(off)));
			break;
		case JENTRY_ISBOOL_FALSE:
			jcs_putn(&st->sink, "false", 5);
			break;
		case JENTRY_ISBOOL_TRUE:
			jcs_putn(&st->sink, "true", 4);
			break;
		case JENTRY_ISNULL:
			jcs_putn(&st->sink, "null", 4);
			break;
		case JENTRY_ISCONTAINER:
			jcs_emit_container(st, (const JsonbContainer *) (base + INTALIGN(off)));
			break;
		default:
			elog(ERROR, "unknown jsonb entry type 0x%08x", je);
	}
}

/*
 * Reserve n members on the state's member stack; returns the index of the
 * first.  The stack may move, so callers keep indexes, not pointers.
 */
static int
jcs_members_alloc(JcsState *st, int n)
{
	int			first = st->nmembers;

	if (st->nmembers + n > st->maxmembers)
	{
		int			newmax = Max(st->maxmembers * 2, st->nmembers + n);

		st->members = repalloc_huge(st->members, (Size) newmax * sizeof(JcsMember));
		st->maxmembers = newmax;
	}
	st->nmembers += n;
	return first;
}

/*
 * Append a jsonb object or array (or the single value of a scalar root).
 */
static void
jcs_emit_container(JcsState *st, const JsonbContainer *jc)
{
	uint32		n = JsonContainerSize(jc);
	uint32		off = 0;
	uint32		i;

	check_stack_depth();
	CHECK_FOR_INTERRUPTS();

	if (JsonContainerIsObject(jc))
	{
		const char *base = (const char *) &jc->children[n * 2];
		int			first = jcs_members_alloc(st, n);
		JcsMember  *m = st->members + first;

		for (i = 0; i < n; i++)
		{
			m[i].key = base + off;
			JBE_ADVANCE_OFFSET(off, jc->children[i]);
			m[i].keylen = (base + off) - m[i].key;
		}
		for (i = 0; i < n; i++)
		{
			m[i].ventry = jc->children[n + i];
			m[i].voff = off;
			JBE_ADVANCE_OFFSET(off, jc->children[n + i]);
			m[i].vend = off;
		}
		jcs_sort_members(m, n);

		jcs_putc(&st->sink, '{');
		for (i = 0; i < n; i++)
		{
			/* the stack may have moved while writing the previous value */
			m = st->members + first + i;
			if (i > 0)
				jcs_putc(&st->sink, ',');
			jcs_put_string(&st->sink, m->key, m->keylen);
			jcs_putc(&st->sink, ':');
			jcs_path_push(st, m->key, m->keylen, -1);
			jcs_emit_jentry(st, m->ventry, base, m->voff, m->vend);
			jcs_path_pop(st);
		}
		jcs_putc(&st->sink, '}');
		st->nmembers = first;
	}
	else
	{
		const char *base = (const char *) &jc->children[n];
		bool		scalar = JsonContainerIsScalar(jc);

		if (!scalar)
			jcs_putc(&st->sink, '[');
		for (i = 0; i < n; i++)
		{
			uint32		start = off;

			JBE_ADVANCE_OFFSET(off, jc->children[i]);
			if (i > 0)
				jcs_putc(&st->sink, ',');
			if (!scalar)
				jcs_path_push(st, NULL, 0, i);
			jcs_emit_jentry(st, jc->children[i], base, start, off);
			if (!scalar)
				jcs_path_pop(st);
		}
		if (!scalar)
			jcs_putc(&st->sink, ']');
	}
}

/*
 * Append a JsonbValue as returned by the jsonb lookup functions.
 */
static void
jcs_emit_jsonbvalue(JcsState *st, const JsonbValue *v)
{
	switch (v->type)
	{
		case jbvNull:
			jcs_putn(&st->sink, "null", 4);
			break;
		case jbvBool:
			if (v->val.boolean)
				jcs_putn(&st->sink, "true", 4);
			else
				jcs_putn(&st->sink, "false", 5);
			break;
		case jbvString:
			jcs_put_string(&st->sink, v->val.string.val, v->val.string.len);
			break;
		case jbvNumeric:
			jcs_emit_numeric(st, v->val.numeric);
			break;
		case jbvBinary:
			jcs_emit_container(st, v->val.binary.data);
			break;
		default:
			elog(ERROR, "unexpected jsonb value type %d", (int) v->type);
	}
}

/*
 * The canonical form is defined over Unicode text and is hashed as UTF-8,
 * so the database must store UTF-8: other encodings cannot hold every
 * string (SQL_ASCII does not even say what its bytes mean).
 */
static void
jcs_check_encoding(void)
{
	if (GetDatabaseEncoding() != PG_UTF8)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("canonical JSON needs a UTF8 database"),
				 errdetail("The database encoding is %s; RFC 8785 canonical JSON is UTF-8 text.",
						   GetDatabaseEncodingName()),
				 errhint("Create the database with ENCODING 'UTF8'.")));
}

/*
 * Read the numbers => argument.
 */
static JcsNumbers
jcs_parse_numbers(text *t)
{
	char	   *s = text_to_cstring(t);

	if (strcmp(s, "safe") == 0)
		return JCS_NUMBERS_SAFE;
	if (strcmp(s, "rfc") == 0)
		return JCS_NUMBERS_RFC;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown numbers policy \"%s\"", jcs_display(s, strlen(s))),
			 errhint("Use numbers => 'safe' (the default: refuse a number that a double would change at or beyond 2^53 or below 2^-1022) or numbers => 'rfc' (round every number to the nearest double).")));
	return JCS_NUMBERS_SAFE;	/* keep the compiler quiet */
}

/*
 * Set up a call: the state lives in a fresh child memory context, made the
 * current one.  In text mode the output buffer is allocated in the
 * caller's context, sized for the input, and becomes the result as is.
 */
static MemoryContext
jcs_begin(JcsState *st, JcsNumbers numbers, bool hash, size_t size_hint)
{
	MemoryContext callcxt = CurrentMemoryContext;
	MemoryContext cxt;

	cxt = AllocSetContextCreate(callcxt, "idem_gate canonical JSON",
								ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(cxt);

	memset(st, 0, sizeof(*st));
	st->numbers = numbers;
	st->maxdepth = 32;
	st->path = palloc(st->maxdepth * sizeof(JcsPathElem));
	st->maxmembers = 256;
	st->members = palloc(st->maxmembers * sizeof(JcsMember));

	if (hash)
	{
		st->sink.hash = pg_cryptohash_create(PG_SHA256);
		if (st->sink.hash == NULL || pg_cryptohash_init(st->sink.hash) < 0)
			elog(ERROR, "could not initialize SHA-256 context: %s",
				 pg_cryptohash_error(st->sink.hash));
		st->sink.cap = JCS_HASH_CHUNK;
		st->sink.data = palloc(st->sink.cap);
		st->sink.len = 0;
	}
	else
	{
		st->sink.cap = Min(Max(size_hint + size_hint / 8, 256), MaxAllocSize);
		st->sink.data = MemoryContextAlloc(callcxt, st->sink.cap);
		st->sink.len = VARHDRSZ;
	}
	return callcxt;
}

/*
 * Finish a text mode call: the buffer becomes a text datum.
 */
static text *
jcs_finish_text(JcsState *st, MemoryContext callcxt)
{
	MemoryContext cxt = CurrentMemoryContext;
	text	   *result = (text *) st->sink.data;

	SET_VARSIZE(result, st->sink.len);
	MemoryContextSwitchTo(callcxt);
	MemoryContextDelete(cxt);
	return result;
}

/*
 * Finish a hash mode call: 64 lowercase hex digits of the SHA-256 digest.
 */
static text *
jcs_finish_hash(JcsState *st, MemoryContext callcxt)
{
	MemoryContext cxt = CurrentMemoryContext;
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	char		hex[PG_SHA256_DIGEST_LENGTH * 2];
	static const char hexdigits[] = "0123456789abcdef";
	int			i;

	jcs_sink_grow(&st->sink, 0);	/* flush */
	if (pg_cryptohash_final(st->sink.hash, digest, sizeof(digest)) < 0)
		elog(ERROR, "could not finalize SHA-256 context: %s",
			 pg_cryptohash_error(st->sink.hash));
	pg_cryptohash_free(st->sink.hash);
	for (i = 0; i < PG_SHA256_DIGEST_LENGTH; i++)
	{
		hex[2 * i] = hexdigits[digest[i] >> 4];
		hex[2 * i + 1] = hexdigits[digest[i] & 0xf];
	}
	MemoryContextSwitchTo(callcxt);
	MemoryContextDelete(cxt);
	return cstring_to_text_with_len(hex, sizeof(hex));
}

/*
 * The numbers => argument (argno): NULL is an error, not a NULL result, so
 * that a hash used as a fingerprint is never silently missing.
 */
static JcsNumbers
jcs_numbers_arg(FunctionCallInfo fcinfo, int argno)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("numbers must not be null"),
				 errhint("Use numbers => 'safe' (the default) or numbers => 'rfc'.")));
	return jcs_parse_numbers(PG_GETARG_TEXT_PP(argno));
}

/*
 * The four whole-document functions: idem_canonical and idem_hash of a
 * jsonb or a json document.  A NULL document gives NULL, like any SQL
 * function of a missing value.
 */
static Datum
jcs_document(FunctionCallInfo fcinfo, bool is_json, bool hash)
{
	JcsNumbers	numbers;
	JcsState	st;
	MemoryContext callcxt;

	jcs_check_encoding();
	numbers = jcs_numbers_arg(fcinfo, 1);
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	if (is_json)
	{
		text	   *json = PG_GETARG_TEXT_PP(0);

		callcxt = jcs_begin(&st, numbers, hash, VARSIZE_ANY_EXHDR(json));
		jcs_emit_json_text(&st, VARDATA_ANY(json), VARSIZE_ANY_EXHDR(json));
	}
	else
	{
		Jsonb	   *jb = PG_GETARG_JSONB_P(0);

		callcxt = jcs_begin(&st, numbers, hash, VARSIZE(jb));
		jcs_emit_container(&st, &jb->root);
	}
	if (hash)
		PG_RETURN_TEXT_P(jcs_finish_hash(&st, callcxt));
	PG_RETURN_TEXT_P(jcs_finish_text(&st, callcxt));
}

/* idem_canonical(doc jsonb, numbers text) returns text */
Datum
idem_canonical_jsonb(PG_FUNCTION_ARGS)
{
	return jcs_document(fcinfo, false, false);
}

/* idem_canonical(doc json, numbers text) returns text */
Datum
idem_canonical_json(PG_FUNCTION_ARGS)
{
	return jcs_document(fcinfo, true, false);
}

/* idem_hash(doc jsonb, numbers text) returns text */
Datum
idem_hash_jsonb(PG_FUNCTION_ARGS)
{
	return jcs_document(fcinfo, false, true);
}

/* idem_hash(doc json, numbers text) returns text */
Datum
idem_hash_json(PG_FUNCTION_ARGS)
{
	return jcs_document(fcinfo, true, true);
}

/*
 * Name a jsonb value's type for messages.
 */
static const char *
jcs_jsonb_type_name(Jsonb *jb)
{
	JsonbValue	v;

	if (JB_ROOT_IS_SCALAR(jb))
	{
		JsonbExtractScalar(&jb->root, &v);
		switch (v.type)
		{
			case jbvString:
				return "a string";
			case jbvNumeric:
				return "a number";
			case jbvBool:
				return "a boolean";
			default:
				return "null";
		}
	}
	if (JB_ROOT_IS_ARRAY(jb))
		return "an array";
	return "an object";
}

/*
 * Raise the error for an identity field absent from the document.
 */
static void
jcs_field_missing(const char *spec, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("identity field \"%s\" is missing from the document",
					jcs_display(spec, strlen(spec))),
			 detail ? errdetail_internal("%s", detail) : 0,
			 errhint("Every identity field must be present: idem_gate never hashes a partial identity.")));
}

/*
 * Find the value of one identity field: a top-level member name, or an
 * RFC 6901 JSON Pointer when it starts with '/'.  Errors if it is absent.
 */
static JsonbValue *
jcs_resolve_field(Jsonb *jb, const char *spec)
{
	JsonbValue	key;
	JsonbValue *cur;
	JsonbValue	rootv;
	const char *p;

	if (spec[0] != '/')
	{
		key.type = jbvString;
		key.val.string.val = (char *) spec;
		key.val.string.len = strlen(spec);
		cur = findJsonbValueFromContainer(&jb->root, JB_FOBJECT, &key);
		if (cur == NULL)
			jcs_field_missing(spec, NULL);
		return cur;
	}

	rootv.type = jbvBinary;
	rootv.val.binary.data = &jb->root;
	rootv.val.binary.len = VARSIZE(jb) - VARHDRSZ;
	cur = &rootv;
	p = spec;
	while (*p == '/')
	{
		StringInfoData tok;
		const JsonbContainer *jc;

		/* unescape one reference token */
		initStringInfo(&tok);
		for (p++; *p && *p != '/'; p++)
		{
			if (*p == '~')
			{
				if (p[1] == '0')
					appendStringInfoChar(&tok, '~');
				else if (p[1] == '1')
					appendStringInfoChar(&tok, '/');
				else
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("invalid JSON pointer \"%s\" in identity fields",
									jcs_display(spec, strlen(spec))),
							 errdetail("In a JSON pointer \"~\" must be followed by \"0\" or \"1\" (RFC 6901)."),
							 errhint("Write \"~0\" for \"~\" and \"~1\" for \"/\" in a member name.")));
				p++;
			}
			else
				appendStringInfoChar(&tok, *p);
		}

		if (cur->type != jbvBinary)
			jcs_field_missing(spec, psprintf("The pointer goes through a scalar before \"%s\".",
											 jcs_display(tok.data, tok.len)));
		jc = cur->val.binary.data;
		if (JsonContainerIsObject(jc))
		{
			key.type = jbvString;
			key.val.string.val = tok.data;
			key.val.string.len = tok.len;
			cur = findJsonbValueFromContainer(unconstify(JsonbContainer *, jc), JB_FOBJECT, &key);
			if (cur == NULL)
				jcs_field_missing(spec, psprintf("There is no member \"%s\".",
												 jcs_display(tok.data, tok.len)));
		}
		else
		{
			uint32		idx = 0;
			int			i;
			bool		valid = tok.len > 0 && tok.len <= 9 &&
				!(tok.len > 1 && tok.data[0] == '0');

			for (i = 0; valid && i < tok.len; i++)
			{
				if (tok.data[i] < '0' || tok.data[i] > '9')
					valid = false;
				else
					idx = idx * 10 + (tok.data[i] - '0');
			}
			if (!valid || idx >= JsonContainerSize(jc))
				jcs_field_missing(spec, psprintf("The array has no element \"%s\".",
												 jcs_display(tok.data, tok.len)));
			cur = getIthJsonbValueFromContainer((JsonbContainer *) jc, idx);
		}
	}
	return cur;
}

/*
 * idem_hash(doc jsonb, fields text[], numbers text) returns text
 *
 * The hash of the object that maps each field spec to its value, so that
 * any JCS implementation can reproduce it from the same projection.
 */
Datum
idem_hash_fields(PG_FUNCTION_ARGS)
{
	Jsonb	   *jb;
	ArrayType  *arr;
	JcsNumbers	numbers;
	JcsState	st;
	MemoryContext callcxt;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	int			i;
	JcsMember  *m;
	JsonbValue **values;

	jcs_check_encoding();
	numbers = jcs_numbers_arg(fcinfo, 2);
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("identity fields must not be null"),
				 errhint("Name the members that identify the event, for example ARRAY['id'].")));
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	jb = PG_GETARG_JSONB_P(0);
	arr = PG_GETARG_ARRAYTYPE_P(1);

	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("identity fields must be a one-dimensional array")));
	if (!JB_ROOT_IS_OBJECT(jb) || JB_ROOT_IS_SCALAR(jb))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot take identity fields from %s", jcs_jsonb_type_name(jb)),
				 errdetail("idem_hash(doc, fields) needs a JSON object.")));

	callcxt = jcs_begin(&st, numbers, true, 0);

	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT,
					  &elems, &nulls, &n);
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("identity fields must not be empty"),
				 errdetail("A hash of no fields would be the same for every document."),
				 errhint("Name the members that identify the event, for example ARRAY['id'].")));

	m = palloc(n * sizeof(JcsMember));
	values = palloc(n * sizeof(JsonbValue *));
	for (i = 0; i < n; i++)
	{
		char	   *spec;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("identity field %d is null", i + 1),
					 errhint("Remove the null or replace it with a member name or JSON pointer.")));
		spec = TextDatumGetCString(elems[i]);
		m[i].key = spec;
		m[i].keylen = strlen(spec);
		m[i].voff = i;
		values[i] = jcs_resolve_field(jb, spec);
	}

	jcs_sort_members(m, n);
	jcs_putc(&st.sink, '{');
	for (i = 0; i < n; i++)
	{
		if (i > 0)
		{
			if (jcs_key_cmp(m[i - 1].key, m[i - 1].keylen,
							m[i].key, m[i].keylen) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("identity field \"%s\" is listed twice",
								jcs_display(m[i].key, m[i].keylen))));
			jcs_putc(&st.sink, ',');
		}
		jcs_put_string(&st.sink, m[i].key, m[i].keylen);
		jcs_putc(&st.sink, ':');
		jcs_path_push(&st, m[i].key, m[i].keylen,
					  m[i].key[0] == '/' ? JCS_PATH_POINTER : -1);
		jcs_emit_jsonbvalue(&st, values[m[i].voff]);
		jcs_path_pop(&st);
	}
	jcs_putc(&st.sink, '}');

	PG_RETURN_TEXT_P(jcs_finish_hash(&st, callcxt));
}
