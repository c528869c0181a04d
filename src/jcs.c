/*-------------------------------------------------------------------------
 *
 * jcs.c
 *	  The toolkit of idem_gate's RFC 8785 (JCS) serializer: the output sink,
 *	  string escaping, member-name order and the path of the value being
 *	  written, for error messages.
 *
 * The walkers (jcs_jsonb.c for jsonb, jcs_json.c for json text) and the
 * number formatter (jcs_number.c) write through these functions; the SQL
 * entry points in canonical.c set a JcsState up with jcs_init() and read
 * the result.  Nothing here calls back into those files.
 *
 * The sink either collects the whole canonical text (idem_canonical) or
 * feeds it to SHA-256 through a small staging buffer (idem_hash), so that
 * hashing a document never holds its canonical form in memory.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/cryptohash.h"
#include "common/sha2.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/memutils.h"

#include "jcs.h"

/* hash mode staging buffer */
#define JCS_HASH_CHUNK		(64 * 1024)

/* longest member name or field shown in a message, in characters */
#define JCS_DISPLAY_CHARS	64

/*
 * Escapes of RFC 8785 section 3.2.2.2, by byte: 0 = copy the byte, 'u' =
 * \u00xx with lowercase hex, anything else = backslash and that letter.
 */
const char jcs_escape[256] = {
	'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'b', 't', 'n', 'u', 'f', 'r', 'u', 'u',
	'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u',
	0, 0, '"', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, '\\', 0, 0, 0,
	/* 0x60 .. 0xff: all zero */
};
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

/* qsort comparator of jcs_sort_members: members by name. */
static int
member_cmp(const void *a, const void *b)
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
		qsort(m, n, sizeof(JcsMember), member_cmp);
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
 * Make room for a deeper path (see jcs_path_push).
 */
void
jcs_path_grow(JcsState *st)
{
	st->maxdepth *= 2;
	st->path = repalloc(st->path, st->maxdepth * sizeof(JcsPathElem));
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
 * Set up the state of one call in the current memory context.  In hash
 * mode the sink stages bytes for SHA-256; in text mode its buffer is
 * allocated in textcxt (which outlives the call), sized for size_hint
 * bytes of input, with room for the text header, so that it can become the
 * result as is.
 */
void
jcs_init(JcsState *st, JcsNumbers numbers, bool hash, size_t size_hint,
		 MemoryContext textcxt)
{
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
		st->sink.data = MemoryContextAlloc(textcxt, st->sink.cap);
		st->sink.len = VARHDRSZ;
	}
}

/*
 * End a hash mode call: write the 64 lowercase hex digits of the SHA-256
 * digest of everything written into hex (not terminated).
 */
void
jcs_hash_hex(JcsState *st, char *hex)
{
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	static const char hexdigits[] = "0123456789abcdef";
	int			i;

	jcs_sink_grow(&st->sink, 0);	/* flush */
	if (pg_cryptohash_final(st->sink.hash, digest, sizeof(digest)) < 0)
		elog(ERROR, "could not finalize SHA-256 context: %s",
			 pg_cryptohash_error(st->sink.hash));
	pg_cryptohash_free(st->sink.hash);
	st->sink.hash = NULL;
	for (i = 0; i < PG_SHA256_DIGEST_LENGTH; i++)
	{
		hex[2 * i] = hexdigits[digest[i] >> 4];
		hex[2 * i + 1] = hexdigits[digest[i] & 0xf];
	}
}
