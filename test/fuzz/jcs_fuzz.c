/*-------------------------------------------------------------------------
 *
 * jcs_fuzz.c
 *	  The coverage-guided fuzzer of idem_gate's canonical-JSON toolkit:
 *	  the json text parser, the number formatting and the UTF-16 ordering
 *	  of member names, linked unchanged from src/ and run in-process.
 *
 * An input's first byte chooses what the rest is:
 *	  bit 0		numbers => 'rfc' when set, 'safe' when clear;
 *	  bit 1		a number: 8 bytes of an IEEE-754 double and 1 byte of
 *				precision, written with printf's %.*g as the whole
 *				document (so that every double reaches the formatting);
 *				when clear, the rest is json text.
 *
 * Each input is checked against what the contract says, not only for a
 * crash:
 *	- PostgreSQL's own json parser (common/jsonapi.c, as json_in runs it)
 *	  decides what is json, among inputs of valid UTF-8 (the server checks
 *	  the encoding of every text before the toolkit sees it): the toolkit refuses everything it refuses, with
 *	  22P02, and accepts everything else except a duplicate member name
 *	  (22030), a number no double holds (22003), a lone surrogate (22P02),
 *	  and too deep (54001) or too large (54000);
 *	- an accepted document's canonical form is valid UTF-8 and json, is
 *	  its own canonical form, and its SHA-256 is what hash mode gives;
 *	- what numbers => 'safe' accepts, 'rfc' gives the same bytes for;
 *	- under 'rfc' a number's form reads back as the same double.
 * A violation aborts, which the fuzzer records as a crash.
 *
 * Built with -DJCS_REPLAY the file has a main() instead: it runs the same
 * checks over the files and directories named, and with --print writes one
 * line per input for the differential test against another RFC 8785
 * implementation (oracle.mjs).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "common/cryptohash.h"
#include "common/jsonapi.h"
#include "common/sha2.h"
#include "mb/pg_wchar.h"
#include "utils/elog.h"

#include "jcs.h"
#include "jcs_json.h"
#include "pg_runtime.h"

/* One run of the toolkit over one document. */
typedef struct Run
{
	const char *text;
	size_t		len;
	JcsNumbers	numbers;
	bool		hash;
	JcsState	st;
	/* results */
	char	   *out;			/* text mode: the canonical form */
	size_t		outlen;
	char		hex[65];		/* hash mode */
} Run;

/* What --print writes, for the replay's differential test. */
static bool print_results = false;

#ifdef JCS_REPLAY
/* the replay goes on to the next input after a violation, and counts it */
static sigjmp_buf replay_next;
static int	violations = 0;
#endif

/*
 * The body of one call: what canonical.c does for idem_canonical() and
 * idem_hash() of a json value.
 */
static void
run_call(void *arg)
{
	Run		   *r = arg;

	jcs_init(&r->st, r->numbers, r->hash, r->len, NULL);
	jcs_emit_json_text(&r->st, r->text, r->len);
	if (r->hash)
	{
		jcs_hash_hex(&r->st, r->hex);
		r->hex[64] = '\0';
	}
	else
	{
		r->out = r->st.sink.data + VARHDRSZ;
		r->outlen = r->st.sink.len - VARHDRSZ;
	}
}

/*
 * Run the toolkit; the error, if any, is in rt_error.  The SHA-256 context
 * of a call that failed is freed here, as the server's resource owner
 * frees it at the end of the transaction.
 */
static bool
canonical(Run *r, const char *text, size_t len, JcsNumbers numbers, bool hash)
{
	bool		ok;

	memset(r, 0, sizeof(*r));
	r->text = text;
	r->len = len;
	r->numbers = numbers;
	r->hash = hash;
	ok = rt_try(run_call, r);
	if (r->st.sink.hash)
		pg_cryptohash_free(r->st.sink.hash);
	return ok;
}

/* Stop the fuzzer on a broken promise, saying which. */
static void
violation(const char *what, const char *text, size_t len)
{
	fprintf(stderr, "idem_gate jcs_fuzz: %s\n  input (%zu bytes): %.*s\n",
			what, len, (int) Min(len, 400), text);
	if (rt_error.sqlstate)
		fprintf(stderr, "  error %s: %s\n", rt_sqlstate(rt_error.sqlstate),
				rt_error.message);
#ifdef JCS_REPLAY
	violations++;
	siglongjmp(replay_next, 1);
#else
	abort();
#endif
}

/* Whether len bytes are valid UTF-8 with no NUL, as a server's text is. */
static bool
valid_text(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *) s;

	while (len > 0)
	{
		int			l;

		if (*p == 0)
			return false;
		l = pg_utf_mblen(p);
		if ((size_t) l > len || !pg_utf8_islegal(p, l))
			return false;
		p += l;
		len -= l;
	}
	return true;
}

/* Whether PostgreSQL's json input function accepts the text. */
static bool
pg_json_accepts(const char *text, size_t len)
{
	char	   *copy = palloc(len + 1);
	JsonLexContext *lex;
	JsonParseErrorType rc;

	memcpy(copy, text, len);
	copy[len] = '\0';
#if PG_VERSION_NUM >= 170000
	lex = makeJsonLexContextCstringLen(NULL, copy, len, PG_UTF8, false);
#else
	lex = makeJsonLexContextCstringLen(copy, len, PG_UTF8, false);
#endif
	rc = pg_parse_json(lex, &nullSemAction);
	return rc == JSON_SUCCESS;
}

/* SHA-256 of a buffer, as lowercase hex. */
static void
sha256_hex(const char *p, size_t len, char *hex)
{
	uint8		d[PG_SHA256_DIGEST_LENGTH];
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);
	int			i;

	if (ctx == NULL || pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) p, len) < 0 ||
		pg_cryptohash_final(ctx, d, sizeof(d)) < 0)
		abort();
	pg_cryptohash_free(ctx);
	for (i = 0; i < PG_SHA256_DIGEST_LENGTH; i++)
		sprintf(hex + 2 * i, "%02x", d[i]);
}

/*
 * The refusals the contract allows for a document PostgreSQL calls json.
 */
static bool
allowed_refusal_of_json(void)
{
	switch (rt_error.sqlstate)
	{
		case ERRCODE_DUPLICATE_JSON_OBJECT_KEY_VALUE:
		case ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE:
		case ERRCODE_STATEMENT_TOO_COMPLEX:
		case ERRCODE_PROGRAM_LIMIT_EXCEEDED:
			return true;
		case ERRCODE_INVALID_TEXT_REPRESENTATION:
			/* a lone surrogate, which json_in lets through */
			return strstr(rt_error.message, "invalid input syntax") != NULL;
		default:
			return false;
	}
}

/* Write the bytes as base64 (for --print). */
static void
put_base64(const char *p, size_t len)
{
	static const char b64[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t		i;

	for (i = 0; i + 2 < len; i += 3)
		printf("%c%c%c%c", b64[(p[i] >> 2) & 63],
			   b64[((p[i] & 3) << 4) | ((p[i + 1] >> 4) & 15)],
			   b64[((p[i + 1] & 15) << 2) | ((p[i + 2] >> 6) & 3)],
			   b64[p[i + 2] & 63]);
	if (len - i == 1)
		printf("%c%c==", b64[(p[i] >> 2) & 63], b64[(p[i] & 3) << 4]);
	else if (len - i == 2)
		printf("%c%c%c=", b64[(p[i] >> 2) & 63],
			   b64[((p[i] & 3) << 4) | ((p[i + 1] >> 4) & 15)],
			   b64[(p[i + 1] & 15) << 2]);
	if (len == 0)
		printf("-");
}

/*
 * Check one document under one policy against every promise above.
 */
static void
check_document(const char *text, size_t len, JcsNumbers numbers)
{
	Run			t,
				h,
				again;
	bool		ok,
				hok;
	bool		is_text = valid_text(text, len);
	bool		is_json = is_text && pg_json_accepts(text, len);
	int			sqlstate;
	char		hex[65];

	ok = canonical(&t, text, len, numbers, false);
	sqlstate = rt_error.sqlstate;
	if (print_results)
	{
		printf("%s\t", numbers == JCS_NUMBERS_RFC ? "rfc" : "safe");
		put_base64(text, len);
		if (ok)
		{
			printf("\tok\t");
			put_base64(t.out, t.outlen);
		}
		else
			printf("\t%s\t-", rt_sqlstate(sqlstate));
		printf("\t%s\n", is_json ? "json" : "notjson");
	}
	if (!is_text)
	{
		/*
		 * The server checks the encoding of every text it is given, so the
		 * toolkit never sees these bytes there: only that it neither
		 * crashes nor reports an error the contract does not name.
		 */
		if (!ok && sqlstate != ERRCODE_INVALID_TEXT_REPRESENTATION &&
			!allowed_refusal_of_json())
			violation("bytes that are not UTF-8 refused with an unnamed SQLSTATE", text, len);
		return;
	}
	if (!ok)
	{
		/*
		 * Text that is not json: the server's json input refuses it before
		 * the toolkit runs, so the toolkit may name whatever it meets
		 * first (a duplicate name before a later syntax error, say), as
		 * long as the contract names it.
		 */
		if (!is_json && !allowed_refusal_of_json())
			violation("text that is not json refused with an unnamed SQLSTATE", text, len);
		if (is_json && !allowed_refusal_of_json())
			violation("json refused with a SQLSTATE the contract does not name", text, len);
	}
	else
	{
		if (!is_json)
			violation("text that PostgreSQL's json input refuses was accepted", text, len);
		if (!valid_text(t.out, t.outlen))
			violation("canonical form is not valid UTF-8", text, len);
		if (!pg_json_accepts(t.out, t.outlen))
			violation("canonical form is not json", text, len);
		if (!canonical(&again, t.out, t.outlen, numbers, false))
			violation("canonical form refused when canonicalized again", t.out, t.outlen);
		if (again.outlen != t.outlen || memcmp(again.out, t.out, t.outlen) != 0)
			violation("canonical form is not its own canonical form", text, len);
	}

	/* hash mode agrees with text mode */
	hok = canonical(&h, text, len, numbers, true);
	if (hok != ok || (!ok && rt_error.sqlstate != sqlstate))
		violation("hash mode and text mode disagree on refusing", text, len);
	if (ok)
	{
		sha256_hex(t.out, t.outlen, hex);
		if (strcmp(hex, h.hex) != 0)
			violation("hash mode is not the SHA-256 of the canonical form", text, len);
	}

	/* what 'safe' accepts, 'rfc' writes the same */
	if (ok && numbers == JCS_NUMBERS_SAFE)
	{
		Run			r;

		if (!canonical(&r, text, len, JCS_NUMBERS_RFC, false))
			violation("numbers => 'rfc' refused what 'safe' accepted", text, len);
		if (r.outlen != t.outlen || memcmp(r.out, t.out, t.outlen) != 0)
			violation("numbers => 'rfc' and 'safe' wrote different forms", text, len);
	}

	/* a lone number under 'rfc' reads back as the same double */
	if (ok && numbers == JCS_NUMBERS_RFC && len > 0 && len < 1000 &&
		(isdigit((unsigned char) text[0]) || text[0] == '-'))
	{
		size_t		i;
		double		x,
					y;

		for (i = 0; i < len; i++)
			if (!strchr("0123456789+-.eE", text[i]) || text[i] == '\0')
				return;
		x = strtod(pnstrdup(text, len), NULL);
		y = strtod(pnstrdup(t.out, t.outlen), NULL);
		if (!(x == y || (x == 0 && y == 0)))
			violation("numbers => 'rfc' changed the double", text, len);
	}
}

/*
 * One fuzzer input: decode it, check it, free what it allocated.
 */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	JcsNumbers	numbers;

	if (size < 1)
		return 0;
	numbers = (data[0] & 1) ? JCS_NUMBERS_RFC : JCS_NUMBERS_SAFE;
	if (data[0] & 2)
	{
		double		x;
		char		buf[64];
		int			n;

		if (size < 10)
			return 0;
		memcpy(&x, data + 1, sizeof(x));
		if (!isfinite(x))
			return 0;
		n = snprintf(buf, sizeof(buf), "%.*g", 1 + data[9] % 17, x);
		check_document(buf, n, numbers);
	}
	else
		check_document((const char *) data + 1, size - 1, numbers);
	rt_reset();
	return 0;
}

#ifdef JCS_REPLAY
/* Replay one file as an input. */
static void
replay_file(const char *path)
{
	FILE	   *f = fopen(path, "rb");
	static uint8_t buf[1 << 22];
	uint8_t    *input;
	size_t		n;

	if (f == NULL)
	{
		perror(path);
		exit(2);
	}
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	/*
	 * an input of exactly its own size, as libFuzzer hands it over, so that
	 * AddressSanitizer sees a read one byte past its end
	 */
	input = malloc(n > 0 ? n : 1);
	if (input == NULL)
	{
		perror(path);
		exit(2);
	}
	memcpy(input, buf, n);
	if (sigsetjmp(replay_next, 0) == 0)
		LLVMFuzzerTestOneInput(input, n);
	else
	{
		fprintf(stderr, "  in %s\n", path);
		rt_reset();
	}
	free(input);
}

/* Replay a file, or every file of a directory, in name order. */
static int
replay_path(const char *path)
{
	struct stat sb;
	struct dirent **names;
	int			n,
				i,
				count = 0;

	if (stat(path, &sb) != 0)
	{
		perror(path);
		exit(2);
	}
	if (!S_ISDIR(sb.st_mode))
	{
		replay_file(path);
		return 1;
	}
	n = scandir(path, &names, NULL, alphasort);
	for (i = 0; i < n; i++)
	{
		if (names[i]->d_name[0] != '.')
		{
			char		p[4096];

			snprintf(p, sizeof(p), "%s/%s", path, names[i]->d_name);
			count += replay_path(p);
		}
		free(names[i]);
	}
	free(names);
	return count;
}

/*
 * jcs_replay [--print] PATH...: the checks over saved inputs (the seed
 * corpus and every input a fuzzing run kept); reports every violation
 * and exits non-zero if there was one.
 */
int
main(int argc, char **argv)
{
	int			i,
				count = 0;

	for (i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "--print") == 0)
			print_results = true;
		else
			count += replay_path(argv[i]);
	}
	fprintf(stderr, "jcs_replay: %d inputs checked, %d violations\n",
			count, violations);
	return violations ? 1 : 0;
}
#endif
