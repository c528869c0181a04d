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
extern void jcs_sink_grow(JcsSink *sink, size_t need);
extern void jcs_sink_put_big(JcsSink *sink, const char *p, size_t n);
extern void jcs_put_string(JcsSink *sink, const char *s, size_t len);
extern int	jcs_key_cmp(const char *a, int alen, const char *b, int blen);
extern void jcs_sort_members(JcsMember *m, int n);
extern void jcs_path_push(JcsState *st, const char *key, int keylen, int index);
extern char *jcs_path_text(JcsState *st);
extern char *jcs_display(const char *s, int len);

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

/* Leave the value entered with jcs_path_push. */
static inline void
jcs_path_pop(JcsState *st)
{
	st->depth--;
}

#endif							/* IDEM_GATE_JCS_H */
