/*-------------------------------------------------------------------------
 *
 * jcs.h
 *	  The toolkit of idem_gate's RFC 8785 (JCS) canonical JSON serializer
 *	  (jcs.c): the state of one call, the output sink, strings, member-name
 *	  order and the path of the value being written.
 *
 * The serializer writes into a JcsSink, which either collects the whole
 * canonical text (idem_canonical) or feeds it to SHA-256 in chunks
 * (idem_hash), so that hashing a document never holds its canonical form in
 * memory.  The walkers that use it are declared in jcs_jsonb.h and
 * jcs_json.h, the number formatter in jcs_number.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEM_GATE_JCS_H
#define IDEM_GATE_JCS_H

#include "common/cryptohash.h"

/* The numbers => policies of the SQL API. */
typedef enum JcsNumbers
{
	JCS_NUMBERS_SAFE,			/* round, but never lose a value >= 2^53 or
								 * below 2^-1022 */
	JCS_NUMBERS_RFC				/* round every number to the nearest double */
} JcsNumbers;

/*
 * Output of the serializer.  In text mode data starts with VARHDRSZ bytes
 * reserved for the text header and grows as needed; in hash mode data is a
 * fixed staging buffer flushed into hash whenever it fills up.
 */
typedef struct JcsSink
{
	char	   *data;
	size_t		len;
	size_t		cap;
	pg_cryptohash_ctx *hash;	/* NULL in text mode */
} JcsSink;

/* One step of the path from the root to the value being serialized. */
typedef struct JcsPathElem
{
	const char *key;			/* member name, or NULL for an array element */
	int			keylen;
	int			index;			/* array index when key is NULL */
} JcsPathElem;

/* JcsPathElem.index of a key that is itself a JSON pointer (fields) */
#define JCS_PATH_POINTER	(-2)

/* State of one call of a canonical JSON function. */
typedef struct JcsState
{
	JcsSink		sink;
	JcsNumbers	numbers;
	JcsPathElem *path;			/* path[0 .. depth-1] leads to the current
								 * value; used only for error messages */
	int			depth;
	int			maxdepth;
	struct JcsMember *members;	/* stack of object members being sorted */
	int			nmembers;
	int			maxmembers;
} JcsState;

/*
 * An object member waiting to be written: its name (UTF-8, unescaped) and
 * where its value is.  jsonb members point into the container, json members
 * give the byte offset of the value in the source text.
 */
typedef struct JcsMember
{
	const char *key;
	int			keylen;
	uint32		ventry;			/* jsonb: the value's JEntry */
	uint32		voff;			/* jsonb: offset of the value's data; json:
								 * offset of the value in the text */
	uint32		vend;			/* jsonb: end of the value's data */
} JcsMember;

extern void jcs_init(JcsState *st, JcsNumbers numbers, bool hash,
					 size_t size_hint, MemoryContext textcxt);
extern void jcs_hash_hex(JcsState *st, char *hex);

/*
 * Escapes of RFC 8785 section 3.2.2.2, by byte: 0 = copy the byte, 'u' =
 * \u00xx with lowercase hex, anything else = backslash and that letter.
 */
extern const char jcs_escape[256];

extern void jcs_sink_grow(JcsSink *sink, size_t need);
extern void jcs_sink_put_big(JcsSink *sink, const char *p, size_t n);
extern void jcs_sort_members(JcsMember *m, int n);
extern void jcs_path_grow(JcsState *st);
extern char *jcs_path_text(JcsState *st);
extern char *jcs_display(const char *s, int len);

/*
 * The helpers below run for every value written; they are inline so that
 * the walkers, each in its own file, pay no call for them.
 */

/* Append one byte. */
static inline void
jcs_putc(JcsSink *sink, char c)
{
	if (unlikely(sink->len >= sink->cap))
		jcs_sink_grow(sink, 1);
	sink->data[sink->len++] = c;
}

/* Append n bytes. */
static inline void
jcs_putn(JcsSink *sink, const char *p, size_t n)
{
	if (unlikely(sink->len + n > sink->cap))
	{
		jcs_sink_put_big(sink, p, n);
		return;
	}
	memcpy(sink->data + sink->len, p, n);
	sink->len += n;
}

/*
 * Append a JSON string in RFC 8785 form.  s is UTF-8 with escapes already
 * decoded (it may contain U+0000 when it comes from a json document).
 * Everything but the control characters, '"' and '\' is copied raw.
 */
static inline void
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
static inline int
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

/*
 * Enter a member (key != NULL) or an array element, for error messages.
 */
static inline void
jcs_path_push(JcsState *st, const char *key, int keylen, int index)
{
	if (unlikely(st->depth >= st->maxdepth))
		jcs_path_grow(st);
	st->path[st->depth].key = key;
	st->path[st->depth].keylen = keylen;
	st->path[st->depth].index = index;
	st->depth++;
}

/* Leave the value entered with jcs_path_push. */
static inline void
jcs_path_pop(JcsState *st)
{
	st->depth--;
}

#endif							/* IDEM_GATE_JCS_H */
